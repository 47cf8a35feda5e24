// Escape probes, other cells: two sessions of one `mcpcell serve --http` at once, each in
// its own cell. Session B goes after what session A has running or stored: processes and
// signals, files and /dev/shm, SysV IPC, abstract unix sockets, file locks on inodes the
// cells share, AF_VSOCK. Each probe asserts the exact failure (and, as a control, that the
// same thing works inside A), then that both sessions and a fresh one still work.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { assertHealthy, cleanup, hostTempDir, isRoot, kPySyscall, startHttp } from './lib/sec.mjs';

function statusOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return '';  // gone meanwhile
  }
}

// Host pids, descendants of `ancestor` (our server), whose pid in their own namespace is
// `nsPid` and whose command is `comm`.
function hostPidsOf(comm, nsPid, ancestor) {
  const out = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const status = statusOf(entry);
    const name = /^Name:\s+(.*)$/m.exec(status)?.[1];
    const nspid = /^NSpid:\s+(.*)$/m.exec(status)?.[1].trim().split(/\s+/).map(Number) ?? [];
    if (name !== comm || nspid.length < 2 || nspid[nspid.length - 1] !== nsPid) continue;
    let pid = Number(entry);
    for (let depth = 0; depth < 16 && pid > 1 && pid !== ancestor; depth++) {
      pid = Number(/^PPid:\s+(\d+)$/m.exec(statusOf(pid))?.[1] ?? 0);
    }
    if (pid === ancestor) out.push(Number(entry));
  }
  return out;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

