// mcpcell-conformance-server over Streamable HTTP, driven by the official SDK client
// (StreamableHTTPClientTransport), plus raw HTTP for every kind of bad input: each gets the
// right 4xx with a message naming the problem, and the server keeps serving.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { kConformanceServer } from '../lib/harness.mjs';
import { connectHttp, kInit, post, rawPost, startHttpServer } from './http_util.mjs';

describe('conformance server over Streamable HTTP', () => {
  let server;
  before(async () => {
    server = await startHttpServer(kConformanceServer, ['--http', '127.0.0.1:0',
      '--max-message-bytes', '65536']);
  });
  after(async () => {
    const code = await server?.stop();
    assert.equal(code, 0, `server exit code; stderr:\n${server?.stderr()}`);
  });

  it('lists and calls tools through the SDK client, with progress and logging', async () => {
    const { client, transport } = await connectHttp(server.url);
    assert.match(transport.sessionId, /^[0-9a-f]{32}$/);
    const tools = await client.listTools();
    assert.ok(tools.tools.some((t) => t.name === 'test_simple_text'));
    const r = await client.callTool({ name: 'test_simple_text', arguments: {} });
    assert.equal(r.content[0].type, 'text');
    const progress = [];
    await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined,
      { onprogress: (p) => progress.push(p.progress) });
    assert.ok(progress.length >= 1, 'progress notifications reach the client');
    const logs = [];
    client.setNotificationHandler(
      (await import('@modelcontextprotocol/sdk/types.js')).LoggingMessageNotificationSchema,
      (n) => logs.push(n.params));
    await client.setLoggingLevel('debug');
    await client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    assert.ok(logs.length >= 1, 'log notifications reach the client');
    await client.close();
  });

  it('ends a session on DELETE: its id then gets 404', async () => {
    const { client, transport } = await connectHttp(server.url);
    const id = transport.sessionId;
    await transport.terminateSession();
    const r = await post(server.url, { jsonrpc: '2.0', id: 5, method: 'ping' },
      { 'Mcp-Session-Id': id });
    assert.equal(r.status, 404, r.text);
    await client.close();
  });

  it('serves many sessions at once, each with its own id', async () => {
    const sessions = await Promise.all([1, 2, 3, 4].map(() => connectHttp(server.url)));
    const ids = new Set(sessions.map((s) => s.transport.sessionId));
    assert.equal(ids.size, 4);
    await Promise.all(sessions.map((s) => s.client.callTool({ name: 'test_simple_text', arguments: {} })));
    await Promise.all(sessions.map((s) => s.client.close()));
  });

  it('answers bad HTTP input with the right 4xx and keeps serving', async () => {
    const url = server.url;
    let r = await post(url, kInit, { 'Content-Type': 'text/plain' });
    assert.equal(r.status, 415);
    assert.match(r.text, /Content-Type must be application\/json/);
    r = await post(url, kInit, { Accept: 'application/json' });
    assert.equal(r.status, 406);
    assert.match(r.text, /text\/event-stream/);
    r = await post(url, '{"jsonrpc": "2.0", garbage');
    assert.equal(r.status, 400);
    assert.match(r.text, /not valid JSON/);
    r = await post(url, { ...kInit, params: { ...kInit.params, pad: 'x'.repeat(200000) } });
    assert.equal(r.status, 413);
    assert.match(r.text, /exceeds the limit/);
    r = await post(url, { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      { 'Mcp-Session-Id': 'deadbeef' });
    assert.equal(r.status, 404);
    r = await post(url, { jsonrpc: '2.0', id: 2, method: 'tools/list' });
    assert.equal(r.status, 400);
    assert.match(r.text, /Mcp-Session-Id header is required/);
    r = await post(url, kInit, { Origin: 'http://evil.example.com' });
    assert.equal(r.status, 403);
    assert.match(r.text, /Origin/);
    r = await rawPost(url, kInit, { Host: 'evil.example.com' });  // fetch cannot set Host
    assert.equal(r.status, 403);
    assert.match(r.text, /Host header/);
    // a good session, then a bad protocol version header on it
    r = await post(url, kInit);
    assert.equal(r.status, 200, r.text);
    const id = r.headers.get('mcp-session-id');
    r = await post(url, { jsonrpc: '2.0', id: 3, method: 'ping' },
      { 'Mcp-Session-Id': id, 'MCP-Protocol-Version': '1999-01-01' });
    assert.equal(r.status, 400);
    assert.match(r.text, /unsupported MCP-Protocol-Version/);
    const get = await fetch(url, { headers: { 'Mcp-Session-Id': id, Accept: 'application/json' } });
    assert.equal(get.status, 406);
    // still serving
    const { client } = await connectHttp(url);
    const tools = await client.listTools();
    assert.ok(tools.tools.length > 0);
    await client.close();
  });

  it('serves older clients over legacy HTTP+SSE (GET /sse, POST /messages)', async () => {
    const { SSEClientTransport } = await import('@modelcontextprotocol/sdk/client/sse.js');
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const sseUrl = new URL(server.url.replace(/\/mcp$/, '/sse'));
    const client = new Client({ name: 'legacy', version: '1' }, { capabilities: {} });
    await client.connect(new SSEClientTransport(sseUrl));
    const r = await client.callTool({ name: 'test_simple_text', arguments: {} });
    assert.equal(r.content[0].type, 'text');
    const progress = [];
    await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined,
      { onprogress: (p) => progress.push(p.progress) });
    assert.ok(progress.length >= 1);
    await client.close();
    const bad = await post(server.url.replace(/\/mcp$/, '/messages?sessionId=nope'),
      { jsonrpc: '2.0', id: 1, method: 'ping' });
    assert.equal(bad.status, 404);
  });

  it('resumes a POST stream from Last-Event-ID', async () => {
    let r = await post(server.url, kInit);
    const id = r.headers.get('mcp-session-id');
    await post(server.url, { jsonrpc: '2.0', method: 'notifications/initialized' },
      { 'Mcp-Session-Id': id });
    r = await post(server.url, { jsonrpc: '2.0', id: 7, method: 'tools/list' },
      { 'Mcp-Session-Id': id, 'MCP-Protocol-Version': '2025-11-25' });
    assert.equal(r.status, 200);
    const ids = [...r.text.matchAll(/^id: (\S+)$/gm)].map((m) => m[1]);
    assert.ok(ids.length >= 2, `event ids in:\n${r.text}`);
    assert.match(r.text, /"id":7/);
  });
});
