// Soak: N concurrent sessions of the official MCP SDK client over Streamable HTTP (loopback)
// doing mixed tool calls against one `mcpcell serve --http` for T seconds. Every result is
// checked (no isError, and the content is what the call should give); the server's RSS and
// open fd count are sampled every second. Prints p50/p99 per tool and the samples' summary,
// and exits non-zero when any call failed or resources grew after warm-up.
//
//   node bench/soak/run.mjs [--sessions 100] [--seconds 600] [--bin-dir build/bin]
//                           [--warmup-seconds S] [--state-dir DIR]
//
// "Flat after warm-up": the samples after warm-up (every session connected and one round of
// calls done, plus --warmup-seconds, default 10% of the run) are cut in thirds; the last
// third's maximum must stay within the first third's maximum × 1.2 plus a slack (16 MiB of
// RSS, 16 fds). A leak of one fd or a few KiB per call grows without bound over thousands of
// calls and fails this; the ordinary jitter of allocator arenas and in-flight pipes does not.
// Needs root (real cells) and `npm ci` in tests/e2e (the SDK). ctest runs a short version
// (label load).

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

function parseArgs(argv) {
  const o = { sessions: 100, seconds: 600, binDir: path.join(root, 'build', 'bin'),
    warmupSeconds: undefined, stateDir: undefined };
  for (let i = 0; i < argv.length; ++i) {
    const [flag, value] = [argv[i], argv[i + 1]];
    const need = () => {
      if (value === undefined) throw new Error(`${flag} needs a value`);
      ++i;
      return value;
    };
    if (flag === '--sessions') o.sessions = Number(need());
    else if (flag === '--seconds') o.seconds = Number(need());
    else if (flag === '--bin-dir') o.binDir = need();
    else if (flag === '--warmup-seconds') o.warmupSeconds = Number(need());
    else if (flag === '--state-dir') o.stateDir = need();
    else throw new Error(`unknown argument ${flag} (see the header of ${fileURLToPath(import.meta.url)})`);
  }
  if (!(o.sessions >= 1) || !(o.seconds >= 3)) throw new Error('--sessions >= 1, --seconds >= 3');
  o.warmupSeconds ??= Math.max(2, Math.round(o.seconds / 10));
  return o;
}

