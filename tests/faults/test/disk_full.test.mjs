// Disk full in the state directory. The server runs in a private mount namespace made for
// it (`unshare -m --propagation private`), with its state dir on an 8 MiB tmpfs mounted
// there only (the host never sees it; the test reaches it through /proc/<server>/root). The
// test fills the tmpfs, then: a session made before keeps running commands (no state space
// needed); a new session's first call, which must make a cell dir, fails with an error that
// says the disk is full; egress refusals while full lose their audit record but never leave
// a torn line; after the filler is removed a new session works and every line of the audit
// trail parses.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, unlinkSync,
  writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { binary } from '../../e2e/lib/harness.mjs';
import { callOk, connectHttp, text } from '../lib/servers.mjs';

function startInPrivateTmpfs(mountDir, extraArgs) {
  const script = 'dir="$0"; bin="$1"; shift; ' +
    'mount -t tmpfs -o size=8m,mode=0755 mcpcell-fault-disk "$dir" && ' +
    'exec "$bin" serve --http 127.0.0.1:0 --state-dir "$dir/state" --warm-cells 0 "$@"';
  const proc = spawn('unshare', ['-m', '--propagation', 'private', 'sh', '-c', script, mountDir,
    binary('mcpcell'), ...extraArgs], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL in 30 s:\n${stderr}`)), 30000);
    proc.stderr.on('data', (c) => {
      stderr += c;
      const m = /(http:\/\/\S+\/mcp)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1], stderr: () => stderr });
      }
    });
    proc.on('exit', (code) => reject(new Error(`server exited (${code}):\n${stderr}`)));
  });
}

describe('disk full in the state directory', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-fault-disk-'));
  chmodSync(dir, 0o755);
  const mountDir = path.join(dir, 'mnt');
  mkdirSync(mountDir, { mode: 0o755 });
  let server;
  let state;  // the state dir as the host reaches it: through the server's root
  const sessions = [];
  before(async () => {
    server = await startInPrivateTmpfs(mountDir, []);
    state = `/proc/${server.proc.pid}/root${mountDir}/state`;
  });
  after(async () => {
    for (const s of sessions) await s.client.close().catch(() => {});
    if (server && server.proc.exitCode === null) {
      server.proc.kill('SIGTERM');
      await new Promise((r) => server.proc.on('exit', r));
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('fails what needs space clearly, serves the rest, recovers, and tears no audit line', async () => {
    // The tmpfs is not visible on the host.
    assert.ok(!readFileSync('/proc/self/mountinfo', 'utf8').includes(mountDir), 'tmpfs is private');
    const a = await connectHttp(server.url, { name: 'before-full' });
    sessions.push(a);
    await callOk(a.client, 'run_command', { command: 'echo ready' });
    const refuse = async (n) => {
      // The egress proxy refuses (policy: deny) and writes one audit record per attempt.
      const r = await callOk(a.client, 'run_command', { command: `for i in $(seq ${n}); do curl -s -o ` +
        '/dev/null -w "%{http_code} " http://refused-$i.example.com/; done' });
      assert.match(text(r), /403/, text(r));
    };
    await refuse(3);
    // The audit trail: the proxy's records are its egress.connection ones.
    const audit = path.join(state, 'audit', 'audit.jsonl');
    const egressRecords = (lines) => lines.map((l) => JSON.parse(l))
      .filter((r) => r.type === 'egress.connection');
    const before = egressRecords(readFileSync(audit, 'utf8').split('\n').filter(Boolean)).length;
    assert.ok(before >= 3, `audit lines before: ${before}`);

    // Fill the tmpfs.
    const filler = path.join(state, 'filler');
    const fd = openSync(filler, 'w');
    const chunk = Buffer.alloc(64 * 1024, 7);
    let filled = 0;
    try {
      for (;;) filled += writeSync(fd, chunk);
    } catch (e) {
      assert.equal(e.code, 'ENOSPC', String(e));
    }
    try {
      for (;;) filled += writeSync(fd, chunk, 0, 512);  // the last partial page too
    } catch (e) {
      assert.equal(e.code, 'ENOSPC', String(e));
    }
    closeSync(fd);
    console.log(`filled ${filled} bytes`);

    // Needs no state space: still served.
    const ok = await callOk(a.client, 'run_command', { command: 'echo still-serving' });
    assert.match(text(ok), /still-serving/);
    await callOk(a.client, 'session_info', {});
    // Crossing a page boundary of the audit file while full is a short write.
    await refuse(40);

    // A new session needs a cell dir: a clear error naming the problem.
    const b = await connectHttp(server.url, { name: 'while-full' });
    sessions.push(b);
    const fail = await b.client.callTool({ name: 'run_command', arguments: { command: 'echo hi' } });
    assert.equal(fail.isError, true, text(fail));
    assert.match(text(fail), /No space left on device|ENOSPC/, text(fail));
    console.log(`new session while full: ${text(fail).split('\n')[0]}`);

    // Space again: everything works.
    unlinkSync(filler);
    const c = await connectHttp(server.url, { name: 'after-full' });
    sessions.push(c);
    const fresh = await callOk(c.client, 'run_command', { command: 'echo fresh-cell' });
    assert.match(text(fresh), /fresh-cell/);
    const retry = await callOk(b.client, 'run_command', { command: 'echo retried' });
    assert.match(text(retry), /retried/);
    await refuse(3);

    // Every audit line parses; the records made after recovery are there.
    const lines = readFileSync(audit, 'utf8').split('\n');
    assert.equal(lines.pop(), '', 'the file ends with a newline');
    for (const [i, line] of lines.entries()) {
      assert.doesNotThrow(() => JSON.parse(line), `audit line ${i + 1} is torn: ${line}`);
    }
    const egress = egressRecords(lines);
    const hosts = egress.map((r) => r.host);
    for (let i = 1; i <= 3; ++i) assert.ok(hosts.includes(`refused-${i}.example.com`));
    console.log(`audit: ${before} egress records before, ${egress.length} after (some lost while full)`);
    assert.ok(egress.length >= before + 3 && egress.length < before + 46,
      `${egress.length} records: the ones written while full were dropped whole`);
  });
});
