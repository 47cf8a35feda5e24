// Raw Streamable HTTP for the fault tests: what a misbehaving client does that the SDK never
// would (drop a connection mid-call, never read a stream, send garbage as fast as it can).

import http from 'node:http';
import net from 'node:net';

const kHeaders = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };

// POSTs `body`; resolves {status, headers, text} once the response ended; rejects after
// `timeoutMs` (a stalled server fails the test instead of hanging it).
export function post(url, body, headers = {}, timeoutMs = 60000) {
  const u = new URL(url);
  const data = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST',
      agent: false, headers: { ...kHeaders, 'Content-Length': Buffer.byteLength(data), ...headers } },
    (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }));
      res.on('error', reject);
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs);
    req.on('close', () => clearTimeout(timer));
    req.on('error', reject);
    req.end(data);
  });
}

// The JSON-RPC messages in an SSE body (or the body itself when it is JSON).
export function messagesOf(text) {
  if (text.trimStart().startsWith('{')) return [JSON.parse(text)];
  return text.split('\n').filter((l) => l.startsWith('data: ') && l.length > 6)
    .map((l) => JSON.parse(l.slice(6)));
}

// initialize + notifications/initialized; returns the session id.
export async function openSession(url) {
  const init = await post(url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: {
    protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw-fault', version: '1' } } });
  if (init.status !== 200) throw new Error(`initialize: ${init.status} ${init.text}`);
  const sid = init.headers['mcp-session-id'];
  const ack = await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' },
    { 'Mcp-Session-Id': sid });
  if (ack.status !== 202) throw new Error(`initialized: ${ack.status} ${ack.text}`);
  return sid;
}

let nextId = 1000;
// tools/call on session `sid`; resolves the JSON-RPC response.
export async function callTool(url, sid, name, args) {
  const id = ++nextId;
  const r = await post(url, { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } },
    { 'Mcp-Session-Id': sid });
  const reply = messagesOf(r.text).find((m) => m.id === id);
  if (!reply) throw new Error(`tools/call ${name}: HTTP ${r.status}, no response in ${r.text.slice(0, 300)}`);
  return reply;
}

// Starts tools/call and drops the connection once the server has started answering (the
// SSE headers came back: the call is running), without reading further.
export function callAndDisconnect(url, sid, name, args) {
  const u = new URL(url);
  const data = JSON.stringify({ jsonrpc: '2.0', id: ++nextId, method: 'tools/call',
    params: { name, arguments: args } });
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST',
      agent: false, headers: { ...kHeaders, 'Content-Length': Buffer.byteLength(data),
        'Mcp-Session-Id': sid } }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`HTTP ${res.statusCode}`));
      req.destroy();
      resolve();
    });
    req.on('error', (e) => (e.code === 'ECONNRESET' ? resolve() : reject(e)));
    req.end(data);
  });
}

// A raw socket that sends `request` (a whole HTTP request) and never reads what comes
// back. Returns the socket (destroy it to end).
export function sendAndNeverRead(url, method, headers, body = '') {
  const u = new URL(url);
  const sock = net.connect({ host: u.hostname, port: Number(u.port) });
  sock.pause();  // nothing is read: the kernel buffers fill, then the server's writes block
  const lines = [`${method} ${u.pathname} HTTP/1.1`, `Host: ${u.host}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  if (body) lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  sock.write(lines.join('\r\n') + '\r\n\r\n' + body);
  sock.on('error', () => {});
  return sock;
}

export const kJsonHeaders = kHeaders;
