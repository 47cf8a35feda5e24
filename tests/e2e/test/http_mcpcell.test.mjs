// `mcpcell serve --http` with a config of two tenants, driven by the official SDK client
// over Streamable HTTP: tool calls in real cells, progress, cancellation, bearer tokens
// (401 + WWW-Authenticate), tenant isolation (another tenant's session id is 404), quotas
// (429 naming the limit), and DELETE destroying the session's cell.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { connectHttp, kInit, post, startHttpServer } from './http_util.mjs';

const sha = (t) => createHash('sha256').update(t).digest('hex');
const kAlice = 'alice-token-0123456789';
const kBob = 'bob-token-9876543210';

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

function liveCells(stateDir) {
  const dir = path.join(stateDir, 'cells');
  return existsSync(dir) ? readdirSync(dir) : [];
}

describe('mcpcell over Streamable HTTP with two tenants', () => {
  let stateDir;  // the config
  let cellDir;   // the server's state dir (its own temp dir: the cells' user must enter it)
  let server;
  before(async () => {
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-http-e2e-'));
    cellDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-http-state-'));
    const config = path.join(stateDir, 'http.toml');
    writeFileSync(config, `
[[tenant]]
name = "alice"
token_sha256 = ["${sha(kAlice)}"]
max_sessions = 4
max_concurrent_calls = 2

[[tenant]]
name = "bob"
token_sha256 = ["${sha(kBob)}"]
max_sessions = 1
max_body_bytes = 100000
`);
    // --warm-cells 0: these tests count the cells in the state dir, and a warm pool refills
    // in the background (the pool has tests of its own in cell_tools.test.mjs).
    server = await startHttpServer('mcpcell', ['serve', '--http', '127.0.0.1:0', '--http-config',
      config, '--state-dir', cellDir, '--warm-cells', '0']);
  });
  after(async () => {
    const code = await server?.stop();
    assert.equal(code, 0, `server exit code; stderr:\n${server?.stderr()}`);
    assert.deepEqual(liveCells(cellDir), [], 'no cell survives the server');
    rmSync(stateDir, { recursive: true, force: true });
    rmSync(cellDir, { recursive: true, force: true });
  });

  it('refuses requests without a valid token: 401 with WWW-Authenticate', async () => {
    let r = await post(server.url, kInit);
    assert.equal(r.status, 401);
    assert.match(r.headers.get('www-authenticate'), /^Bearer/);
    r = await post(server.url, kInit, { Authorization: 'Bearer wrong' });
    assert.equal(r.status, 401);
    assert.match(r.headers.get('www-authenticate'), /invalid_token/);
  });

  it('runs every kind of tool call in the tenant session cell, with progress', async () => {
    const { client, transport } = await connectHttp(server.url, { token: kAlice });
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const t of ['run_code', 'run_command', 'read_file', 'write_file', 'edit_file',
      'list_files', 'session_info']) {
      assert.ok(names.includes(t), `${t} listed`);
    }
    const call = (name, args, opts) => client.callTool({ name, arguments: args }, undefined, opts);
    let r = await call('run_command', { command: 'echo hello-http' });
    assert.match(text(r), /hello-http/);
    r = await call('write_file', { path: 'a.txt', content: 'one two' });
    assert.ok(!r.isError, text(r));
    r = await call('edit_file', { path: 'a.txt', old_text: 'two', new_text: 'three' });
    assert.ok(!r.isError, text(r));
    r = await call('read_file', { path: 'a.txt' });
    assert.match(text(r), /one three/);
    r = await call('list_files', { path: '.' });
    assert.match(text(r), /a\.txt/);
    r = await call('run_code', { language: 'bash', code: 'echo $((6*7))' });
    assert.match(text(r), /42/);
    r = await call('session_info', {});
    assert.ok(!r.isError, text(r));
    const progress = [];
    r = await call('run_command', { command: 'for i in 1 2 3; do echo line$i; sleep 0.3; done' },
      { onprogress: (p) => progress.push(p) });
    assert.match(text(r), /line3/);
    assert.ok(progress.length >= 1, 'progress notifications arrive over HTTP');
    assert.equal(liveCells(cellDir).length, 1);
    await transport.terminateSession();
    await client.close();
    assert.deepEqual(liveCells(cellDir), [], 'DELETE destroyed the cell');
  });

  it('serves legacy HTTP+SSE clients too; closing the stream destroys the cell', async () => {
    const { SSEClientTransport } = await import('@modelcontextprotocol/sdk/client/sse.js');
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const headers = { Authorization: `Bearer ${kAlice}` };
    const transport = new SSEClientTransport(new URL(server.url.replace(/\/mcp$/, '/sse')), {
      requestInit: { headers },
      eventSourceInit: {
        fetch: (u, init) => {
          const h = new Headers(init?.headers);
          h.set('Authorization', headers.Authorization);
          return fetch(u, { ...init, headers: h });
        },
      },
    });
    const client = new Client({ name: 'legacy', version: '1' }, { capabilities: {} });
    await client.connect(transport);
    const r = await client.callTool({ name: 'run_command', arguments: { command: 'echo via-sse' } });
    assert.match(text(r), /via-sse/);
    assert.equal(liveCells(cellDir).length, 1);
    await client.close();
    for (let i = 0; i < 150 && liveCells(cellDir).length; ++i) await new Promise((res) => setTimeout(res, 100));
    assert.deepEqual(liveCells(cellDir), [], 'the legacy session cell is gone');
  });

  it('cancels a running call', async () => {
    const { client } = await connectHttp(server.url, { token: kAlice });
    const ac = new AbortController();
    const started = Date.now();
    const p = client.callTool({ name: 'run_command', arguments: { command: 'sleep 30' } },
      undefined, { signal: ac.signal });
    setTimeout(() => ac.abort('test cancels'), 1500);
    await assert.rejects(p);
    assert.ok(Date.now() - started < 10000);
    const r = await client.callTool({ name: 'run_command', arguments: { command: 'echo after' } });
    assert.match(text(r), /after/);
    await client.close();
  });

  it('keeps tenants apart: a session id under another token is 404', async () => {
    const alice = await connectHttp(server.url, { token: kAlice });
    const r = await post(server.url, { jsonrpc: '2.0', id: 9, method: 'tools/list' },
      { Authorization: `Bearer ${kBob}`, 'Mcp-Session-Id': alice.transport.sessionId });
    assert.equal(r.status, 404, r.text);
    const d = await fetch(server.url, { method: 'DELETE', headers: {
      Authorization: `Bearer ${kBob}`, 'Mcp-Session-Id': alice.transport.sessionId } });
    assert.equal(d.status, 404);
    const tools = await alice.client.listTools();  // untouched
    assert.ok(tools.tools.length > 0);
    await alice.transport.terminateSession();
    await alice.client.close();
  });

  it('enforces quotas with a message naming the limit', async () => {
    const bob = await connectHttp(server.url, { token: kBob });
    let r = await post(server.url, kInit, { Authorization: `Bearer ${kBob}` });
    assert.equal(r.status, 429);
    assert.match(r.text, /limit of 1 live sessions/);
    assert.ok(r.headers.get('retry-after'));
    r = await post(server.url, { jsonrpc: '2.0', id: 3, method: 'ping', params: { pad: 'x'.repeat(150000) } },
      { Authorization: `Bearer ${kBob}`, 'Mcp-Session-Id': bob.transport.sessionId });
    assert.equal(r.status, 413);
    assert.match(r.text, /limit of 100000 bytes \(tenant bob\)/);
    await bob.transport.terminateSession();
    await bob.client.close();
    // alice: at most 2 calls in flight per session
    const alice = await connectHttp(server.url, { token: kAlice });
    const slow = [1, 2].map(() => alice.client.callTool({ name: 'run_command',
      arguments: { command: 'sleep 2' } }));
    await new Promise((res) => setTimeout(res, 500));
    r = await post(server.url, { jsonrpc: '2.0', id: 'third', method: 'tools/call',
      params: { name: 'run_command', arguments: { command: 'true' } } },
    { Authorization: `Bearer ${kAlice}`, 'Mcp-Session-Id': alice.transport.sessionId });
    assert.equal(r.status, 429);
    assert.match(r.text, /limit of 2 concurrent calls per session/);
    await Promise.all(slow);
    await alice.transport.terminateSession();
    await alice.client.close();
  });
});
