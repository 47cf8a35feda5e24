// /metrics, /healthz and /readyz (docs/metrics.md). Two tenants use MCP with the official SDK
// client: alice runs 3 commands (one refused by the egress proxy) and reads a missing file,
// bob calls run_command which his policy leaves out, and one request comes without a token.
// /metrics, parsed by the
// Prometheus project's own text-format parser (Debian's python3-prometheus-client), then
// holds exactly those counts, on the HTTP listener and on the --admin listener alike, and
// only an all-tenants operator may read it. A second server runs in a private mount
// namespace: a read-only bind over its state dir makes /readyz answer 503 naming
// "state_dir" and "audit" ([audit] required), and removing the bind makes it ready again (nothing on the host changes);
// likewise "cell_init" while its copy of cell init is moved away.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { binary, connect } from '../lib/harness.mjs';
import { connectHttp, kInit, post } from './http_util.mjs';

const sha = (t) => createHash('sha256').update(t).digest('hex');
const kAlice = 'alice-token-metrics-0001';
const kBob = 'bob-token-metrics-0002';
const kOpsAll = 'ops-all-token-metrics-0003';
const kOpsAlice = 'ops-alice-token-metrics-0004';

const kBobPolicy = `name = "bob-no-commands"
[tools]
enabled = ["run_code", "read_file", "session_info"]
`;

// Debian's python3 (not a pyenv one on PATH) has python3-prometheus-client.
const kParser = `
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        out.append({"family": family.name, "type": family.type, "name": s.name,
                    "labels": s.labels, "value": s.value})
print(json.dumps(out))
`;

function parseMetrics(text) {
  return JSON.parse(execFileSync('/usr/bin/python3', ['-c', kParser], { input: text }).toString());
}

// The value of the sample `name` whose labels are exactly `labels`; undefined when absent.
function value(samples, name, labels) {
  const want = JSON.stringify(Object.entries(labels).sort());
  const hit = samples.filter((s) => s.name === name &&
    JSON.stringify(Object.entries(s.labels).sort()) === want);
  assert.ok(hit.length <= 1, `${name} ${want} appears ${hit.length} times`);
  return hit[0]?.value;
}

// `mcpcell serve ...`, optionally under `wrapper` (e.g. unshare); resolves with the MCP URL,
// the --admin URL (when asked) and stop().
function startServer(args, wrapper = []) {
  const argv = [...wrapper, binary('mcpcell'), 'serve', ...args];
  const proc = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL in 20 s:\n${stderr}`)), 20000);
    proc.stderr.on('data', (chunk) => {
      stderr += chunk.toString();
      const mcp = /(http:\/\/[^\s]+\/mcp)\b/.exec(stderr);
      if (!mcp) return;
      clearTimeout(timer);
      const admin = /operators' endpoints at (http:\/\/[^\s/]+)\/metrics/.exec(stderr);
      resolve({
        proc, url: mcp[1], base: mcp[1].replace(/\/mcp$/, ''), admin: admin?.[1],
        stderr: () => stderr,
        async stop() {
          if (proc.exitCode !== null) return proc.exitCode;
          proc.kill('SIGTERM');
          return new Promise((r) => proc.on('exit', (code) => r(code)));
        },
      });
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited (${code}) before listening:\n${stderr}`));
    });
  });
}

