// The audit trail of `mcpcell serve` (docs/audit.md), driven over stdio by the official MCP
// TypeScript SDK and read back with `mcpcell audit query|verify|export` and `mcpcell usage`:
// one session's whole life (run_code, write_file, edit_file, read_file, an egress refusal)
// yields exactly the expected records (tenant, policy digest, hashes instead of command
// text, no file contents); the chain verifies, a copy with one byte changed does not (exit
// 1, the line named), and the OCSF export parses; a server killed with SIGKILL mid-traffic
// is followed by one that writes `recovered` naming it and its last record, ends the killed
// session as "recovered after a crash" and goes on with the chain (and names a torn last
// line too, when the crash cut one); the metered CPU of a known busy loop matches what the
// loop used; a session's metered egress bytes, CPU and peak memory are within 5% of the
// proxy's connection records, the cgroup's figures at cell.destroy and a known allocation;
// over HTTP, a DELETE and a shutdown are told apart; a session at its time.session_max ends
// as "max lifetime" once its cell is destroyed.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { appendFileSync, chmodSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { binary, connect, waitFor } from '../lib/harness.mjs';
import { connectHttp, startHttpServer } from './http_util.mjs';

const sha256 = (text) => createHash('sha256').update(text).digest('hex');

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

function mcpcell(args) {
  return execFileSync(binary('mcpcell'), args, { encoding: 'utf8' });
}

function query(stateDir, ...filters) {
  return mcpcell(['audit', 'query', '--state-dir', stateDir, ...filters])
    .split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
}

function verify(stateDir) {
  const r = spawnSync(binary('mcpcell'), ['audit', 'verify', '--state-dir', stateDir],
    { encoding: 'utf8' });
  return { status: r.status, out: r.stdout + r.stderr };
}

async function startServer(stateDir, policyFile) {
  return connect({
    binaryName: 'mcpcell',
    args: ['serve', '--state-dir', stateDir, '--policy', policyFile, '--warm-cells', '0'],
  });
}

// Waits for the server process to exit (its shutdown writes the last records).
async function closed(s) {
  const pid = s.transport.pid;
  await s.close();
  await waitFor(async () => {
    try {
      process.kill(pid, 0);
      return false;
    } catch {
      return true;
    }
  }, { timeoutMs: 30000, what: 'the server to exit' });
}