describe('other cells (two sessions of one HTTP server)', () => {
  let stateDir;
  let server;
  let a;
  let b;
  const fresh = () => server.session();

  before(async () => {
    stateDir = hostTempDir('mcpcell-sec-cells-');
    server = await startHttp(stateDir, ['--warm-cells', '0']);
    [a, b] = [await server.session(), await server.session()];
    const [ia, ib] = [await a.call('session_info'), await b.call('session_info')];
    assert.notEqual(ia.structuredContent.cell_id, ib.structuredContent.cell_id, 'two sessions, two cells');
  });
  after(async () => {
    await a?.close();
    await b?.close();
    const code = await server?.stop();
    assert.equal(code, 0, server?.stderr());
    cleanup(stateDir);
  });

  it('processes: B neither sees A\'s processes nor can signal them by host or cell pid', async () => {
    const started = await a.run('sleep 300 >/dev/null 2>&1 & echo $!');
    const aPid = Number(started.stdout.trim());
    const hostPids = hostPidsOf('sleep', aPid, server.pid);
    assert.equal(hostPids.length, 1, `A's sleep (pid ${aPid} in A) on the host`);
    const [hostPid] = hostPids;
    const ps = await b.run('ps -eo pid=,comm=');
    assert.doesNotMatch(ps.stdout, /sleep/);
    const r = await b.pyJson(`${kPySyscall}
pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]
print(json.dumps({
  'host_pid': err(lambda: os.kill(${hostPid}, 9)),
  'cell_pid': err(lambda: os.kill(${aPid}, 9)) if ${aPid} not in pids else 'ESRCH',
  'pidfd': err(lambda: os.pidfd_open(${hostPid})),
}))`);
    assert.deepEqual(r, { host_pid: 'ESRCH', cell_pid: 'ESRCH', pidfd: 'ESRCH' });
    assert.ok(alive(hostPid), 'A\'s process survived B\'s attempts');
    const check = await a.run(`kill -0 ${aPid} && echo alive; kill ${aPid}`);
    assert.equal(check.stdout, 'alive\n');
    await assertHealthy(a, fresh);
    await assertHealthy(b);
  });

  it('signals: kill(-1) in B reaches only B\'s own processes', async () => {
    const started = await a.run('sleep 300 >/dev/null 2>&1 & echo $!');
    const aPid = Number(started.stdout.trim());
    const [hostPid] = hostPidsOf('sleep', aPid, server.pid);
    assert.ok(hostPid > 1, `A's sleep (pid ${aPid} in A) on the host`);
    // kill(-1) signals every process the caller may signal except itself (and init).
    const r = await b.run('sleep 300 >/dev/null 2>&1 & sleep 0.2; kill -9 -1; echo rc=$?; wait; ps -eo comm=');
    assert.equal(r.stdout, 'rc=0\nmcpcell-init\nsh\nps\n', 'B\'s own sleep was killed, init was not');
    assert.ok(alive(hostPid), 'A\'s sleep survived');
    const aLeft = await a.run(`kill -0 ${aPid} && echo alive; kill ${aPid}`);
    assert.equal(aLeft.stdout, 'alive\n');
    await assertHealthy(a, fresh);
    await assertHealthy(b);
  });

  it('files: B cannot read A\'s /workspace, /tmp or /dev/shm, nor A\'s cell directory on the host', async () => {
    const info = await a.call('session_info');
    const aCell = info.structuredContent.cell_id;
    await a.run('echo secret-a > /workspace/a.txt; echo tmp-a > /tmp/a.txt; echo shm-a > /dev/shm/a.txt');
    const r = await b.run(`cat /workspace/a.txt /tmp/a.txt /dev/shm/a.txt 2>&1; ls ${stateDir}/cells/${aCell} 2>&1; true`);
    assert.equal(r.stdout.match(/No such file or directory/g)?.length, 4, r.stdout);
    assert.doesNotMatch(r.stdout, /secret-a|tmp-a|shm-a/);
    const viaTool = await b.call('read_file', { path: `${stateDir}/cells/${aCell}/workspace/a.txt` });
    assert.equal(viaTool.isError, true);
    assert.match(viaTool.content[0].text, /ENOENT/);
    const own = await a.run('cat /workspace/a.txt /tmp/a.txt /dev/shm/a.txt');
    assert.equal(own.stdout, 'secret-a\ntmp-a\nshm-a\n');
    await assertHealthy(a, fresh);
    await assertHealthy(b);
  });

  it('SysV IPC: A\'s shared memory, semaphores and message queues do not exist for B', async () => {
    const ipc = (create) => `${kPySyscall}
flags = ${create ? '0o1666' : '0o666'}
ids = {'shm': libc.shmget(0x5ec, 4096, flags), 'sem': libc.semget(0x5ec, 1, flags), 'msg': libc.msgget(0x5ec, flags)}
print(json.dumps({k: ('OK' if v >= 0 else errno.errorcode[ctypes.get_errno()]) for k, v in ids.items()}))`;
    assert.deepEqual(await a.pyJson(ipc(true)), { shm: 'OK', sem: 'OK', msg: 'OK' });
    assert.deepEqual(await a.pyJson(ipc(false)), { shm: 'OK', sem: 'OK', msg: 'OK' }, 'A finds its own');
    assert.deepEqual(await b.pyJson(ipc(false)), { shm: 'ENOENT', sem: 'ENOENT', msg: 'ENOENT' });
    const ipcs = await b.run('ipcs -a | grep -c 0x000005ec || true');
    assert.equal(ipcs.stdout.trim(), '0');
    await assertHealthy(a, fresh);
    await assertHealthy(b);
  });

  it('abstract unix sockets: B cannot connect to A\'s listener', async () => {
    await a.run(`nohup python3 -c 'import socket, time
s = socket.socket(socket.AF_UNIX)
s.bind("\\0mcpcell-sec-abstract")
s.listen()
time.sleep(120)' >/dev/null 2>&1 &
sleep 0.5`);
    const connect = `${kPySyscall}
import socket
def go():
    s = socket.socket(socket.AF_UNIX)
    s.connect('\\0mcpcell-sec-abstract')
print(json.dumps({'connect': err(go)}))`;
    assert.deepEqual(await a.pyJson(connect), { connect: 'OK' }, 'A reaches its own listener');
    assert.deepEqual(await b.pyJson(connect), { connect: 'ECONNREFUSED' });
    await a.run('pkill -f mcpcell-sec-abstract || true');
    await assertHealthy(a, fresh);
    await assertHealthy(b);
  });

  // The template's files are seen through each cell's own overlay mount, so a lock taken on
  // them in one cell is on that overlay's inode, not on one the other cell opens.
  it('file locks on shared template files (/usr, /etc) do not cross cells', async () => {
    const files = ['/usr/bin/python3', '/etc/passwd', '/usr/lib/os-release'];
    await a.run(`for f in ${files.join(' ')}; do nohup flock -o -x $f sleep 60 >/dev/null 2>&1 & done; sleep 0.5`);
    const tryLock = (s) => s.run(`for f in ${files.join(' ')}; do flock -n -x $f true && echo free || echo held; done`);
    assert.equal((await tryLock(a)).stdout, 'held\nheld\nheld\n', 'A holds the locks');
    assert.equal((await tryLock(b)).stdout, 'free\nfree\nfree\n', 'B is not blocked by A\'s locks');
    await a.run('pkill flock || true');
    await assertHealthy(a, fresh);
    await assertHealthy(b);
  });

  // A root server makes each cell its own /dev/null, zero, full, random, urandom and tty
  // (mknod in the cell's dir on the host, bound by cell init), so a lock on them is on the
  // cell's own inode. Before, they were binds of the host's nodes: a flock on /dev/null in
  // one cell blocked the other cells and host programs (a covert channel and a denial of
  // service). An unprivileged server cannot mknod: its cells still share the host's nodes
  // and must say so, in session_info's warnings and in `mcpcell doctor`.
  const kSharedDevWarning = 'device nodes shared with the host';
  const doctorDeviceProbe = () => {
    const r = spawnSync(path.join(process.env.MCPCELL_BIN_DIR, 'mcpcell'), ['doctor', '--json'], {
      env: { ...process.env, MCPCELL_STATE_DIR: stateDir }, encoding: 'utf8',
    });
    return JSON.parse(r.stdout).probes.find((p) => p.name === 'device nodes');
  };

  it('file locks on /dev device nodes do not cross cells or reach the host', async (t) => {
    const warnings = (await a.call('session_info')).structuredContent.warnings;
    const shared = warnings.find((w) => w.startsWith(kSharedDevWarning));
    if (!isRoot) {
      // Desktop mode: the limitation is real here, and it must be reported.
      assert.ok(shared, `an unprivileged cell must report shared device nodes: ${JSON.stringify(warnings)}`);
      assert.match(shared, /not root.*flock\/fcntl locks on them are seen by other cells and host programs/);
      const probe = doctorDeviceProbe();
      assert.equal(probe?.verdict, 'degraded', '`mcpcell doctor` reports it');
      assert.match(probe.consequence, /shared with the host/);
      return;
    }
    if (shared) return t.skip(`this host cannot give cells their own device nodes: ${shared}`);
    const nodes = ['/dev/null', '/dev/zero', '/dev/urandom', '/dev/full', '/dev/random', '/dev/tty'];
    // They are the host's devices (same major:minor), and work.
    const hostIds = nodes.map((n) => {
      const st = statSync(n);
      return `${n} ${Math.floor(st.rdev / 256)}:${st.rdev % 256}`;
    }).join('\n');
    const inCell = await a.run(`for n in ${nodes.join(' ')}; do echo "$n $((0x$(stat -c %t $n))):$((0x$(stat -c %T $n)))"; done; ` +
      'echo x > /dev/null && head -c 4 /dev/zero | od -An -tx1 && head -c 16 /dev/urandom | wc -c');
    assert.equal(inCell.stdout, `${hostIds}\n 00 00 00 00\n16\n`);
    const locked = nodes.slice(0, 5);
    await a.run(`for f in ${locked.join(' ')}; do nohup flock -o -x $f sleep 60 >/dev/null 2>&1 & done; sleep 0.5`);
    try {
      const tryLock = (s) => s.run(`for f in ${locked.join(' ')}; do flock -n -x $f true && echo free || echo held; done`);
      assert.equal((await tryLock(a)).stdout, 'held\n'.repeat(5), 'A holds the locks');
      for (const n of locked) {
        const host = spawnSync('flock', ['-n', '-x', n, 'true']);
        assert.equal(host.status, 0, `the host must not be blocked by a cell's lock on ${n}`);
      }
      assert.equal((await tryLock(b)).stdout, 'free\n'.repeat(5), 'B must not be blocked by A\'s locks on device nodes');
    } finally {
      await a.run('pkill flock || true');
    }
    assert.equal(doctorDeviceProbe()?.verdict, 'ok', '`mcpcell doctor` agrees with the cells');
    await assertHealthy(a, fresh);
    await assertHealthy(b);
  });

  // With no tokens configured the server accepts any loopback client, so its endpoint must
  // be out of a cell's reach, directly and through the egress proxy.
  it('the server\'s own HTTP endpoint is out of a cell\'s reach, directly and through the proxy', async () => {
    const port = Number(new URL(server.url).port);
    const r = await b.pyJson(`${kPySyscall}
import socket, http.client, urllib.parse
def direct():
    s = socket.socket()
    s.settimeout(5)
    s.connect(('127.0.0.1', ${port}))
proxy = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
c = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=20)
c.request('POST', 'http://127.0.0.1:${port}/mcp', body='{}', headers={'Host': '127.0.0.1:${port}', 'Content-Type': 'application/json'})
resp = c.getresponse()
print(json.dumps({'direct': err(direct), 'proxied': resp.status, 'reason': resp.getheader('X-Mcpcell-Reason', '')}))`);
    assert.deepEqual(r, { direct: 'ECONNREFUSED', proxied: 403, reason: `mcpcell: egress to 127.0.0.1:${port} denied: not in the policy's allowlist` });
    await assertHealthy(b, fresh);
  });

  it('AF_VSOCK, netlink and packet sockets: EPERM', async () => {
    const r = await b.pyJson(`${kPySyscall}
import socket
print(json.dumps({
  'vsock_stream': err(lambda: socket.socket(40, socket.SOCK_STREAM)),
  'vsock_dgram': err(lambda: socket.socket(40, socket.SOCK_DGRAM)),
  'netlink': err(lambda: socket.socket(16, socket.SOCK_RAW, 0)),
  'packet': err(lambda: socket.socket(17, socket.SOCK_RAW, 0)),
}))`);
    assert.deepEqual(r, { vsock_stream: 'EPERM', vsock_dgram: 'EPERM', netlink: 'EPERM', packet: 'EPERM' });
    await assertHealthy(b, fresh);
  });
});
