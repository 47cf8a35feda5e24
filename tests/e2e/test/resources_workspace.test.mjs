// Issue 32 with the official MCP TypeScript SDK: the session's workspace as resources
// (resources/list pages through its files, but lists nothing before the session has a
// cell; resources/read of cell:///workspace/... reads byte windows, text as text and bytes
// as a blob, and refuses paths that leave the workspace), resource_link items for a large
// run_command output and a large download_archive that readResource opens, and a
// background process's exit in the audit trail (exec.end, before the session's end).

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { binary, connect, waitFor } from '../lib/harness.mjs';

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

const run = async (client, command, extra = {}) => {
  const r = await client.callTool({ name: 'run_command', arguments: { command, ...extra } });
  assert.notEqual(r.isError, true, text(r));
  return r;
};

// Every cell:/// resource of the session, page by page; the number of pages.
async function listWorkspace(client) {
  const uris = [];
  const all = [];
  let cursor;
  let pages = 0;
  do {
    const page = await client.listResources(cursor ? { cursor } : {});
    pages += 1;
    for (const r of page.resources) {
      if (!r.uri.startsWith('cell:///')) continue;
      uris.push(r.uri);
      all.push(r);
    }
    cursor = page.nextCursor;
  } while (cursor && pages < 100);
  return { uris, all, pages };
}

