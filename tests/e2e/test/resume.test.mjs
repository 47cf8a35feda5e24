// Hibernated sessions survive a server restart (issue 28), with the official SDK.
// HTTP, two tenants: alice's first session hibernates after its policy's 3 s session_idle
// (its HTTP session expires and its files are kept), her second is still live when the
// server is stopped (it hibernates at shutdown); a second server on the same state dir
// brings both back when the SDK reconnects with their session ids: every file byte for byte,
// the first call saying the server restarted. bob's token with alice's id gets 404, as an
// unknown id; DELETE ends a session for good (a later reconnect is 404, its record gone).
// stdio: `serve --resume ID` after SIGTERM brings the files back; an unknown id is refused
// at start naming the id and `mcpcell session list`.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { binary, Client, connect, waitFor } from '../lib/harness.mjs';
import { post, startHttpServer, StreamableHTTPClientTransport } from './http_util.mjs';

const sha = (t) => createHash('sha256').update(t).digest('hex');
const kAlice = 'alice-token-resume-0001';
const kBob = 'bob-token-resume-0002';

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// Every path under /workspace (but the tools' own .mcpcell), one line each: type, mode,
// sha256 of files, target of symlinks.
const kManifest = `cd /workspace && find . -mindepth 1 -not -path './.mcpcell' -not -path './.mcpcell/*' \\
  | LC_ALL=C sort | while IFS= read -r p; do
  if [ -L "$p" ]; then echo "L $p -> $(readlink "$p")";
  elif [ -f "$p" ]; then echo "F $p $(stat -c %a "$p") $(sha256sum < "$p" | cut -d' ' -f1)";
  else echo "$(stat -c '%F %a' "$p") $p"; fi; done`;
const kWrite = (tag) => `cd /workspace && mkdir -p d/e && echo ${tag} > a.txt && ` +
  'head -c 300000 /dev/urandom > d/e/blob && chmod 751 a.txt && ln -s a.txt link';

const run = async (s, command) => {
  const r = await s.client.callTool({ name: 'run_command', arguments: { command } });
  assert.notEqual(r.isError, true, text(r));
  assert.equal(r.structuredContent.exit_code, 0, text(r));
  return { stdout: r.structuredContent.stdout, text: text(r) };
};

