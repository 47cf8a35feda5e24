// Helpers for the Streamable HTTP end-to-end tests: start a server on a free loopback port
// (it prints its URL on stderr), connect the official SDK client over
// StreamableHTTPClientTransport, and send raw HTTP for the bad-input checks.

import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import http from 'node:http';

import { binary, Client } from '../lib/harness.mjs';

const { StreamableHTTPClientTransport } = await import(
  '@modelcontextprotocol/sdk/client/streamableHttp.js'
);
export { StreamableHTTPClientTransport };

// Spawns `name args...` and resolves with {proc, url, stderr()} once it printed an
// http://.../mcp URL; rejects if it exits first or stays silent for 20 s.
export function startHttpServer(name, args) {
  const proc = spawn(binary(name), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} printed no URL in 20 s:\n${stderr}`)),
      20000);
    proc.stderr.on('data', (chunk) => {
      stderr += chunk.toString();
      const m = /(https?:\/\/[^\s]+\/mcp)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve({
          proc,
          url: m[1],
          stderr: () => stderr,
          async stop() {
            if (proc.exitCode !== null) return proc.exitCode;
            proc.kill('SIGTERM');
            return new Promise((r) => proc.on('exit', (code) => r(code)));
          },
        });
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code}) before listening:\n${stderr}`));
    });
  });
}

// An SDK client connected over Streamable HTTP; `token` adds a bearer token.
export async function connectHttp(url, { token, name = 'e2e-http' } = {}) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name, version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  return { client, transport };
}

export const kInit = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

// A raw POST: returns {status, headers, text}.
export async function post(url, body, headers = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

// A POST through node:http, which (unlike fetch) may set any header, Host included.
export function rawPost(url, body, headers = {}) {
  const u = new URL(url);
  const data = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: u.hostname, port: u.port, path: u.pathname, method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
        'Content-Length': Buffer.byteLength(data), ...headers },
    }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

// The [[tenant]] tables of an HTTP config (`serve --http-config`): each {name, token,
// policy (default "default"), extra (more TOML lines of the table)}; tokens stored as the
// SHA-256 the config takes.
export function tenantsConfig(tenants) {
  return tenants.map(({ name, token, policy = 'default', extra = '' }) => `
[[tenant]]
name = "${name}"
token_sha256 = ["${createHash('sha256').update(token).digest('hex')}"]
policy = "${policy}"
${extra}`).join('');
}