describe('audit trail: one session, a crash, and metering', () => {
  let dir;
  let stateDir;
  let policyFile;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-audit-e2e-'));
    chmodSync(dir, 0o755);  // the cells' uids must be able to reach the state dir inside
    stateDir = path.join(dir, 'state');
    policyFile = path.join(dir, 'audited.toml');
    // Egress is refused (no allowlist): the proxy's refusal is one egress.connection record.
    writeFileSync(policyFile, 'name = "audited"\n\n[network]\negress = "deny"\n\n' +
      '[audit]\ncommands = "hash"\nusage_interval = "10s"\n');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('records one session\'s whole life, in order, and the chain verifies', async () => {
    const s = await startServer(stateDir, policyFile);
    const code = 'print("audited")';
    const run = await s.client.callTool({ name: 'run_code', arguments: { language: 'python', code } });
    assert.match(text(run), /audited/);
    const secret = 'file contents never go in the trail';
    await s.client.callTool({ name: 'write_file', arguments: { path: 'note.txt', content: secret } });
    const edit = await s.client.callTool({ name: 'edit_file',
      arguments: { path: 'note.txt', old_text: 'never', new_text: 'NEVER' } });
    assert.equal(edit.isError ?? false, false, text(edit));
    const read = await s.client.callTool({ name: 'read_file', arguments: { path: 'note.txt' } });
    assert.match(text(read), /NEVER go in the trail/);
    const curl = 'curl -s -o /dev/null -w "%{http_code}" http://refused.example.com/';
    const refused = await s.client.callTool({ name: 'run_command', arguments: { command: curl } });
    assert.match(text(refused), /403/);
    await closed(s);

    const records = query(stateDir);
    const first = records.find((r) => r.type === 'session.start');
    const session = first.session;
    // Session ids are per server ("s1" each): a session is its server's and its id.
    assert.match(first.server, /^[0-9a-f]{8}$/);
    const mine = records.filter((r) => r.session === session && r.server === first.server);
    const types = mine.map((r) => r.type);
    // The proxy writes its record when the refused connection ends, which may be just
    // before or just after the program's exec.end: checked on its own below.
    assert.deepEqual(types.filter((t) => t !== 'egress.connection'), [
      'session.start', 'cell.create', 'exec.start', 'exec.end', 'file.write', 'file.edit',
      'file.read',
      'exec.start', 'exec.end', 'session.end', 'cell.destroy',
    ], types.join(' '));
    const egress = mine.filter((r) => r.type === 'egress.connection');
    assert.equal(egress.length, 1, JSON.stringify(egress));
    assert.equal(egress[0].decision, 'deny');
    assert.equal(egress[0].host, 'refused.example.com');
    assert.ok(egress[0].seq > mine[types.lastIndexOf('exec.start')].seq);

    const start = mine[0];
    assert.equal(start.tenant, '');
    assert.equal(start.policy, 'audited');
    assert.equal(start.client_name, 'mcpcell-e2e');
    assert.equal(start.transport, 'stdio');
    // The digest is of the compiled policy as `mcpcell policy show` prints it.
    const shown = mcpcell(['policy', 'show', policyFile, '--state-dir', stateDir]);
    assert.equal(start.policy_sha256, sha256(shown.slice(shown.indexOf('\n') + 1)));
    assert.equal(start.limits.memory_bytes, 1 << 30);

    const execStart = mine.find((r) => r.type === 'exec.start');
    assert.equal(execStart.tool, 'run_code');
    assert.equal(execStart.command_sha256, sha256(code));
    assert.equal(execStart.command, undefined, 'the text only with commands = "full"');
    const execEnd = mine.find((r) => r.type === 'exec.end');
    assert.equal(execEnd.exit_status, 0);
    assert.equal(execEnd.timed_out, false);
    const write = mine.find((r) => r.type === 'file.write');
    assert.equal(write.path, 'note.txt');
    assert.equal(write.bytes, secret.length);
    assert.equal(write.result, 'ok');
    const edited = mine.find((r) => r.type === 'file.edit');
    assert.deepEqual([edited.path, edited.bytes, edited.result], ['note.txt', secret.length, 'ok']);
    assert.equal(mine.find((r) => r.type === 'file.read').bytes, secret.length);
    const end = mine.find((r) => r.type === 'session.end');
    assert.equal(end.reason, 'client closed');
    // note.txt is in the workspace: at least one block of it on disk at the end.
    assert.ok(end.usage.storage_bytes > 0, JSON.stringify(end.usage));
    assert.deepEqual(end.usage.calls_by_tool,
      { run_code: 1, write_file: 1, edit_file: 1, read_file: 1, run_command: 1 });
    const destroy = mine.find((r) => r.type === 'cell.destroy');
    assert.equal(destroy.result, 'ok', JSON.stringify(destroy));
    assert.deepEqual(destroy.cleanup.left, [], JSON.stringify(destroy.cleanup));
    assert.deepEqual(destroy.cleanup.namespaces, ['pid', 'mount', 'net', 'ipc', 'uts']);
    // null only without a cgroup to count them in; else at least the cell's init.
    const killed = destroy.cleanup.processes_killed;
    assert.ok(killed === null || killed >= 1, JSON.stringify(destroy.cleanup));
    // What it says it removed is gone: the cell dir (last) under the state dir, the cgroup.
    const dirs = destroy.cleanup.dirs_removed;
    assert.equal(dirs.at(-1), path.join(stateDir, 'cells', destroy.cell), JSON.stringify(dirs));
    for (const p of [...dirs, ...destroy.cleanup.cgroup_removed]) assert.ok(!existsSync(p), p);
    const cell = mine.find((r) => r.type === 'cell.create').cell;
    assert.ok(mine.filter((r) => r.type.startsWith('exec.')).every((r) => r.cell === cell));
    const trail = readFileSync(path.join(stateDir, 'audit', 'audit.jsonl'), 'utf8');
    assert.ok(!trail.includes(secret), 'no file contents in the trail');
    assert.ok(!trail.includes('NEVER go'), 'no edited text in the trail');
    assert.ok(!trail.includes('print(\\"audited\\")'), 'no command text with commands = "hash"');

    const v = verify(stateDir);
    assert.equal(v.status, 0, v.out);
    assert.match(v.out, /\nok\n/);

    // One byte changed in a copy of the trail: verify exits 1 naming that line.
    const copy = path.join(dir, 'tampered');
    cpSync(path.join(stateDir, 'audit'), path.join(copy, 'audit'), { recursive: true });
    const lines = trail.split('\n');
    const at = lines.findIndex((l) => l.includes('"type":"file.edit"'));
    lines[at] = lines[at].replace('"type":"file.edit"', '"type":"file.edix"');
    writeFileSync(path.join(copy, 'audit', 'audit.jsonl'), lines.join('\n'));
    const tampered = verify(copy);
    assert.equal(tampered.status, 1, tampered.out);
    assert.match(tampered.out, new RegExp(`TAMPERED: audit\\.jsonl:${at + 1} \\(seq \\d+\\): edited`),
      tampered.out);

    // The OCSF export: one JSON event per line, each with its class.
    const ocsf = mcpcell(['audit', 'export', '--state-dir', stateDir, '--format', 'ocsf'])
      .split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
    assert.equal(ocsf.length, records.length);
    for (const e of ocsf) assert.ok(Number.isInteger(e.class_uid) && e.class_uid > 0, JSON.stringify(e));
  });

  // Kills the server of `s` with SIGKILL while a call runs; returns its server id and the
  // seq of the last record it wrote.
  async function killMidTraffic(s) {
    await s.client.callTool({ name: 'run_command', arguments: { command: 'echo before-crash' } });
    const start = query(stateDir, '--type', 'session.start').at(-1);
    const execs = query(stateDir, '--type', 'exec.start').length;
    const busy = s.client.callTool({ name: 'run_command', arguments: { command: 'sleep 30' } })
      .catch(() => 'killed');
    await waitFor(async () => query(stateDir, '--type', 'exec.start').length > execs,
      { timeoutMs: 10000, what: 'the sleep to start' });
    process.kill(s.transport.pid, 'SIGKILL');
    assert.equal(await busy, 'killed');
    await s.close().catch(() => {});
    const lastSeq = query(stateDir).filter((r) => r.server === start.server).at(-1).seq;
    return { server: start.server, session: start.session, lastSeq };
  }

  it('after kill -9 mid-traffic, the next server records the crash, ends the session and the chain goes on', async () => {
    const killed = await killMidTraffic(await startServer(stateDir, policyFile));
    const again = await startServer(stateDir, policyFile);
    await again.client.callTool({ name: 'run_command', arguments: { command: 'echo after-crash' } });
    await closed(again);
    const recovered = query(stateDir, '--type', 'recovered');
    assert.equal(recovered.length, 1, JSON.stringify(recovered));
    assert.equal(recovered[0].stopped_server, killed.server);
    assert.equal(recovered[0].after_seq, killed.lastSeq);
    assert.match(recovered[0].reason, new RegExp(`^server ${killed.server} \\(pid \\d+\\) stopped without server\\.stop$`));
    // Session ids start again with each server run: the killed one's is ended once, by the
    // next server, after its `recovered` and before that server's own session starts.
    const ended = query(stateDir, '--type', 'session.end')
      .filter((r) => r.reason === 'recovered after a crash');
    assert.equal(ended.length, 1, JSON.stringify(ended));
    assert.equal(ended[0].session, killed.session);
    assert.equal(ended[0].server, killed.server);
    assert.ok(ended[0].seq > recovered[0].seq);
    assert.ok(ended[0].seq < query(stateDir, '--type', 'session.start').at(-1).seq);
    const v = verify(stateDir);
    assert.equal(v.status, 0, v.out);
    assert.match(v.out, new RegExp(`server ${killed.server} stopped without server\\.stop after seq ${killed.lastSeq}; recovered at seq ${recovered[0].seq}`));
    const last = query(stateDir).at(-1);
    assert.ok(last.seq > recovered[0].seq, 'the chain went on after the recovery');
  });

  it('a crash in the middle of a write: the next server names the torn line too', async () => {
    const killed = await killMidTraffic(await startServer(stateDir, policyFile));
    const before = query(stateDir, '--type', 'recovered').length;
    // A SIGKILL lands between two writes almost always; one in the middle of a write leaves
    // the start of a line, which the next server must name: made here, as such a crash would.
    const file = path.join(stateDir, 'audit', 'audit.jsonl');
    const cutOffset = readFileSync(file).length;
    appendFileSync(file, '{"cell":"","hash":"torn by the crash');
    const again = await startServer(stateDir, policyFile);
    await closed(again);
    const recovered = query(stateDir, '--type', 'recovered').slice(before);
    assert.equal(recovered.length, 2, JSON.stringify(recovered));
    assert.equal(recovered[0].torn, true);
    assert.equal(recovered[0].cut_offset, cutOffset);
    assert.equal(recovered[1].stopped_server, killed.server);
    assert.equal(recovered[1].after_seq, killed.lastSeq);
    const v = verify(stateDir);
    assert.equal(v.status, 0, v.out);
    assert.match(v.out, /cut at audit\.jsonl:\d+ \(offset \d+\) after seq \d+; recovered at seq \d+/);
    assert.match(v.out, new RegExp(`server ${killed.server} stopped without server\\.stop`));
  });

  it('meters the CPU a known busy loop used, and mcpcell usage sums it', async () => {
    const s = await startServer(stateDir, policyFile);
    // Busy for about 2 s of CPU, and report the CPU time this process used.
    const code = 'import time\nt = time.process_time()\nwhile time.process_time() - t < 2.0:\n' +
      '    pass\nprint("cpu", time.process_time())\n';
    const r = await s.client.callTool({ name: 'run_code', arguments: { language: 'python', code } });
    const loopCpu = Number(/cpu ([\d.]+)/.exec(text(r))[1]);
    const info = await s.client.callTool({ name: 'session_info', arguments: {} });
    const metered = info.structuredContent.usage;
    // The server's own usage record for the open session ([audit] usage_interval = 10s).
    const usageBefore = query(stateDir, '--type', 'usage').length;
    await waitFor(async () => query(stateDir, '--type', 'usage').length > usageBefore,
      { timeoutMs: 30000, intervalMs: 500, what: 'a usage record' });
    const usageRecord = query(stateDir, '--type', 'usage').at(-1);
    assert.ok(usageRecord.usage.cpu_s >= loopCpu * 0.95, JSON.stringify(usageRecord));
    assert.equal(usageRecord.usage.calls_by_tool.run_code, 1);
    await closed(s);
    const end = query(stateDir, '--type', 'session.end').at(-1);
    // The cell's CPU includes the loop plus the interpreter's start and the cell's own
    // init: at least the loop's, and within 5% of it plus a small fixed allowance.
    for (const cpu of [metered.cpu_s, end.usage.cpu_s]) {
      assert.ok(cpu >= loopCpu * 0.95, `metered ${cpu} s < loop ${loopCpu} s`);
      assert.ok(cpu <= loopCpu * 1.05 + 0.5, `metered ${cpu} s >> loop ${loopCpu} s`);
    }
    assert.ok(end.usage.memory_gib_s > 0);
    assert.ok(end.usage.peak_memory_bytes > 0);

    const report = JSON.parse(mcpcell(['usage', '--state-dir', stateDir, '--format', 'json']));
    // The same id in earlier runs is another session (its own `started`); this run's is last.
    const row = report.sessions.filter((x) => x.session === `${end.server}/${end.session}`).at(-1);
    assert.ok(row && row.started, JSON.stringify(report.sessions));
    assert.equal(row.cpu_s, end.usage.cpu_s);
    assert.equal(row.reason, 'client closed');
    const all = report.sessions.reduce((sum, x) => sum + x.cpu_s, 0);
    assert.ok(Math.abs(report.tenants[0].cpu_s - all) < 1e-6);
    assert.ok(report.tenants[0].cpu_s >= end.usage.cpu_s);
    const csv = mcpcell(['usage', '--state-dir', stateDir, '--format', 'csv']).split('\n');
    assert.equal(csv[0], 'kind,tenant,session,cpu_s,memory_gib_s,peak_memory_bytes,' +
      'wall_active_s,wall_paused_s,egress_up_bytes,egress_down_bytes,storage_bytes,calls');
    assert.match(csv[1], /^tenant,,,/);
  });
});