// An SDK client on `url`; with `sessionId` it reconnects to that session (no initialize).
async function connectAs(url, token, sessionId) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    ...(sessionId ? { sessionId } : {}),
  });
  const client = new Client({ name: 'e2e-resume', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  return { client, transport };
}

function sessionList(stateDir) {
  const out = execFileSync(binary('mcpcell'), ['session', 'list', '--json', '--state-dir', stateDir]);
  return JSON.parse(out.toString());
}

const toolsCall = (id) => ({ jsonrpc: '2.0', id, method: 'tools/call',
  params: { name: 'read_file', arguments: { path: 'a.txt' } } });

describe('HTTP sessions survive a server restart', () => {
  let dir;
  let stateDir;
  let config;
  let server;
  const open = [];

  const start = async () => startHttpServer('mcpcell', ['serve', '--http', '127.0.0.1:0',
    '--http-config', config, '--state-dir', stateDir, '--warm-cells', '0']);

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-resume-e2e-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-resume-state-'));
    chmodSync(dir, 0o755);
    writeFileSync(path.join(dir, 'alice.toml'), 'name = "alice-resume"\n[time]\nsession_idle = "3s"\n');
    config = path.join(dir, 'http.toml');
    writeFileSync(config, `
[[tenant]]
name = "alice"
token_sha256 = ["${sha(kAlice)}"]
policy = "${dir}/alice.toml"

[[tenant]]
name = "bob"
token_sha256 = ["${sha(kBob)}"]
policy = "default"
`);
    server = await start();
  });
  after(async () => {
    for (const s of open) await s.client.close().catch(() => {});
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('brings back an idle-hibernated and a live session, byte for byte, and DELETE ends one', async () => {
    const idle = await connectAs(server.url, kAlice);
    open.push(idle);
    const idleId = idle.transport.sessionId;
    await run(idle, kWrite('idle'));
    const idleManifest = (await run(idle, kManifest)).stdout;
    const info = (await idle.client.callTool({ name: 'session_info', arguments: {} })).structuredContent;
    assert.equal(info.resume_id, idleId, 'session_info names the id that resumes the session');

    // The HTTP session expires after 3 s idle: its files are kept and its record written.
    await waitFor(() => sessionList(stateDir).some((s) => s.session === idleId),
      { timeoutMs: 20000, intervalMs: 250, what: `a record for ${idleId}` });
    const listed = sessionList(stateDir).find((s) => s.session === idleId);
    assert.equal(listed.tenant, 'alice');
    assert.ok(listed.stored_bytes >= 300000, `stored_bytes ${listed.stored_bytes}`);

    // A second session still live at shutdown.
    const live = await connectAs(server.url, kAlice);
    open.push(live);
    const liveId = live.transport.sessionId;
    await run(live, kWrite('live'));
    const liveManifest = (await run(live, kManifest)).stdout;

    const code = await server.stop();
    assert.equal(code, 0, `server exit code; stderr:\n${server.stderr()}`);
    assert.ok(sessionList(stateDir).some((s) => s.session === liveId), 'the live session hibernated at shutdown');
    server = await start();

    // bob's token with alice's id: 404, exactly as an unknown id.
    const foreign = await post(server.url, toolsCall(7),
      { Authorization: `Bearer ${kBob}`, 'Mcp-Session-Id': idleId });
    const unknown = await post(server.url, toolsCall(7),
      { Authorization: `Bearer ${kBob}`, 'Mcp-Session-Id': '0'.repeat(32) });
    assert.equal(foreign.status, 404, foreign.text);
    assert.equal(unknown.status, 404, unknown.text);
    assert.equal(foreign.text, unknown.text);

    for (const [id, manifest, tag] of [[idleId, idleManifest, 'idle'], [liveId, liveManifest, 'live']]) {
      const back = await connectAs(server.url, kAlice, id);
      open.push(back);
      const first = await back.client.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
      assert.notEqual(first.isError, true, text(first));
      assert.match(text(first), new RegExp(`${tag}\\n`));
      assert.match(text(first), /hibernated at .* and the server restarted since: its programs were stopped, its files kept/);
      assert.equal((await run(back, kManifest)).stdout, manifest, `${tag}: files byte for byte`);
      const again = (await back.client.callTool({ name: 'session_info', arguments: {} })).structuredContent;
      assert.equal(again.resume_id, id);
    }

    // DELETE ends the revived session for good.
    const gone = await connectAs(server.url, kAlice, idleId);
    await run(gone, 'true');
    await gone.transport.terminateSession();
    const later = await post(server.url, toolsCall(8),
      { Authorization: `Bearer ${kAlice}`, 'Mcp-Session-Id': idleId });
    assert.equal(later.status, 404, later.text);
    assert.ok(!sessionList(stateDir).some((s) => s.session === idleId), 'its record is gone');
  });
});

describe('stdio sessions survive a server restart with serve --resume', () => {
  let stateDir;
  before(() => { stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-resume-stdio-')); });
  after(() => rmSync(stateDir, { recursive: true, force: true }));

  it('resumes the files after SIGTERM and refuses an unknown id naming it', async () => {
    const args = ['serve', '--state-dir', stateDir, '--warm-cells', '0'];
    const first = await connect({ binaryName: 'mcpcell', args });
    await run(first, kWrite('stdio'));
    const manifest = (await run(first, kManifest)).stdout;
    const info = (await first.client.callTool({ name: 'session_info', arguments: {} })).structuredContent;
    assert.match(info.resume_id, /^[0-9a-f]{32}$/);
    const child = first.transport._process;
    const exited = new Promise((r) => child.on('exit', (code) => r(code)));
    child.kill('SIGTERM');
    assert.equal(await exited, 0, first.stderr());
    await first.close().catch(() => {});
    assert.ok(existsSync(path.join(stateDir, 'sessions', `${info.resume_id}.json`)));

    const back = await connect({ binaryName: 'mcpcell', args: [...args, '--resume', info.resume_id] });
    try {
      const r = await back.client.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
      assert.notEqual(r.isError, true, text(r));
      assert.match(text(r), /stdio\n/);
      assert.match(text(r), /the server restarted since: its programs were stopped, its files kept/);
      assert.equal((await run(back, kManifest)).stdout, manifest);
    } finally {
      await back.close();
    }
    // Its client closed stdin: the session ended, its record went.
    await waitFor(() => !existsSync(path.join(stateDir, 'sessions', `${info.resume_id}.json`)),
      { timeoutMs: 10000, what: 'the record to go' });

    const bad = spawnSync(binary('mcpcell'), [...args, '--resume', 'f'.repeat(32)], { input: '' });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr.toString(), new RegExp(`${'f'.repeat(32)}.*mcpcell session list`, 's'));
  });

  it('session_info describes a hibernated session without making a cell', async () => {
    const s = await connect({ binaryName: 'mcpcell',
      args: ['serve', '--state-dir', stateDir, '--warm-cells', '0', '--idle-timeout', '2'] });
    try {
      await run(s, 'head -c 50000 /dev/urandom > /workspace/blob');
      const id = (await s.client.callTool({ name: 'session_info', arguments: {} })).structuredContent.resume_id;
      await waitFor(() => existsSync(path.join(stateDir, 'sessions', `${id}.json`)),
        { timeoutMs: 15000, intervalMs: 200, what: 'the session to hibernate' });
      const cellsBefore = readdirSync(path.join(stateDir, 'cells')).length;
      const r = await s.client.callTool({ name: 'session_info', arguments: {} });
      assert.notEqual(r.isError, true, text(r));
      const info = r.structuredContent;
      assert.equal(info.state, 'hibernated', text(r));
      assert.equal(info.cell_id, '');
      assert.equal(info.resume_id, id);
      assert.ok(info.hibernation.files >= 1 && info.hibernation.stored_bytes >= 50000, JSON.stringify(info));
      assert.match(text(r), /its programs were stopped, its files kept/);
      assert.equal(readdirSync(path.join(stateDir, 'cells')).length, cellsBefore, 'no cell was made');
      const next = await s.client.callTool({ name: 'run_command', arguments: { command: 'wc -c < /workspace/blob' } });
      assert.equal(next.structuredContent.stdout, '50000\n');
      assert.match(text(next), /hibernated after 2 s of idle/);
    } finally {
      await s.close();
    }
  });
});
