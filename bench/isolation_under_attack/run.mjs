// Isolation under attack: session B's `run_command true` round trip over Streamable HTTP,
// quiet and while session A (its own cell, same server) runs a fork bomb, a memory bomb, a
// CPU hog, a disk fill or a stdout flood. Prints p50/p99 of B per phase and the ratios to
// the quiet phase (target: p99 ≤ 3× quiet). Performance numbers: not a ctest.
//
//   node bench/isolation_under_attack/run.mjs [bin dir, default build/bin] [calls, default 200]
//        [phases, comma-separated names or prefixes, default all: e.g. "fork"]
// Needs root (real cells, cgroup limits) and `npm ci` in tests/e2e (the official SDK).

import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const binDir = process.argv[2] ?? path.join(root, 'build', 'bin');
const kCalls = Number(process.argv[3] ?? 200);
const kPhases = (process.argv[4] ?? '').split(',').filter((p) => p !== '');
const sdk = (p) => import(pathToFileURL(createRequire(path.join(root, 'tests', 'e2e', 'package.json'))
  .resolve(`@modelcontextprotocol/sdk/${p}`)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Each runs in A's cell until cancelled (timeout_s bounds it otherwise).
const kAttacks = {
  'fork bomb': 'f() { f | f & }; f; sleep 300',
  'memory bomb': 'while true; do python3 -c "a = []\nwhile True: a.append(bytearray(32 << 20))"; done',
  'cpu hog': 'for i in 1 2 3 4 5 6 7 8; do (while :; do :; done) & done; wait',
  'disk fill': 'while true; do dd if=/dev/zero of=/workspace/fill bs=1M 2>/dev/null; ' +
    'dd if=/dev/zero of=/tmp/fill bs=1M 2>/dev/null; rm -f /workspace/fill /tmp/fill; done',
  'stdout flood': 'yes "flood flood flood flood flood flood flood flood flood flood flood flood"',
};

async function startServer(stateDir) {
  // SERVE_ARGS: extra `mcpcell serve` flags (e.g. "--server-cpu-weight 0" for the old
  // placement); DETACH=1 starts the server in a session of its own, as a daemon would be
  // (otherwise it shares this client's session and so, on v1 hosts, its autogroup).
  const extra = (process.env.SERVE_ARGS ?? '').split(' ').filter((a) => a !== '');
  const proc = spawn(path.join(binDir, 'mcpcell'), ['serve', '--http', '127.0.0.1:0', '--state-dir',
    stateDir, '--log-level', 'error', ...extra], { stdio: ['ignore', 'ignore', 'pipe'],
    detached: !!process.env.DETACH });
  let err = '';
  const url = await new Promise((resolve, reject) => {
    proc.stderr.on('data', (c) => {
      err += c;
      const m = /(http:\/\/\S+\/mcp)/.exec(err);
      if (m) resolve(m[1]);
    });
    proc.on('exit', (code) => reject(new Error(`server exited (${code}):\n${err}`)));
  });
  return { proc, url };
}

async function connect(url, name) {
  const c = new Client({ name, version: '1' }, { capabilities: {} });
  await c.connect(new StreamableHTTPClientTransport(new URL(url)));
  return c;
}

async function measure(b) {
  const lat = [];
  let failed = 0;
  for (let i = 0; i < kCalls; ++i) {
    const t0 = performance.now();
    const r = await b.callTool({ name: 'run_command', arguments: { command: 'true' } }, undefined,
      { timeout: 120000 });
    lat.push(performance.now() - t0);
    if (r.isError) failed++;
  }
  lat.sort((x, y) => x - y);
  return { p50: pct(lat, 50), p99: pct(lat, 99), failed };
}

const stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-attack-'));
chmodSync(stateDir, 0o755);
const server = await startServer(stateDir);
try {
  const a = await connect(server.url, 'attacker');
  const b = await connect(server.url, 'bystander');
  await a.callTool({ name: 'run_command', arguments: { command: 'true' } });
  await b.callTool({ name: 'run_command', arguments: { command: 'true' } });
  await measure(b);  // warm-up
  const quiet = await measure(b);
  console.log(`session B, ${kCalls} x run_command true over HTTP`);
  console.log(`  quiet          p50 ${quiet.p50.toFixed(1)} ms  p99 ${quiet.p99.toFixed(1)} ms`);
  let worst = 0;
  for (const [name, command] of Object.entries(kAttacks)) {
    if (kPhases.length && !kPhases.some((p) => name.startsWith(p))) continue;
    const abort = new AbortController();
    const attack = a.callTool({ name: 'run_command', arguments: { command, timeout_s: 600 },
      _meta: { progressToken: name } }, undefined,
    { signal: abort.signal, timeout: 700000, onprogress: () => {} }).catch((e) => e);
    await sleep(3000);  // let it ramp up
    const m = await measure(b);
    abort.abort();
    const end = await attack;
    worst = Math.max(worst, m.p99 / quiet.p99);
    console.log(`  ${name.padEnd(14)} p50 ${m.p50.toFixed(1)} ms (${(m.p50 / quiet.p50).toFixed(2)}x)  ` +
      `p99 ${m.p99.toFixed(1)} ms (${(m.p99 / quiet.p99).toFixed(2)}x)` +
      (m.failed ? `  ${m.failed} FAILED` : '') +
      `  [attack ended: ${end instanceof Error ? end.message.slice(0, 60) : text(end).split('\n')[0]}]`);
    // A's cell recovers (or is replaced) before the next phase.
    for (let i = 0; i < 30; ++i) {
      const r = await a.callTool({ name: 'run_command', arguments: { command: 'rm -f /workspace/fill /tmp/fill; true' } });
      if (!r.isError) break;
      await sleep(1000);
    }
  }
  console.log(`worst p99 ratio ${worst.toFixed(2)}x (target <= 3x)`);
  await a.close();
  await b.close();
} finally {
  server.proc.kill('SIGTERM');
  await new Promise((r) => server.proc.on('exit', r));
  rmSync(stateDir, { recursive: true, force: true });
}