async function get(url, token) {
  const res = await fetch(url, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  return { status: res.status, text: await res.text(), type: res.headers.get('content-type') };
}

describe('mcpcell /metrics after a scripted set of calls', () => {
  let dir;
  let stateDir;
  let server;
  const sessions = [];

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-metrics-e2e-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-metrics-state-'));
    const bobPolicy = path.join(dir, 'bob.toml');
    writeFileSync(bobPolicy, kBobPolicy);
    const config = path.join(dir, 'http.toml');
    writeFileSync(config, `
[[tenant]]
name = "alice"
token_sha256 = ["${sha(kAlice)}"]
policy = "default"

[[tenant]]
name = "bob"
token_sha256 = ["${sha(kBob)}"]
policy = "${bobPolicy}"

[[operator]]
name = "ops-all"
token_sha256 = ["${sha(kOpsAll)}"]
tenants = "*"

[[operator]]
name = "ops-alice"
token_sha256 = ["${sha(kOpsAlice)}"]
tenants = ["alice"]
`);
    server = await startServer(['--http', '127.0.0.1:0', '--http-config', config, '--state-dir',
      stateDir, '--admin', '127.0.0.1:0']);
    const alice = await connectHttp(server.url, { token: kAlice });
    const bob = await connectHttp(server.url, { token: kBob });
    sessions.push(alice, bob);
    // One command burns some CPU so that exec CPU seconds cannot round to nothing; one
    // asks the egress proxy for a host the default policy denies (curl prints its 403).
    const commands = ['echo one',
      'curl -s -o /dev/null -w "%{http_code}" http://refused.example.com/',
      'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo three'];
    for (const command of commands) {
      const r = await alice.client.callTool({ name: 'run_command', arguments: { command } });
      assert.ok(!r.isError, JSON.stringify(r));
    }
    const missing = await alice.client.callTool({ name: 'read_file',
      arguments: { path: '/workspace/no-such-file' } });
    assert.ok(missing.isError, JSON.stringify(missing));
    await assert.rejects(bob.client.callTool({ name: 'run_command', arguments: { command: 'id' } }),
      /Unknown tool: run_command/);
    const anonymous = await post(server.url, kInit);
    assert.equal(anonymous.status, 401, anonymous.text);
  });
  after(async () => {
    for (const s of sessions) {
      await s.transport.terminateSession().catch(() => {});
      await s.client.close();
    }
    const code = await server?.stop();
    assert.equal(code, 0, `server exit code; stderr:\n${server?.stderr()}`);
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('lets only an all-tenants operator read /metrics', async () => {
    assert.equal((await get(`${server.base}/metrics`)).status, 401);
    assert.equal((await get(`${server.base}/metrics`, kAlice)).status, 401);
    const scoped = await get(`${server.base}/metrics`, kOpsAlice);
    assert.equal(scoped.status, 403, scoped.text);
    const ok = await get(`${server.base}/metrics`, kOpsAll);
    assert.equal(ok.status, 200, ok.text);
    assert.match(ok.type, /^text\/plain; version=0\.0\.4/);
  });

  for (const where of ['HTTP listener', '--admin listener']) {
    it(`counts exactly the scripted calls (${where})`, async () => {
      const base = where === 'HTTP listener' ? server.base : server.admin;
      assert.ok(base, `no admin URL on stderr:\n${server.stderr()}`);
      const res = await get(`${base}/metrics`, kOpsAll);
      assert.equal(res.status, 200, res.text);
      const m = parseMetrics(res.text);
      const calls = (tenant, tool, outcome) =>
        value(m, 'mcpcell_tool_calls_total', { tenant, tool, outcome });
      assert.equal(calls('alice', 'run_command', 'ok'), 3);
      assert.equal(calls('alice', 'read_file', 'error'), 1);
      assert.equal(calls('bob', 'run_command', 'refused'), 1);
      assert.equal(calls('alice', 'run_command', 'error'), undefined);
      assert.equal(value(m, 'mcpcell_tool_call_duration_seconds_count',
        { tool: 'run_command', outcome: 'ok' }), 3);
      assert.equal(value(m, 'mcpcell_http_requests_total',
        { route: 'mcp', code: '401', tenant: '' }), 1);
      assert.equal(value(m, 'mcpcell_audit_records_total', { type: 'exec.end' }), 3);
      assert.equal(value(m, 'mcpcell_audit_records_total', { type: 'policy.refused' }), 1);
      assert.equal(value(m, 'mcpcell_audit_write_errors_total', {}), 0);
      assert.equal(value(m, 'mcpcell_cell_creations_total', { tenant: 'alice' }), 1);
      assert.equal(value(m, 'mcpcell_cell_creations_total', { tenant: 'bob' }), undefined);
      assert.equal(value(m, 'mcpcell_sessions', { tenant: 'alice', state: 'running' }), 1);
      assert.equal(value(m, 'mcpcell_cells', { tenant: 'alice' }), 1);
      assert.equal(value(m, 'mcpcell_egress_refusals_total', { tenant: 'alice' }), 1);
      assert.equal(value(m, 'mcpcell_egress_refusals_total', { tenant: 'bob' }), undefined);
      const cpu = value(m, 'mcpcell_exec_cpu_seconds_total', { tenant: 'alice' });
      assert.ok(cpu > 0 && cpu < 60, `exec CPU seconds ${cpu}`);
      const families = new Map(m.map((s) => [s.family, s.type]));
      assert.equal(families.get('mcpcell_tool_calls'), 'counter');
      assert.equal(families.get('mcpcell_tool_call_duration_seconds'), 'histogram');
      assert.equal(families.get('mcpcell_sessions'), 'gauge');
    });
  }

  it('answers /healthz and /readyz without a token on both listeners', async () => {
    for (const base of [server.base, server.admin]) {
      const health = await get(`${base}/healthz`);
      assert.equal(health.status, 200);
      assert.equal(health.text, 'ok\n');
      const ready = await get(`${base}/readyz`);
      assert.equal(ready.status, 200, ready.text);
    }
  });
});

describe('mcpcell /readyz while it cannot make a cell', () => {
  let stateDir;
  let server;

  // Runs `args` in the server's own mount namespace (made private by unshare -m).
  const inServerMounts = (args) =>
    execFileSync('nsenter', ['-t', String(server.proc.pid), '-m', '--', ...args]);

  async function readyz() {
    const res = await get(`${server.base}/readyz`);
    return { status: res.status, body: res.text };
  }

  async function waitFor(status) {
    let last;
    for (let i = 0; i < 100; i++) {
      last = await readyz();
      if (last.status === status) return last;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(`/readyz stayed ${last.status} (${last.body}), expected ${status}`);
  }

  let initDir;
  before(async () => {
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-readyz-state-'));
    // The server's own copy of cell init, which one test takes away for a while.
    initDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-readyz-init-'));
    copyFileSync(binary('mcpcell-init'), path.join(initDir, 'mcpcell-init'));
    chmodSync(path.join(initDir, 'mcpcell-init'), 0o755);
    // [audit] required: the trail (in the state dir) is checked too.
    const policy = path.join(initDir, 'required.toml');
    writeFileSync(policy, 'name = "audit-required"\n[audit]\nrequired = true\n');
    // No warm pool: its refills would fail while cell init is away and add "warm_pool".
    server = await startServer(['--http', '127.0.0.1:0', '--state-dir', stateDir, '--init',
      path.join(initDir, 'mcpcell-init'), '--warm-cells', '0', '--policy', policy],
    ['unshare', '-m', '--propagation', 'private']);
  });
  after(async () => {
    const code = await server?.stop();
    assert.equal(code, 0, `server exit code; stderr:\n${server?.stderr()}`);
    rmSync(stateDir, { recursive: true, force: true });
    rmSync(initDir, { recursive: true, force: true });
  });

  it('goes not ready naming cell_init while cell init is gone', async () => {
    await waitFor(200);
    const init = path.join(initDir, 'mcpcell-init');
    renameSync(init, `${init}.away`);
    const down = await waitFor(503);
    assert.deepEqual(JSON.parse(down.body), { status: 'not ready', failing: ['cell_init'] });
    renameSync(`${init}.away`, init);
    await waitFor(200);
  });

  it('goes not ready naming state_dir and audit, and ready again once it can write', async () => {
    assert.equal((await waitFor(200)).body, 'ready\n');
    inServerMounts(['mount', '--bind', stateDir, stateDir]);
    inServerMounts(['mount', '-o', 'remount,bind,ro', stateDir]);
    const down = await waitFor(503);
    assert.deepEqual(JSON.parse(down.body),
      { status: 'not ready', failing: ['state_dir', 'audit'] });
    assert.equal((await get(`${server.base}/healthz`)).status, 200, 'still serving');
    inServerMounts(['umount', stateDir]);
    await waitFor(200);
    assert.match(server.stderr(), /readyz: not ready: state_dir: /);
  });
});

describe('mcpcell serve --admin refuses what it cannot serve safely', () => {
  for (const [admin, why] of [
    ['9100x', /--admin: 9100x: expected \[ADDR:\]PORT/],
    ['0.0.0.0:0', /--admin 0\.0\.0\.0: refusing a non-loopback address without operators/],
  ]) {
    it(`refuses to start with --admin ${admin}, saying why`, async () => {
      const stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-admin-refused-'));
      try {
        await assert.rejects(
          startServer(['--http', '127.0.0.1:0', '--state-dir', stateDir, '--admin', admin]),
          (err) => {
            assert.match(err.message, /exited \((2|105)\)/);
            assert.match(err.message, why);
            return true;
          });
      } finally {
        rmSync(stateDir, { recursive: true, force: true });
      }
    });
  }
});

describe('mcpcell serve over stdio with --admin', () => {
  let stateDir;
  let session;

  before(async () => {
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-metrics-stdio-'));
    session = await connect({ binaryName: 'mcpcell',
      args: ['serve', '--state-dir', stateDir, '--admin', '127.0.0.1:0'] });
  });
  after(async () => {
    await session?.close();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('serves the operators\' endpoints beside stdio, counting its session under tenant ""',
    async () => {
      const r = await session.client.callTool({ name: 'run_command',
        arguments: { command: 'echo stdio' } });
      assert.ok(!r.isError, JSON.stringify(r));
      const admin = /operators' endpoints at (http:\/\/[^\s/]+)\/metrics/.exec(session.stderr());
      assert.ok(admin, `no admin URL on stderr:\n${session.stderr()}`);
      const res = await get(`${admin[1]}/metrics`);
      assert.equal(res.status, 200, res.text);
      const m = parseMetrics(res.text);
      assert.equal(value(m, 'mcpcell_tool_calls_total',
        { tenant: '', tool: 'run_command', outcome: 'ok' }), 1);
      assert.equal(value(m, 'mcpcell_cell_creations_total', { tenant: '' }), 1);
      assert.equal(value(m, 'mcpcell_sessions', { tenant: '', state: 'running' }), 1);
      assert.equal((await get(`${admin[1]}/readyz`)).status, 200);
    });
});
