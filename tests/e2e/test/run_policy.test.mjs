// One path from a policy to a cell, for `mcpcell run` and `mcpcell pool`: the cell spec
// `mcpcell policy check` prints (environment and mounts) is what a cell of `mcpcell run
// --policy` sees, for the default profile and for a profile file with flags as overrides;
// a policy that needs `mcpcell serve` (egress, packages) is refused; a pooled run takes the
// pool's cell only when its policy compiles to the same spec.

import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { binDir } from '../lib/harness.mjs';

const mcpcell = () => path.join(binDir(), 'mcpcell');
// Variables the program's shell sets itself, and TERM, which run passes from the host.
const kNotInSpec = new Set(['PWD', 'TERM']);

// The "  env: A=1 B=2" and "  mount: SRC -> DST (...)" lines of `policy check`.
function printedSpec(profile, stateDir) {
  const out = execFileSync(mcpcell(), ['policy', 'check', profile, '--state-dir', stateDir], { encoding: 'utf8' });
  const envLine = out.split('\n').find((l) => l.startsWith('  env:'));
  assert.ok(envLine, `no env line in:\n${out}`);
  const env = new Map();
  for (const word of envLine.slice('  env:'.length).trim().split(' ')) {
    const eq = word.indexOf('=');
    env.set(word.slice(0, eq), word.slice(eq + 1));
  }
  const mounts = out.split('\n').filter((l) => l.startsWith('  mount: ')).map((l) => /-> (\S+) /.exec(l)[1]);
  return { env, mounts, out };
}

// `mcpcell run --state-dir S ARGS -- CMD...`: status, stdout, stderr.
function run(stateDir, args, command) {
  const r = spawnSync(mcpcell(), ['run', '--state-dir', stateDir, ...args, '--', ...command],
    { encoding: 'utf8', env: { ...process.env, TERM: 'dumb' } });
  return { status: r.status, out: r.stdout, err: r.stderr };
}

function parseEnv(text) {
  const env = new Map();
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) env.set(line.slice(0, eq), line.slice(eq + 1));
  }
  return env;
}

// What the cell of `mcpcell run ARGS` sees must be what policy check prints for `profile`.
function assertRunCellIsPrinted(stateDir, profile, args) {
  const printed = printedSpec(profile, stateDir);
  const r = run(stateDir, ['--no-pool', ...args], ['/bin/sh', '-c', 'env; echo @@@; cat /proc/self/mountinfo']);
  assert.equal(r.status, 0, r.err);
  const [envText, mountinfo] = r.out.split('@@@\n');
  const cell = parseEnv(envText);
  for (const [name, value] of printed.env) {
    assert.equal(cell.get(name), value, `${profile}: ${name} printed as "${value}", the run cell has "${cell.get(name)}"`);
  }
  for (const name of cell.keys()) {
    assert.ok(printed.env.has(name) || kNotInSpec.has(name),
      `${profile}: the run cell has ${name}=${cell.get(name)}, which policy check does not print:\n${printed.out}`);
  }
  for (const target of printed.mounts) {
    assert.ok(mountinfo.split('\n').some((l) => l.split(' ')[4] === target), `${profile}: ${target} is not mounted`);
  }
  return { printed, mountinfo };
}

