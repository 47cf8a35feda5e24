// Sandbox handles (MCP 2026-07-28, issue 30) against one running `mcpcell serve --http` with
// two tenants: the official v2 client (@modelcontextprotocol/client 2.4.0, pinned to
// 2026-07-28) makes a handle with sandbox_create; two stateless requests with it share a
// cell; the other tenant's client gets "not found" for it; sandbox_close ends it and its use
// says to call sandbox_create; a handle minted by another server id is named as such. At
// the same time an old-era client (@modelcontextprotocol/sdk 1.32.2, initialize) keeps its
// implicit cell and sees neither `sandbox` nor the sandbox tools: tools/list differs per era.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { Client as ModernClient, StreamableHTTPClientTransport as ModernHttp } from
  '@modelcontextprotocol/client';

import { connectHttp, post, startHttpServer, tenantsConfig } from './http_util.mjs';

const kAlice = 'alice-token-sandbox-handles-01';
const kBob = 'bob-token-sandbox-handles-0002';
const kServerId = 'mcpcell-e2e-0';

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

async function connectModern(url, token) {
  const transport = new ModernHttp(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new ModernClient({ name: 'e2e-modern', version: '1.0.0' },
    { capabilities: {}, versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(transport);
  return { client, transport };
}

describe('mcpcell over HTTP: sandbox handles for 2026-07-28 beside sessions', () => {
  let dir;
  let stateDir;
  let server;
  let alice;
  let bob;
  let legacy;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-sbx-e2e-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-sbx-state-'));
    const config = path.join(dir, 'http.toml');
    writeFileSync(config, tenantsConfig([
      { name: 'alice', token: kAlice, extra: 'max_sessions = 4' },
      { name: 'bob', token: kBob }]));
    server = await startHttpServer('mcpcell', ['serve', '--http', '127.0.0.1:0', '--http-config',
      config, '--state-dir', stateDir, '--server-id', kServerId, '--warm-cells', '0']);
    alice = await connectModern(server.url, kAlice);
    bob = await connectModern(server.url, kBob);
    legacy = await connectHttp(server.url, { token: kAlice, name: 'e2e-legacy' });
  });
  after(async () => {
    await legacy?.transport.terminateSession().catch(() => {});
    for (const s of [alice, bob, legacy]) await s?.client.close().catch(() => {});
    const code = await server?.stop();
    assert.equal(code, 0, `server exit code; stderr:\n${server?.stderr()}`);
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('lists the sandbox tools and the sandbox argument to the new era only', async () => {
    const modern = (await alice.client.listTools()).tools;
    const names = modern.map((t) => t.name);
    assert.ok(names.includes('sandbox_create') && names.includes('sandbox_close'), `${names}`);
    const run = modern.find((t) => t.name === 'run_command');
    assert.equal(run.inputSchema.properties.sandbox['x-mcp-header'], 'Sandbox');
    assert.equal(run.inputSchema.required[0], 'sandbox');
    const create = modern.find((t) => t.name === 'sandbox_create');
    assert.match(create.description, /without calls/);

    const old = (await legacy.client.listTools()).tools;
    const oldNames = old.map((t) => t.name);
    assert.ok(!oldNames.includes('sandbox_create') && !oldNames.includes('sandbox_close'),
      `${oldNames}`);
    assert.ok(oldNames.includes('run_command'));
    for (const t of old) assert.ok(!('sandbox' in (t.inputSchema.properties ?? {})), t.name);
  });

  it('shares one cell between stateless requests with the same handle', async () => {
    const made = await alice.client.callTool({ name: 'sandbox_create', arguments: {} });
    assert.ok(!made.isError, text(made));
    const handle = made.structuredContent.sandbox;
    assert.match(handle, new RegExp(`^sbx_${kServerId}_[0-9a-f]{32}$`));
    assert.ok(made.structuredContent.expires_at);
    const wrote = await alice.client.callTool({ name: 'write_file',
      arguments: { sandbox: handle, path: 'note.txt', content: 'kept between requests' } });
    assert.ok(!wrote.isError, text(wrote));
    const ran = await alice.client.callTool({ name: 'run_command',
      arguments: { sandbox: handle, command: 'cat /workspace/note.txt' } });
    assert.ok(!ran.isError, text(ran));
    assert.match(text(ran), /kept between requests/);

    // Another tenant: the same "not found" as an unknown handle; its existence stays hidden.
    const stolen = await bob.client.callTool({ name: 'read_file',
      arguments: { sandbox: handle, path: 'note.txt' } });
    assert.equal(stolen.isError, true);
    assert.match(text(stolen), /arguments\.sandbox: no such sandbox handle/);
    const unknown = await bob.client.callTool({ name: 'read_file',
      arguments: { sandbox: `sbx_${kServerId}_${'0'.repeat(32)}`, path: 'note.txt' } });
    assert.equal(text(unknown), text(stolen));

    // A handle another server minted is named as such (the router's mistake, not the model's).
    const foreign = await alice.client.callTool({ name: 'list_files',
      arguments: { sandbox: `sbx_mcpcell-9_${'a'.repeat(32)}` } });
    assert.equal(foreign.isError, true);
    assert.match(text(foreign), /belongs to server mcpcell-9/);

    const closed = await alice.client.callTool({ name: 'sandbox_close',
      arguments: { sandbox: handle } });
    assert.ok(!closed.isError, text(closed));
    const after = await alice.client.callTool({ name: 'read_file',
      arguments: { sandbox: handle, path: 'note.txt' } });
    assert.equal(after.isError, true);
    assert.match(text(after), /has ended.*sandbox_create/);

    const audit = readFileSync(path.join(stateDir, 'audit', 'audit.jsonl'), 'utf8')
      .split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const starts = audit.filter((r) => r.type === 'session.start' && r.era === '2026-07-28');
    assert.ok(starts.length >= 1, 'a session.start with era 2026-07-28');
    const key = starts[starts.length - 1].session;
    assert.ok(!JSON.stringify(audit).includes(handle), 'the handle itself is never audited');
    assert.ok(audit.some((r) => r.type === 'session.end' && r.session === key),
      'sandbox_close writes session.end');
  });

  it('refuses a header that does not mirror the sandbox argument', async () => {
    const made = await alice.client.callTool({ name: 'sandbox_create', arguments: {} });
    const handle = made.structuredContent.sandbox;
    const body = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: {
      name: 'list_files', arguments: { sandbox: handle },
      _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': {} } } };
    const headers = { Authorization: `Bearer ${kAlice}`, 'MCP-Protocol-Version': '2026-07-28',
      'Mcp-Method': 'tools/call', 'Mcp-Name': 'list_files' };
    const wrong = await post(server.url, body, { ...headers, 'Mcp-Param-Sandbox': 'sbx_other' });
    assert.equal(wrong.status, 400, wrong.text);
    const right = await post(server.url, body, { ...headers, 'Mcp-Param-Sandbox': handle });
    assert.equal(right.status, 200, right.text);
    await alice.client.callTool({ name: 'sandbox_close', arguments: { sandbox: handle } });
  });

  it('keeps the old era\'s implicit cell working beside the handles', async () => {
    const wrote = await legacy.client.callTool({ name: 'write_file',
      arguments: { path: 'old.txt', content: 'old era' } });
    assert.ok(!wrote.isError, text(wrote));
    const read = await legacy.client.callTool({ name: 'read_file', arguments: { path: 'old.txt' } });
    assert.match(text(read), /old era/);
    const sbx = await legacy.client.callTool({ name: 'sandbox_create', arguments: {} })
      .catch((e) => ({ isError: true, content: [{ type: 'text', text: String(e) }] }));
    assert.equal(sbx.isError, true);
    assert.match(text(sbx), /Unknown tool/i);
  });
});