const opts = parseArgs(process.argv.slice(2));
const sdk = (p) => import(pathToFileURL(createRequire(path.join(root, 'tests', 'e2e', 'package.json'))
  .resolve(`@modelcontextprotocol/sdk/${p}`)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

function startServer(stateDir) {
  const proc = spawn(path.join(opts.binDir, 'mcpcell'),
    ['serve', '--http', '127.0.0.1:0', '--state-dir', stateDir, '--log-level', 'error'],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  return new Promise((resolve, reject) => {
    proc.stderr.on('data', (c) => {
      err += c;
      if (err.length > 1 << 20) err = err.slice(-(1 << 19));
      const m = /(http:\/\/\S+\/mcp)/.exec(err);
      if (m) resolve({ proc, url: m[1], stderr: () => err });
    });
    proc.on('exit', (code) => reject(new Error(`server exited (${code}):\n${err}`)));
  });
}

function sample(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rssKiB = Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
  return { t: Date.now(), rss: rssKiB * 1024, fds: readdirSync(`/proc/${pid}/fd`).length };
}

// Times one call: [tool, ms, result].
async function timed(c, name, args) {
  const t0 = performance.now();
  const r = await c.callTool({ name, arguments: args });
  return [name, performance.now() - t0, r];
}

// One session's mix; each step checks its answers and returns [[tool, ms], ...].
function steps(i) {
  let n = 0;
  return [
    async (c) => {
      const [t, ms, r] = await timed(c, 'run_command', { command: `echo s${i}-${++n}` });
      if (r.isError || !text(r).includes(`s${i}-${n}`)) throw new Error(`run_command: ${text(r)}`);
      return [[t, ms]];
    },
    async (c) => {
      const content = randomBytes(256 + (n % 2048)).toString('hex');
      const [wt, wms, w] = await timed(c, 'write_file', { path: `f${n % 8}.txt`, content });
      if (w.isError) throw new Error(`write_file: ${text(w)}`);
      const [rt, rms, r] = await timed(c, 'read_file', { path: `f${n % 8}.txt` });
      if (r.isError || !text(r).includes(content)) throw new Error(`read_file: ${text(r).slice(0, 300)}`);
      return [[wt, wms], [rt, rms]];
    },
    async (c) => {
      const k = 1000 + (++n % 1000);
      const [t, ms, r] = await timed(c, 'run_code',
        { language: 'python', code: `print(sum(range(${k})))` });
      if (r.isError || !text(r).includes(String((k * (k - 1)) / 2))) throw new Error(`run_code: ${text(r)}`);
      return [[t, ms]];
    },
    async (c) => {
      const [t, ms, r] = await timed(c, 'list_files', {});
      if (r.isError) throw new Error(`list_files: ${text(r)}`);
      return [[t, ms]];
    },
    async (c) => {
      const [t, ms, r] = await timed(c, 'session_info', {});
      if (r.isError || !r.structuredContent?.cell_id) throw new Error(`session_info: ${text(r)}`);
      return [[t, ms]];
    },
  ];
}

async function main() {
  const ownState = !opts.stateDir;
  const stateDir = opts.stateDir ?? mkdtempSync(path.join(tmpdir(), 'mcpcell-soak-'));
  // A --state-dir that does not exist yet is made (the server wants it to exist, owned by us).
  mkdirSync(stateDir, { recursive: true });
  chmodSync(stateDir, 0o755);
  const server = await startServer(stateDir);
  const pid = server.proc.pid;
  const lat = {};
  const failures = [];
  let calls = 0;
  const record = (tool, ms) => {
    (lat[tool] ??= []).push(ms);
  };
  const samples = [];
  const sampler = setInterval(() => samples.push(sample(pid)), 1000);
  const clients = [];
  try {
    for (let i = 0; i < opts.sessions; ++i) {
      const c = new Client({ name: `soak${i}`, version: '1' }, { capabilities: {} });
      await c.connect(new StreamableHTTPClientTransport(new URL(server.url)));
      clients.push(c);
    }
    // Warm-up round: every session gets its cell.
    await Promise.all(clients.map((c) => c.callTool({ name: 'run_command', arguments: { command: 'true' } })));
    const warm = Date.now() + opts.warmupSeconds * 1000;
    const end = Date.now() + opts.seconds * 1000;
    console.log(`soak: ${opts.sessions} sessions connected, running ${opts.seconds} s ` +
      `(warm-up until +${opts.warmupSeconds} s)`);
    await Promise.all(clients.map(async (c, i) => {
      const mix = steps(i);
      for (let k = i; Date.now() < end; ++k) {
        try {
          for (const [tool, ms] of await mix[k % mix.length](c)) {
            record(tool, ms);
            ++calls;
          }
        } catch (e) {
          failures.push(`session ${i}: ${e.message}`.slice(0, 500));
        }
      }
    }));
    clearInterval(sampler);
    const after = samples.filter((s) => s.t >= warm);
    const third = Math.floor(after.length / 3);
    const max = (xs, key) => Math.max(...xs.map((s) => s[key]));
    let flat = { ok: true, why: 'too few samples after warm-up to judge (need 3)' };
    if (third >= 1) {
      const first = after.slice(0, third);
      const last = after.slice(after.length - third);
      const rss = { first: max(first, 'rss'), last: max(last, 'rss') };
      const fds = { first: max(first, 'fds'), last: max(last, 'fds') };
      const rssOk = rss.last <= rss.first * 1.2 + 16 * 1024 * 1024;
      const fdsOk = fds.last <= fds.first * 1.2 + 16;
      flat = { ok: rssOk && fdsOk,
        why: `RSS max first third ${(rss.first / 1048576).toFixed(1)} MiB, last third ` +
          `${(rss.last / 1048576).toFixed(1)} MiB (${rssOk ? 'flat' : 'GREW'}); fds max first third ` +
          `${fds.first}, last third ${fds.last} (${fdsOk ? 'flat' : 'GREW'})` };
    } else {
      flat.ok = false;
    }
    console.log(`calls: ${calls} ok, ${failures.length} failed, in ${opts.seconds} s ` +
      `(${(calls / opts.seconds).toFixed(1)} calls/s)`);
    for (const [tool, xs] of Object.entries(lat).sort()) {
      xs.sort((a, b) => a - b);
      console.log(`  ${tool.padEnd(13)} n=${String(xs.length).padStart(6)}  p50 ${pct(xs, 50).toFixed(1)} ms` +
        `  p99 ${pct(xs, 99).toFixed(1)} ms`);
    }
    console.log(`server: ${samples.length} samples; ${flat.why}`);
    for (const f of failures.slice(0, 10)) console.log(`FAILED ${f}`);
    return failures.length === 0 && flat.ok ? 0 : 1;
  } finally {
    clearInterval(sampler);
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    server.proc.kill('SIGTERM');
    await new Promise((r) => server.proc.on('exit', r));
    if (ownState) rmSync(stateDir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