describe('mcpcell run: the cell policy check prints', () => {
  let dir, stateDir;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-e2e-run-'));
    chmodSync(dir, 0o755);  // the cells' uids reach the state dir and the mount through it
    stateDir = path.join(dir, 'state');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('default: the printed environment and mounts are the run cell\'s', () => {
    const { printed } = assertRunCellIsPrinted(stateDir, 'default', []);
    assert.equal(printed.env.get('MCPCELL_POLICY'), 'default');
  });

  it('a profile file with a mount, and flags as overrides', () => {
    const shared = mkdtempSync(path.join(dir, 'shared-'));
    chmodSync(shared, 0o755);
    writeFileSync(path.join(shared, 'hello.txt'), 'hi\n');
    const profile = path.join(dir, 'custom.toml');
    writeFileSync(profile, `name = "custom"\n[limits]\nmemory = "512MiB"\n\n[[filesystem.mounts]]\n` +
      `source = "${shared}"\ntarget = "/data"\nmode = "ro"\n`);
    const { printed, mountinfo } = assertRunCellIsPrinted(stateDir, profile,
      ['--policy', profile, '--memory', '256M', '--disk', '64M', '--no-seccomp']);
    assert.deepEqual(printed.mounts, ['/data']);
    assert.equal(printed.env.get('MCPCELL_POLICY'), 'custom');
    // The flags' values, seen from inside the cell: /workspace is a 64 MiB tmpfs, no seccomp.
    const ws = mountinfo.split('\n').find((l) => l.split(' ')[4] === '/workspace');
    assert.match(ws, /size=65536k/, ws);
    const r = run(stateDir, ['--no-pool', '--policy', profile, '--no-seccomp'],
      ['/bin/sh', '-c', 'grep ^Seccomp: /proc/self/status; cat /data/hello.txt']);
    assert.equal(r.status, 0, r.err);
    assert.match(r.out, /^Seccomp:\s+0\nhi\n$/);
  });

  it('refuses the dev profile and any policy with egress or packages', () => {
    const dev = run(stateDir, ['--policy', 'dev'], ['/bin/echo', 'ran']);
    assert.equal(dev.status, 125);
    assert.equal(dev.out, '');
    assert.match(dev.err, /^mcpcell run: policy "dev" \(<builtin:dev>\) allows egress through the proxy \(\[network\] egress = "allowlist"\), which only `mcpcell serve` runs; use a policy with egress = "deny"\n$/);
    const egress = path.join(dir, 'egress.toml');
    writeFileSync(egress, 'name = "net"\n[network]\negress = "allowlist"\nallow = ["example.com:443"]\n');
    const net = run(stateDir, ['--policy', egress], ['/bin/true']);
    assert.equal(net.status, 125);
    assert.match(net.err, /policy "net" .*\[network\] egress = "allowlist"/);
    const pool = spawnSync(mcpcell(), ['pool', '--state-dir', stateDir, '--policy', 'dev'], { encoding: 'utf8' });
    assert.equal(pool.status, 1);
    assert.match(pool.stderr, /^mcpcell pool: policy "dev"/);
  });
});

describe('mcpcell pool: a run takes its cell iff the policy compiles to the same spec', () => {
  let dir, stateDir, pool, profile, poolLog = '';
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-e2e-pool-'));
    chmodSync(dir, 0o755);
    stateDir = path.join(dir, 'state');
    profile = path.join(dir, 'small.toml');
    writeFileSync(profile, 'name = "small"\n[limits]\nopen_files = 77\n');
    pool = spawn(mcpcell(), ['pool', '--state-dir', stateDir, '--size', '1', '--no-warm', '--policy', profile],
      { stdio: ['ignore', 'ignore', 'pipe'] });
    await new Promise((resolve, reject) => {
      pool.stderr.on('data', (d) => {
        poolLog += d;
        if (poolLog.includes('listening on')) resolve();
      });
      pool.on('exit', (code) => reject(new Error(`mcpcell pool exited ${code}: ${poolLog}`)));
    });
    assert.match(poolLog, /keeping 1 cell\(s\) of policy "small"/);
  });
  after(async () => {
    const exited = new Promise((resolve) => pool.on('exit', resolve));
    pool.kill('SIGTERM');
    assert.equal(await exited, 0, poolLog);
    rmSync(dir, { recursive: true, force: true });
  });

  it('the same policy: a pooled cell', () => {
    const r = run(stateDir, ['--timings', '--policy', profile], ['/bin/sh', '-c', 'ulimit -n']);
    assert.equal(r.status, 0, r.err);
    assert.equal(r.out, '77\n');
    assert.match(r.err, /was made ahead by the pool/);
  });

  it('another policy: a cell of its own, and where the specs differ', () => {
    const r = run(stateDir, ['--timings'], ['/bin/sh', '-c', 'ulimit -n']);
    assert.equal(r.status, 0, r.err);
    assert.equal(r.out, '1024\n');
    assert.match(r.err, /not using the pool: this pool makes cells of another spec: the run wants "[^"]+", the pool's cells have "[^"]+"/);
    assert.match(r.err, /create total/);
  });
});