describe('workspace resources and resource links (stdio)', () => {
  let stateDir;
  let s;
  before(async () => {
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-resources-e2e-'));
    // The full toolset: download_archive too.
    const policy = path.join(stateDir, 'full.toml');
    writeFileSync(policy, 'name = "resources-full"\n[tools]\ntoolset = "full"\n');
    s = await connect({
      binaryName: 'mcpcell',
      args: ['serve', '--state-dir', stateDir, '--warm-cells', '0', '--policy', policy],
    });
    await s.client.listTools();  // so the SDK checks structuredContent against outputSchema
  });
  after(async () => {
    await s?.close();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('lists nothing before the session has a cell, and offers the template', async () => {
    const { uris } = await listWorkspace(s.client);
    assert.deepEqual(uris, []);
    const { resourceTemplates } = await s.client.listResourceTemplates();
    assert.ok(resourceTemplates.some((t) => t.uriTemplate === 'cell:///workspace/{+path}'),
      JSON.stringify(resourceTemplates));
  });

  it('pages through the workspace files with their sizes and types', async () => {
    await run(s.client, 'mkdir -p /workspace/many && cd /workspace/many && ' +
      'for i in $(seq 1 150); do printf "file %s\\n" $i > f$(printf %03d $i).txt; done && ' +
      'printf x > "/workspace/with space?.txt"');
    const { uris, all, pages } = await listWorkspace(s.client);
    const many = all.filter((r) => r.uri.startsWith('cell:///workspace/many/'));
    assert.equal(many.length, 150);
    assert.equal(new Set(uris).size, uris.length, 'no resource twice');
    assert.ok(pages >= 2, `150 files take more than one page (got ${pages})`);
    const f007 = many.find((r) => r.name === 'many/f007.txt');
    assert.equal(f007.uri, 'cell:///workspace/many/f007.txt');
    assert.equal(f007.size, 'file 7\n'.length);
    assert.equal(f007.mimeType, 'text/plain');
    assert.deepEqual(many.map((r) => r.name), many.map((r) => r.name).slice().sort(), 'in order');
    const odd = all.find((r) => r.name === 'with space?.txt');
    assert.equal(odd.uri, 'cell:///workspace/with%20space%3F.txt');
    const read = await s.client.readResource({ uri: odd.uri });
    assert.equal(read.contents[0].text, 'x');
  });

  it('reads byte windows: text as text, bytes as a blob, the bounds in the uri', async () => {
    await s.client.callTool({ name: 'write_file',
      arguments: { path: '/workspace/hello.txt', content: 'hello world, hello cell' } });
    const window = await s.client.readResource({
      uri: 'cell:///workspace/hello.txt?offset=6&length=5' });
    assert.equal(window.contents.length, 1);
    assert.equal(window.contents[0].text, 'world');
    assert.equal(window.contents[0].uri,
      'cell:///workspace/hello.txt?offset=6&length=5#bytes=6-11/23');
    await run(s.client, "printf '\\000\\001\\002\\377abc' > /workspace/bytes.bin");
    const blob = await s.client.readResource({ uri: 'cell:///workspace/bytes.bin?length=4' });
    assert.equal(blob.contents[0].text, undefined);
    assert.deepEqual([...Buffer.from(blob.contents[0].blob, 'base64')], [0, 1, 2, 255]);
    assert.match(blob.contents[0].uri, /#bytes=0-4\/7$/);
  });

  it('refuses paths that leave the workspace, naming the problem', async () => {
    await run(s.client, 'ln -sfn /etc /workspace/etc-link');
    await assert.rejects(s.client.readResource({ uri: 'cell:///workspace/../etc/passwd' }),
      /"\.\." segments are refused/);
    await assert.rejects(s.client.readResource({ uri: 'cell:///workspace/etc-link/passwd' }),
      /etc-link is a symlink/);
    await assert.rejects(s.client.readResource({ uri: 'cell:///workspace/nope.txt' }),
      (err) => err.code === -32002 && /nope\.txt/.test(err.message));
    await assert.rejects(s.client.readResource({ uri: 'cell:///workspace/hello.txt?offset=99' }),
      /offset 99 is past the end; the file has 23 bytes/);
    // The server keeps serving.
    const again = await s.client.readResource({ uri: 'cell:///workspace/hello.txt?length=5' });
    assert.equal(again.contents[0].text, 'hello');
  });

  it('links a large output, and readResource opens the link', async () => {
    const r = await run(s.client, "head -c 300000 /dev/zero | tr '\\0' a; echo; echo end");
    const link = r.content.find((c) => c.type === 'resource_link');
    assert.ok(link, JSON.stringify(r.content.map((c) => c.type)));
    assert.equal(link.mimeType, 'text/plain');
    assert.equal(link.size, 300000 + 5);
    assert.equal(link.uri, 'cell://' + r.structuredContent.full_stdout_path);
    const head = await s.client.readResource({ uri: `${link.uri}?length=1000` });
    assert.equal(head.contents[0].text, 'a'.repeat(1000));
    const tail = await s.client.readResource({ uri: `${link.uri}?offset=${link.size - 4}` });
    assert.equal(tail.contents[0].text, 'end\n');
  });

  it('links a download_archive over the embedding threshold', async () => {
    await run(s.client, 'mkdir -p /workspace/big && head -c 2000000 /dev/urandom > /workspace/big/r.bin');
    const r = await s.client.callTool({ name: 'download_archive', arguments: { path: '/workspace/big' } });
    assert.notEqual(r.isError, true, text(r));
    assert.equal(r.content.some((c) => c.type === 'resource'), false, 'not embedded');
    const link = r.content.find((c) => c.type === 'resource_link');
    assert.equal(link.mimeType, 'application/gzip');
    assert.equal(link.size, r.structuredContent.bytes);
    assert.ok(link.size > 1 << 20, `${link.size}`);
    const first = await s.client.readResource({ uri: `${link.uri}?length=2` });
    assert.deepEqual([...Buffer.from(first.contents[0].blob, 'base64')], [0x1f, 0x8b]);
  });
});

describe('a background process\'s exit in the audit trail', () => {
  let stateDir;
  before(() => {
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-bg-audit-e2e-'));
  });
  after(() => rmSync(stateDir, { recursive: true, force: true }));

  it('writes exec.end for a detached exec that exited, and for one that ended with the session',
    async () => {
      const s = await connect({
        binaryName: 'mcpcell',
        args: ['serve', '--state-dir', stateDir, '--warm-cells', '0'],
      });
      const pid = s.transport.pid;
      const quick = await run(s.client, 'exit 3', { background: true });
      const id = quick.structuredContent.process_id;
      const waited = await s.client.callTool({ name: 'process',
        arguments: { action: 'wait', id, timeout_s: 20 } });
      assert.equal(waited.structuredContent.state, 'exited', text(waited));
      const slow = await run(s.client, 'sleep 600', { background: true });
      await s.close();
      await waitFor(async () => {
        try {
          process.kill(pid, 0);
          return false;
        } catch {
          return true;
        }
      }, { timeoutMs: 30000, what: 'the server to exit' });
      const records = execFileSync(binary('mcpcell'), ['audit', 'query', '--state-dir', stateDir],
        { encoding: 'utf8' }).split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
      const ends = records.filter((r) => r.type === 'exec.end' && r.background === true);
      const exited = ends.find((r) => r.process_id === id);
      assert.ok(exited, JSON.stringify(ends));
      assert.equal(exited.state, 'exited');
      assert.equal(exited.exit_status, 3);
      assert.equal(exited.tool, 'run_command');
      const stopped = ends.find((r) => r.process_id === slow.structuredContent.process_id);
      assert.ok(stopped, JSON.stringify(ends));
      assert.equal(stopped.state, 'stopped');
      assert.equal(ends.filter((r) => r.process_id === id).length, 1, 'one exec.end each');
      const sessionEnd = records.find((r) => r.type === 'session.end');
      assert.ok(stopped.seq < sessionEnd.seq, 'the process ends before its session');
    });
});
