// What `mcpcell serve` refuses at start instead of failing later (issue 24): a second
// server on an address another one listens on (it used to share the port through
// SO_REUSEPORT and take part of the connections, breaking sessions), and, for a root
// server, a state dir its cells cannot reach (it used to start, then fail every tool call
// with mount("tmpfs", ".../mnt"): EACCES). `mcpcell run` and `mcpcell doctor` say the same.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, statfsSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { binary } from '../lib/harness.mjs';
import { connectHttp, startHttpServer } from './http_util.mjs';

// A port free right now on 127.0.0.1 (the OS picks it; we close it again).
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Runs `mcpcell args...` to its end; resolves with {code, stderr, stdout}. A process still
// running after `timeoutMs` is killed and reported as {code: 'still running'}.
function runToExit(args, { timeoutMs = 30000 } = {}) {
  const proc = spawn(binary('mcpcell'), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  proc.stderr.on('data', (c) => { stderr += c; });
  proc.stdout.on('data', (c) => { stdout += c; });
  return new Promise((resolve) => {
    let timedOut = false;
    const timer = setTimeout(() => { timedOut = true; proc.kill('SIGTERM'); }, timeoutMs);
    proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: timedOut ? 'still running' : (code ?? signal), stderr, stdout });
    });
  });
}

describe('mcpcell serve --http on an address another server listens on', () => {
  let stateDir;
  let first;
  let port;
  before(async () => {
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-serve-start-'));
    port = await freePort();
    first = await startHttpServer('mcpcell', ['serve', '--http', `127.0.0.1:${port}`,
      '--state-dir', stateDir, '--warm-cells', '0']);
  });
  after(async () => {
    const code = await first?.stop();
    assert.equal(code, 0, `first server's exit code; stderr:\n${first?.stderr()}`);
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('refuses to start, saying the address is in use; the first one keeps serving', async () => {
    const second = await runToExit(['serve', '--http', `127.0.0.1:${port}`, '--state-dir',
      stateDir, '--warm-cells', '0'], { timeoutMs: 20000 });
    assert.notEqual(second.code, 'still running',
      `the second server is still running on the same port; stderr:\n${second.stderr}`);
    assert.notEqual(second.code, 0, second.stderr);
    assert.match(second.stderr,
      new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: address already in use`));
    // Every new connection reaches the first server (with a shared port, some went to the
    // second, which did not know their session).
    for (let i = 0; i < 4; ++i) {
      const { client } = await connectHttp(first.url);
      const names = (await client.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('run_command'));
      await client.close();
    }
  });
});

describe('a state dir below a directory the cells cannot search', () => {
  const root = process.getuid?.() === 0;
  let parent;
  let stateDir;
  before(() => {
    parent = mkdtempSync(path.join(tmpdir(), 'mcpcell-private-'));
    chmodSync(parent, 0o700);  // what mktemp -d makes
    stateDir = path.join(parent, 'state');
  });
  after(() => rmSync(parent, { recursive: true, force: true }));

  const expected = (dir) => new RegExp(
    `${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(mode 0700, owner [^)]*\\) cannot be ` +
    `searched by the cells' uids.*chmod o\\+x ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`);

  it('serve exits at start naming the directory and the fix (root server)', { skip: !root &&
    'only a root server runs cells as other uids' }, async () => {
    const r = await runToExit(['serve', '--state-dir', stateDir, '--warm-cells', '0',
      '--http', '127.0.0.1:0'], { timeoutMs: 20000 });
    assert.notEqual(r.code, 'still running', `serve started anyway; stderr:\n${r.stderr}`);
    assert.notEqual(r.code, 0, r.stderr);
    assert.match(r.stderr, new RegExp(`state dir ${stateDir}: `));
    assert.match(r.stderr, expected(parent));
  });

  it('run refuses it the same way', { skip: !root && 'only as root' }, async () => {
    const r = await runToExit(['run', '--state-dir', stateDir, '--', 'true']);
    assert.equal(r.code, 125, r.stderr);
    assert.match(r.stderr, expected(parent));
  });

  it('doctor --state-dir reports it and exits 1', { skip: !root && 'only as root' }, async () => {
    const r = await runToExit(['doctor', '--state-dir', stateDir]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /\[missing\] state dir: /);
    assert.match(r.stdout, expected(parent));
    chmodSync(parent, 0o711);
    const fixed = await runToExit(['doctor', '--state-dir', stateDir]);
    assert.match(fixed.stdout, /\[ok\] state dir: /);
    chmodSync(parent, 0o700);
  });
});

// A state dir on a disk filesystem works, but every cell waits for the disk when its
// directories and files are made and removed: doctor and the server's start-up log say
// that a tmpfs one (under /run on most hosts) is faster; on a tmpfs they say nothing.
describe('a state dir on a disk filesystem', () => {
  const kTmpfs = 0x01021994;
  const diskParent = tmpdir();
  const onDisk = statfsSync(diskParent).type !== kTmpfs;
  const shmIsTmpfs = statfsSync('/dev/shm').type === kTmpfs;
  let dirs = [];
  after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

  it('doctor and serve say that a tmpfs state dir makes cells faster', { skip: !onDisk && `${diskParent} is a tmpfs here` }, async () => {
    const stateDir = mkdtempSync(path.join(diskParent, 'mcpcell-disk-state-'));
    dirs.push(stateDir);
    const doctor = await runToExit(['doctor', '--state-dir', stateDir]);
    assert.match(doctor.stdout, /\[degraded\] state dir filesystem: state dir \S+ is on a disk filesystem \([^)]+\), not a tmpfs: cells are made and removed faster with a state dir on a tmpfs, such as one under \/run/);
    // stdio serve with stdin at EOF: it starts (the note is in its log) and ends.
    const serve = await runToExit(['serve', '--state-dir', stateDir, '--warm-cells', '0']);
    assert.match(serve.stderr, /is on a disk filesystem .*such as one under \/run/);
  });

  it('on a tmpfs neither says it', { skip: !shmIsTmpfs && '/dev/shm is not a tmpfs here' }, async () => {
    const stateDir = mkdtempSync('/dev/shm/mcpcell-tmpfs-state-');
    dirs.push(stateDir);
    const doctor = await runToExit(['doctor', '--state-dir', stateDir]);
    assert.match(doctor.stdout, /\[ok\] state dir filesystem: /);
    const serve = await runToExit(['serve', '--state-dir', stateDir, '--warm-cells', '0']);
    assert.doesNotMatch(serve.stderr, /disk filesystem/);
  });
});
