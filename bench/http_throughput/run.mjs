// Tool-call throughput and latency of `mcpcell serve` with 16 concurrent sessions doing
// `run_command true`: over Streamable HTTP (one server, 16 HTTP sessions) and, beside it,
// over stdio (16 `mcpcell serve --stdio` processes, one session each). Prints calls/s,
// p50/p99 latency and the HTTP/stdio ratios. Not part of ctest.
//
//   node bench/http_throughput/run.mjs [bin dir] [calls per session]
// Needs the SDK installed by `npm ci` in tests/e2e, and root (real cells).

import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const binDir = process.argv[2] ?? path.join(root, 'build', 'bin');
const perSession = Number(process.argv[3] ?? 50);
const kSessions = 16;
const sdk = (p) => import(pathToFileURL(
  createRequire(path.join(root, 'tests', 'e2e', 'package.json')).resolve(`@modelcontextprotocol/sdk/${p}`)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { StdioClientTransport } = await sdk('client/stdio.js');
const mcpcell = path.join(binDir, 'mcpcell');

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function drive(clients) {
  // warm-up: one call each creates the session's cell
  await Promise.all(clients.map((c) => c.callTool({ name: 'run_command', arguments: { command: 'true' } })));
  const lat = [];
  const t0 = performance.now();
  await Promise.all(clients.map(async (c) => {
    for (let i = 0; i < perSession; ++i) {
      const s = performance.now();
      const r = await c.callTool({ name: 'run_command', arguments: { command: 'true' } });
      if (r.isError) throw new Error(JSON.stringify(r.content));
      lat.push(performance.now() - s);
    }
  }));
  const secs = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  return { rate: lat.length / secs, p50: pct(lat, 50), p99: pct(lat, 99), calls: lat.length };
}

async function httpRun() {
  const state = mkdtempSync(path.join(tmpdir(), 'mcpcell-bench-http-'));
  const proc = spawn(mcpcell, ['serve', '--http', '127.0.0.1:0', '--state-dir', state],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  const url = await new Promise((resolve, reject) => {
    let err = '';
    proc.stderr.on('data', (c) => {
      err += c;
      const m = /(http:\/\/\S+\/mcp)/.exec(err);
      if (m) resolve(m[1]);
    });
    proc.on('exit', () => reject(new Error(err)));
  });
  const clients = [];
  for (let i = 0; i < kSessions; ++i) {
    const c = new Client({ name: `bench${i}`, version: '1' }, { capabilities: {} });
    await c.connect(new StreamableHTTPClientTransport(new URL(url)));
    clients.push(c);
  }
  const r = await drive(clients);
  await Promise.all(clients.map((c) => c.close()));
  proc.kill('SIGTERM');
  await new Promise((res) => proc.on('exit', res));
  rmSync(state, { recursive: true, force: true });
  return r;
}

async function stdioRun() {
  const states = [];
  const clients = [];
  for (let i = 0; i < kSessions; ++i) {
    const state = mkdtempSync(path.join(tmpdir(), 'mcpcell-bench-stdio-'));
    states.push(state);
    const c = new Client({ name: `bench${i}`, version: '1' }, { capabilities: {} });
    await c.connect(new StdioClientTransport({ command: mcpcell,
      args: ['serve', '--stdio', '--state-dir', state], stderr: 'ignore' }));
    clients.push(c);
  }
  const r = await drive(clients);
  await Promise.all(clients.map((c) => c.close()));
  for (const s of states) rmSync(s, { recursive: true, force: true });
  return r;
}

const fmt = (r) => `${r.rate.toFixed(1)} calls/s, p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms (${r.calls} calls)`;
const http = await httpRun();
console.log(`streamable http, ${kSessions} sessions: ${fmt(http)}`);
const stdio = await stdioRun();
console.log(`stdio,           ${kSessions} sessions: ${fmt(stdio)}`);
console.log(`ratio http/stdio: throughput ${(http.rate / stdio.rate).toFixed(2)}, ` +
  `p50 ${(http.p50 / stdio.p50).toFixed(2)}, p99 ${(http.p99 / stdio.p99).toFixed(2)}`);