// The proof of metering: the figures in session.end match the counters they come
// from within 5%: egress bytes (the proxy's egress.connection records of the session), CPU
// (the cell's cgroup as cell.destroy reports it) and peak memory (a known allocation).
describe('audit trail: usage matches the proxy\'s and the cgroup\'s counters', () => {
  let dir;
  let upstream;
  const blobBytes = 4 << 20;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-audit-usage-'));
    chmodSync(dir, 0o755);
    const blob = Buffer.alloc(blobBytes, 'x');
    upstream = http.createServer((req, res) => {
      res.writeHead(200, { 'content-length': blob.length });
      res.end(blob);
    });
    await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  });
  after(async () => {
    await new Promise((r) => upstream.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it('egress bytes, CPU and peak memory of a session within 5% of their sources', async (t) => {
    const port = upstream.address().port;
    const stateDir = path.join(dir, 'state');
    const policyFile = path.join(dir, 'metered.toml');
    writeFileSync(path.join(dir, 'hosts'), '127.0.0.1 files.test\n');
    // The loopback address must be allowed too: the proxy refuses loopback otherwise.
    writeFileSync(policyFile, 'name = "metered"\n\n[network]\negress = "allowlist"\n' +
      `allow = ["files.test:${port}", "127.0.0.1:${port}"]\n`);
    const s = await connect({
      binaryName: 'mcpcell',
      args: ['serve', '--state-dir', stateDir, '--policy', policyFile, '--warm-cells', '0',
        '--egress-hosts', path.join(dir, 'hosts')],
    });
    const got = await s.client.callTool({ name: 'run_command', arguments: {
      command: `curl -sS -o /dev/null -w '%{size_download}' http://files.test:${port}/blob` } });
    assert.equal(got.structuredContent.stdout, String(blobBytes), text(got));
    const mib = 200;
    const code = `import time\nb = b"x" * (${mib} << 20)\nt = time.process_time()\n` +
      'while time.process_time() - t < 1.0:\n    pass\nprint(len(b))\n';
    const r = await s.client.callTool({ name: 'run_code', arguments: { language: 'python', code } });
    assert.equal(r.isError ?? false, false, text(r));
    await closed(s);

    const records = query(stateDir);
    const start = records.find((x) => x.type === 'session.start');
    const mine = records.filter((x) => x.session === start.session && x.server === start.server);
    const usage = mine.find((x) => x.type === 'session.end').usage;
    const within = (metered, source, what) => assert.ok(
      Math.abs(metered - source) <= 0.05 * source, `${what}: metered ${metered}, source ${source}`);
    const proxied = mine.filter((x) => x.type === 'egress.connection')
      .reduce((sum, x) => sum + x.bytes_down, 0);
    assert.ok(proxied >= blobBytes, `the proxy moved ${proxied} bytes`);
    within(usage.egress_down_bytes, proxied, 'egress_down_bytes');
    const destroy = mine.find((x) => x.type === 'cell.destroy');
    assert.ok(destroy.cpu_s >= 1.0, JSON.stringify(destroy));
    within(usage.cpu_s, destroy.cpu_s, 'cpu_s');
    const allocated = mib << 20;
    assert.ok(usage.peak_memory_bytes >= allocated * 0.95, JSON.stringify(usage));
    // Beyond the allocation: the interpreter, cell init and the page cache of what they read.
    assert.ok(usage.peak_memory_bytes <= allocated * 1.05 + (64 << 20), JSON.stringify(usage));
    assert.equal(usage.peak_memory_bytes, destroy.peak_memory_bytes);
    t.diagnostic(`egress_down ${usage.egress_down_bytes} vs proxy ${proxied}; cpu_s ${usage.cpu_s} vs ` +
      `cgroup ${destroy.cpu_s}; peak ${usage.peak_memory_bytes} for ${allocated} allocated`);
  });
});

describe('audit trail over HTTP: why sessions ended', () => {
  let dir;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-audit-http-'));
    chmodSync(dir, 0o755);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('a DELETE ends as "client closed", a session open at SIGTERM as "server shutdown"', async () => {
    const stateDir = path.join(dir, 'state');
    const server = await startHttpServer('mcpcell',
      ['serve', '--http', '127.0.0.1:0', '--state-dir', stateDir, '--warm-cells', '0']);
    try {
      const a = await connectHttp(server.url, { name: 'deleter' });
      await a.client.callTool({ name: 'run_command', arguments: { command: 'echo a' } });
      await a.transport.terminateSession();
      await waitFor(async () => query(stateDir, '--type', 'session.end').length === 1,
        { timeoutMs: 10000, what: 'the deleted session\'s end' });
      const b = await connectHttp(server.url, { name: 'stays' });
      await b.client.callTool({ name: 'run_command', arguments: { command: 'echo b' } });
    } finally {
      await server.stop();
    }
    const starts = query(stateDir, '--type', 'session.start');
    assert.deepEqual(starts.map((r) => [r.client_name, r.transport]),
      [['deleter', 'http'], ['stays', 'http']]);
    const ends = query(stateDir, '--type', 'session.end');
    assert.deepEqual(ends.map((r) => [r.session, r.reason]),
      [[starts[0].session, 'client closed'], [starts[1].session, 'server shutdown']]);
    assert.equal(query(stateDir, '--type', 'cell.destroy').length, 2);
    assert.equal(verify(stateDir).status, 0);
  });
});

describe('audit trail: a session at its maximum lifetime', () => {
  let dir;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-audit-lifetime-'));
    chmodSync(dir, 0o755);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('ends as "max lifetime" after its cell.destroy, and its close writes nothing more', async () => {
    const stateDir = path.join(dir, 'state');
    const policyFile = path.join(dir, 'short.toml');
    writeFileSync(policyFile, 'name = "short"\n\n[time]\nsession_idle = "3s"\nsession_max = "3s"\n');
    const s = await startServer(stateDir, policyFile);
    try {
      await s.client.callTool({ name: 'run_command', arguments: { command: 'echo a' } });
      await waitFor(async () => query(stateDir, '--type', 'session.end').length === 1,
        { timeoutMs: 30000, what: 'the session\'s end at its maximum lifetime' });
      const late = await s.client.callTool({ name: 'run_command', arguments: { command: 'echo b' } });
      assert.equal(late.isError, true, text(late));
    } finally {
      await closed(s);
    }
    const mine = query(stateDir).filter((r) => /^(session|cell)\./.test(r.type));
    assert.deepEqual(mine.map((r) => r.type),
      ['session.start', 'cell.create', 'cell.destroy', 'session.end']);
    assert.equal(mine[2].result, 'ok');
    assert.deepEqual(mine[2].cleanup.left, [], JSON.stringify(mine[2].cleanup));
    assert.equal(mine[3].reason, 'max lifetime');
    assert.ok(mine[3].duration_s >= 3, JSON.stringify(mine[3]));
    assert.equal(verify(stateDir).status, 0);
  });
});
