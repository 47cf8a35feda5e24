// Escape probes, resources: a fork bomb, a memory bomb, filling /workspace and /tmp, fd
// exhaustion, a 1 GB stdout flood and a CPU hog, each in session A of one `mcpcell serve
// --http` with small limits, while session B keeps calling `run_command true`. Each probe
// asserts the limit that stops it (errno, OOM flag, timeout, cpu time), that the server's
// memory stays bounded, and that A, B and a fresh session work afterwards.
//
// cgroup limits (memory, pids, cpu) exist only under a root server (or a delegated
// cgroup); without one a cell says "limits not enforced", and the probes that would then
// load the whole host (fork and memory bombs, the CPU quota) check that warning instead of
// running. tmpfs sizes and rlimits hold in both modes.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { assertHealthy, cleanup, hostTempDir, isRoot, kPySyscall, rssKiB, startHttp } from './lib/sec.mjs';

const kMemory = 256 << 20;
const kPids = 64;
const kCpus = 0.5;
const kDiskMiB = 96;
const kTmpMiB = 16;

function percentile(values, p) {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

// Calls `run_command true` in `s` until `done()` is true (at least `min` times); returns
// the latencies in ms. Every call must succeed.
async function latencies(s, { done = () => true, min = 10 } = {}) {
  const out = [];
  while (out.length < min || !done()) {
    const t0 = performance.now();
    const r = await s.run('true');
    assert.equal(r.exit_code, 0);
    out.push(performance.now() - t0);
    if (out.length > 2000) break;
  }
  return out;
}

function duKiB(dir) {
  const r = spawnSync('du', ['-sk', dir], { encoding: 'utf8' });
  return Number(r.stdout.split('\t')[0]);
}

describe('resources (A attacks, B keeps working)', () => {
  let dir;
  let stateDir;
  let server;
  let a;
  let b;
  let limitsEnforced;
  let quiet;
  const fresh = () => server.session();
  // Another session's p99 under attack stays within 3x its quiet p99 (issue 9), with a 1 s
  // floor: the CI machine is shared, and a quiet p99 of a few ms would make noise fail it.
  const assertLatency = (during, attack) => {
    const [q, d] = [percentile(quiet, 99), percentile(during, 99)];
    assert.ok(d <= Math.max(3 * q, 1000), `B's p99 ${d.toFixed(0)} ms during ${attack} vs ${q.toFixed(0)} ms quiet`);
  };
  const cgroupSkip = () => (limitsEnforced ? false : 'no cgroup here: the cell says "limits not enforced"');

  before(async () => {
    dir = hostTempDir('mcpcell-sec-res-');
    stateDir = hostTempDir('mcpcell-sec-res-state-');
    const policy = path.join(dir, 'sec-small.toml');
    writeFileSync(policy, `name = "sec-small"
[limits]
memory = "${kMemory >> 20}MiB"
pids = ${kPids}
cpus = ${kCpus}
disk = "${kDiskMiB}MiB"
tmp = "${kTmpMiB}MiB"
`);
    server = await startHttp(stateDir, ['--warm-cells', '0', '--policy', policy]);
    [a, b] = [await server.session(), await server.session()];
    const info = (await a.call('session_info')).structuredContent;
    limitsEnforced = !info.warnings.some((w) => w.startsWith('limits not enforced'));
    // A root server must enforce them; only an unprivileged one may say it cannot.
    if (isRoot) assert.deepEqual(info.warnings, [], 'a root server enforces cgroup limits');
    else assert.ok(!limitsEnforced || info.warnings.length === 0);
    assert.equal(info.pids_limit, kPids);
    assert.equal(info.memory_limit_bytes, kMemory);
    quiet = await latencies(b, { min: 15 });
  });
  after(async () => {
    await a?.close();
    await b?.close();
    const code = await server?.stop();
    assert.equal(code, 0, server?.stderr());
    cleanup(dir);
    cleanup(stateDir);
  });

  it('without cgroup limits the cell says so (desktop mode)', { skip: isRoot ? 'a root server has cgroups' : false }, async (t) => {
    if (limitsEnforced) return t.skip('this host delegates a cgroup to the server');
    const info = (await a.call('session_info')).structuredContent;
    assert.match(info.warnings.join('\n'), /limits not enforced: /);
  });

  it('fork bomb: forks fail with EAGAIN at the pids limit; the server and another session keep working', async (t) => {
    if (cgroupSkip()) return t.skip(cgroupSkip());
    const count = await a.pyJson(`${kPySyscall}
import time
kids = []
while True:
    try:
        pid = os.fork()
    except OSError as e:
        result = {'errno': errno.errorcode[e.errno], 'forked': len(kids)}
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.kill(k, 9)
print(json.dumps(result))`, { timeout_s: 60 });
    assert.equal(count.errno, 'EAGAIN');
    assert.ok(count.forked < kPids && count.forked > kPids - 8, `forked ${count.forked} with pids.max ${kPids}`);
    let bombDone = false;
    // In the foreground (no '&'): the call lasts until its timeout, which kills the group.
    const bomb = a.call('run_code', { language: 'bash', code: ':(){ :|: ; };:', timeout_s: 5 }).finally(() => { bombDone = true; });
    const during = await latencies(b, { done: () => bombDone, min: 5 });
    const r = (await bomb).structuredContent;
    assert.equal(r.timed_out, true, 'the bomb ran until its timeout');
    const left = await a.run('ps -eo comm= | grep -vc "^\\(mcpcell-init\\|ps\\|sh\\|grep\\)$" || true');
    assert.equal(left.stdout.trim(), '0', 'the timeout killed every process of the bomb');
    assertLatency(during, 'the fork bomb');
    t.diagnostic(`B's run_command true: quiet p50 ${percentile(quiet, 50).toFixed(0)} ms p99 ${percentile(quiet, 99).toFixed(0)} ms; during the fork bomb p50 ${percentile(during, 50).toFixed(0)} ms p99 ${percentile(during, 99).toFixed(0)} ms (${during.length} calls)`);
    await assertHealthy(a, fresh);
    await assertHealthy(b);
  });

  // A bomb that puts itself in the background returns at once and leaves the cell at
  // pids.max. Processes may outlive a call (nohup ... &), so nothing kills them then; but
  // when the next exec's fork fails, cell init stops, kills and reaps every process that
  // belongs to no call still running, and the exec goes ahead. Other sessions are not
  // affected.
  it('a fork bomb that backgrounds itself leaves its session able to run commands', async (t) => {
    if (cgroupSkip()) return t.skip(cgroupSkip());
    const c = await server.session();
    try {
      // A background process that keeps the cell at pids.max; the call returns at once.
      const started = await c.py(`import os, time
if os.fork() == 0:
    while True:
        try:
            if os.fork() == 0:
                while True:
                    time.sleep(60)
        except OSError:
            time.sleep(0.05)
print('started')`);
      assert.equal(started.stdout, 'started\n');
      await new Promise((r) => setTimeout(r, 1000));
      const files = await c.call('write_file', { path: 'still.txt', content: 'file tools work' });
      assert.equal(files.isError ?? false, false);
      await assertHealthy(b);
      const after = await c.call('run_command', { command: 'echo recovered' });
      assert.equal(after.isError ?? false, false, after.content[0].text);
    } finally {
      await c.close();
    }
  });

  // A tool call holds a thread of the server's worker pool while it runs. The pool grows
  // when every thread is held (mcp::ServerOptions::max_worker_threads) and one session runs
  // at most max_session_tasks calls at once (the rest wait in its own queue, holding no
  // thread), so A's flood of calls does not make B wait for a thread.
  it('many concurrent calls in one session do not starve another session', {
    // The pool is the same in desktop mode; the root variant measures it (suite time).
    skip: isRoot ? false : 'measured by the root variant: the worker pool does not depend on the mode',
  }, async (t) => {
    const flood = Array.from({ length: 24 }, () => a.call('run_command', { command: 'sleep 3' }));
    await new Promise((r) => setTimeout(r, 1000));  // all of A's requests are in
    const during = [];
    try {
      for (let i = 0; i < 3; i++) {
        const t0 = performance.now();
        await b.run('true');
        during.push(performance.now() - t0);
      }
    } finally {
      const results = await Promise.all(flood);
      assert.ok(results.every((r) => !r.isError), 'A\'s own calls all completed');
    }
    t.diagnostic(`B's run_command true behind 24 concurrent calls of A: ${during.map((d) => d.toFixed(0)).join(', ')} ms (quiet p99 ${percentile(quiet, 99).toFixed(0)} ms)`);
    assertLatency(during, '24 concurrent calls of another session');
  });

  it('memory bomb: OOM-killed inside the cell, reported as such; the cell goes on', async (t) => {
    if (cgroupSkip()) return t.skip(cgroupSkip());
    const r = await a.call('run_code', { language: 'python', code: 'chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))', timeout_s: 60 });
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.oom_killed, true);
    assert.equal(r.structuredContent.signal, 'SIGKILL');
    assert.equal(r.structuredContent.timed_out, false);
    assert.match(r.content[0].text, /^killed: out of memory \(the cell's memory limit\)/);
    // peak_memory_bytes is the process's largest RSS, which also counts shared file pages
    // (the interpreter) that are charged to whoever read them first.
    assert.ok(r.structuredContent.peak_memory_bytes <= kMemory + (16 << 20), `peak ${r.structuredContent.peak_memory_bytes}`);
    await assertHealthy(a, fresh);
    await assertHealthy(b);
  });

  it('disk fill of /workspace, /tmp and /dev/shm: ENOSPC at each one\'s limit; nothing lands on the host', async () => {
    const before = duKiB(stateDir);
    const fill = (file) => a.pyJson(`${kPySyscall}
n = 0
with open(${JSON.stringify(file)}, 'wb') as f:
    try:
        while True:
            f.write(b'x' * (1 << 20))
            f.flush()
            n += 1
    except OSError as e:
        print(json.dumps({'errno': errno.errorcode[e.errno], 'mib': n}))`);
    const ws = await fill('/workspace/fill');
    assert.equal(ws.errno, 'ENOSPC');
    assert.ok(ws.mib >= kDiskMiB - 4 && ws.mib <= kDiskMiB, `wrote ${ws.mib} MiB into a ${kDiskMiB} MiB workspace`);
    const tool = await a.call('write_file', { path: 'more.txt', content: 'y'.repeat(1 << 20) });
    assert.equal(tool.isError, true);
    assert.match(tool.content[0].text, /disk limit/);
    assert.ok(duKiB(stateDir) - before < 4096, 'the filled workspace is not on the host\'s disk');
    await a.run('rm /workspace/fill');
    const tmp = await fill('/tmp/fill');
    assert.equal(tmp.errno, 'ENOSPC');
    assert.ok(tmp.mib >= kTmpMiB - 2 && tmp.mib <= kTmpMiB, `wrote ${tmp.mib} MiB into a ${kTmpMiB} MiB /tmp`);
    await a.run('rm /tmp/fill');
    const shm = await fill('/dev/shm/fill');
    assert.equal(shm.errno, 'ENOSPC');
    assert.ok(shm.mib <= 64, `wrote ${shm.mib} MiB into /dev/shm`);
    await a.run('rm /dev/shm/fill');
    await assertHealthy(a, fresh);
    await assertHealthy(b);
  });

  it('fd exhaustion: EMFILE at RLIMIT_NOFILE', async () => {
    const r = await a.pyJson(`${kPySyscall}
import resource
fds = []
try:
    while True:
        fds.append(os.open('/dev/null', os.O_RDONLY))
except OSError as e:
    print(json.dumps({'errno': errno.errorcode[e.errno], 'opened': len(fds), 'limit': resource.getrlimit(resource.RLIMIT_NOFILE)}))`);
    assert.equal(r.errno, 'EMFILE');
    assert.deepEqual(r.limit, [1024, 1024]);
    assert.ok(r.opened > 1000 && r.opened < 1024, `opened ${r.opened}`);
    await assertHealthy(a, fresh);
    await assertHealthy(b);
  });

  it('a 1 GB stdout flood: cut, saved in the cell, and the server\'s memory stays bounded', async (t) => {
    const before = rssKiB(server.pid);
    let peak = before;
    const sampler = setInterval(() => { peak = Math.max(peak, rssKiB(server.pid)); }, 50);
    let r;
    try {
      r = await a.run('head -c 1000000000 /dev/zero', { timeout_s: 120 });
    } finally {
      clearInterval(sampler);
    }
    assert.equal(r.stdout_bytes, 1000000000);
    assert.equal(r.stdout_truncated, true);
    assert.ok(r.stdout.length <= 2 * 64 * 1024 + 1024, `kept ${r.stdout.length} bytes`);
    assert.match(r.full_stdout_path, /^\/workspace\/\.mcpcell\//);
    assert.match(r.text, /bytes omitted/);
    const cutNote = '\n[mcpcell: output cut here: the saved copy is capped]\n';
    const saved = await a.run(`wc -c < ${r.full_stdout_path}; tail -c ${cutNote.length} ${r.full_stdout_path}`);
    assert.equal(saved.stdout, `${(64 << 20) + cutNote.length}\n${cutNote}`, 'the saved copy is capped at 64 MiB and says so');
    t.diagnostic(`server VmRSS ${before} KiB before, peak ${peak} KiB during, ${rssKiB(server.pid)} KiB after a 1 GB flood`);
    assert.ok(peak - before < 64 * 1024, `server RSS grew by ${peak - before} KiB during a 1 GB flood`);
    await a.run(`rm ${r.full_stdout_path}`);
    await assertHealthy(a, fresh);
    await assertHealthy(b);
  });

  // The egress proxy lives in the server: a cell holding connections open to it must not
  // run the server out of descriptors. Per cell it keeps at most 2 x max_connections + 16
  // sockets (80 with the default 32) and closes the rest.
  it('a connection flood on the egress proxy: the server keeps at most 80 of the cell\'s sockets', async (t) => {
    const fds = () => readdirSync(`/proc/${server.pid}/fd`).length;
    const before = fds();
    let peak = before;
    const sampler = setInterval(() => { peak = Math.max(peak, fds()); }, 50);
    let r;
    try {
      r = await a.pyJson(`${kPySyscall}
import socket, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
socks = []
for i in range(300):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((proxy.hostname, proxy.port))
        socks.append(s)
    except OSError:
        pass
time.sleep(1.5)
open_ = 0
for s in socks:
    s.setblocking(False)
    try:
        if s.recv(1) != b'':
            open_ += 1
    except BlockingIOError:
        open_ += 1
    except OSError:
        pass
print(json.dumps({'connected': len(socks), 'still_open': open_}))`, { timeout_s: 60 });
    } finally {
      clearInterval(sampler);
    }
    t.diagnostic(`proxy flood: ${r.connected} connects, ${r.still_open} kept open; server fds ${before} before, peak ${peak}, ${fds()} after`);
    assert.ok(r.still_open <= 80 && r.still_open >= 16, `the proxy kept ${r.still_open} of the cell's sockets`);
    assert.ok(peak - before <= 100, `server fds grew by ${peak - before}`);
    await assertHealthy(a, fresh);
    await assertHealthy(b);
    assert.ok(fds() - before <= 8, `server fds did not come back: ${before} -> ${fds()}`);
  });

  it('a CPU hog: held to the cpu limit, killed with its whole group at the timeout', async (t) => {
    // The cell's cpu time (its cgroup's), not the call's: the spinners are never waited for.
    const cpuBefore = (await a.call('session_info')).structuredContent.cpu_time_ms;
    let hogDone = false;
    // Three spinners against a quota of half a CPU; one where nothing limits it (desktop).
    const spinners = limitsEnforced ? '1 2 3' : '1';
    const hog = a.call('run_command', { command: `for i in ${spinners}; do (while :; do :; done) & done; wait`, timeout_s: 3 })
      .finally(() => { hogDone = true; });
    const during = await latencies(b, { done: () => hogDone, min: 3 });
    const r = (await hog).structuredContent;
    assert.equal(r.timed_out, true);
    assert.equal(r.signal, 'SIGKILL');
    const left = await a.run('ps -eo pid=,comm=');
    assert.match(left.stdout, /^\s*1 mcpcell-init\n\s*\d+ sh\n\s*\d+ ps\n$/, 'the timeout killed the hog\'s whole group');
    const cpu = (await a.call('session_info')).structuredContent.cpu_time_ms - cpuBefore;
    t.diagnostic(`CPU hog (spinners ${spinners}): ${limitsEnforced ? cpu : 'unmeasured (no cgroup)'} ms of cell cpu in ${r.duration_ms} ms (limit ${kCpus} CPU); B's run_command true during it: p50 ${percentile(during, 50).toFixed(0)} ms p99 ${percentile(during, 99).toFixed(0)} ms`);
    if (limitsEnforced) {
      // Unlimited, three spinners on this host's cores would use several times the quota.
      assert.ok(cpu <= kCpus * r.duration_ms * 1.25 + 150, `${cpu} ms cpu in ${r.duration_ms} ms with a ${kCpus} CPU quota`);
      assert.ok(cpu >= kCpus * r.duration_ms * 0.15, `the hog barely ran (${cpu} ms): the measurement proves nothing`);
    }
    assertLatency(during, 'the CPU hog');
    await assertHealthy(a, fresh);
    await assertHealthy(b);
  });
});
