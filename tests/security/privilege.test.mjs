// Escape probes, privilege: capabilities, namespaces, mount, ptrace, bpf, keyrings,
// io_uring, perf, kernel modules, other syscall ABIs, personality, TIOCSTI, /proc/sys and
// the cgroup filesystem, each tried from python (raw syscalls by their x86_64 numbers
// through ctypes) or the shell in a real cell behind `mcpcell serve`. Each asserts the
// exact errno or signal, then that the session and a fresh session still work.

import assert from 'node:assert/strict';
import { arch } from 'node:os';
import { after, before, describe, it } from 'node:test';

import { assertHealthy, cleanup, hostTempDir, isRoot, kPySyscall, kSys, startStdio } from './lib/sec.mjs';

// The syscall numbers below are x86_64's.
const skip = arch() === 'x64' ? false : `syscall numbers are x86_64's; this host is ${arch()}`;

describe('privilege (default policy, stdio)', { skip }, () => {
  let stateDir;
  let s;
  const fresh = () => startStdio(stateDir, ['--warm-cells', '0']);
  // Runs `calls` (name -> python expression) in the cell; returns name -> errno name.
  const probe = (calls) => s.pyJson(`${kPySyscall}
print(json.dumps({${Object.entries(calls).map(([k, v]) => `${JSON.stringify(k)}: ${v}`).join(', ')}}))`);

  before(async () => {
    stateDir = hostTempDir('mcpcell-sec-priv-');
    s = await startStdio(stateDir, ['--warm-cells', '0']);
  });
  after(async () => {
    await s?.close();
    cleanup(stateDir);
  });

  it('no capability in any set, no_new_privs, a seccomp filter; init\'s bounding set is empty too', async () => {
    const r = await s.run('grep -E "^(Uid|Cap[A-Za-z]+|NoNewPrivs|Seccomp):" /proc/self/status; grep CapBnd /proc/1/status');
    const lines = r.stdout.trim().split('\n');
    for (const set of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) {
      assert.ok(lines.includes(`${set}:\t0000000000000000`), `${set} not empty: ${r.stdout}`);
    }
    assert.ok(lines.includes('NoNewPrivs:\t1'));
    assert.ok(lines.includes('Seccomp:\t2'));
    assert.match(lines[0], /^Uid:\t1000\t1000\t1000\t1000$/);
    assert.equal(lines[lines.length - 1], 'CapBnd:\t0000000000000000', 'cell init cannot hand out capabilities');
    const ids = await probe({
      setuid0: 'err(lambda: os.setuid(0))', setgid0: 'err(lambda: os.setgid(0))', chroot: "err(lambda: os.chroot('/tmp'))",
      kill_init: 'err(lambda: os.kill(1, 9))', stop_init: 'err(lambda: os.kill(1, 19))',
      init_state: "[l for l in open('/proc/1/status') if l.startswith('State:')][0].split()[1]",
    });
    // Under a root server init is another user (EPERM). In desktop mode there is one uid,
    // so 0 is not mapped (EINVAL) and the signal is accepted, but the kernel drops signals
    // that a pid namespace's init has no handler for when they come from inside it.
    assert.deepEqual(ids, isRoot
      ? { setuid0: 'EPERM', setgid0: 'EPERM', chroot: 'EPERM', kill_init: 'EPERM', stop_init: 'EPERM', init_state: 'S' }
      : { setuid0: 'EINVAL', setgid0: 'EINVAL', chroot: 'EPERM', kill_init: 'OK', stop_init: 'OK', init_state: 'S' });
    await assertHealthy(s, fresh);
  });

  // A descriptor cell init or the server left open would be a way around everything else
  // (the control socket, a cgroup fd opened with the server's credentials, a host
  // directory). A program starts with stdin, stdout and stderr, and nothing else.
  it('no inherited descriptors: a program starts with stdin, stdout and stderr only', async () => {
    const r = await s.pyJson(`${kPySyscall}
fds = {}
for fd in sorted(int(f) for f in os.listdir('/proc/self/fd')):
    try:
        fds[fd] = os.readlink(f'/proc/self/fd/{fd}')
    except OSError:
        pass
print(json.dumps({'fds': fds, 'cwd': os.getcwd()}))`);
    // The descriptor listdir used is closed again before the readlinks.
    assert.deepEqual(Object.keys(r.fds).map(Number), [0, 1, 2], JSON.stringify(r.fds));
    assert.match(r.fds[0], /^(pipe:|\/dev\/null$)/);
    assert.equal(r.cwd, '/workspace');
    await assertHealthy(s, fresh);
  });

  it('user namespace nesting and every other new namespace: EPERM (clone3: ENOSYS)', async () => {
    const r = await probe({
      newuser: `sc(${kSys.unshare}, 0x10000000)`,
      newns: `sc(${kSys.unshare}, 0x00020000)`,
      newnet: `sc(${kSys.unshare}, 0x40000000)`,
      newpid: `sc(${kSys.unshare}, 0x20000000)`,
      setns: `sc(${kSys.setns}, 0, 0)`,
      clone3: `sc(${kSys.clone3}, 0, 0)`,
    });
    assert.deepEqual(r, { newuser: 'EPERM', newns: 'EPERM', newnet: 'EPERM', newpid: 'EPERM', setns: 'EPERM', clone3: 'ENOSYS' });
    const tool = await s.run('unshare -Ur id -u; echo rc=$?', { allowError: true });
    assert.equal(tool.stdout, 'rc=1\n');
    assert.match(tool.stderr, /unshare failed: Operation not permitted/);
    await assertHealthy(s, fresh);
  });

  it('mount, the new mount API and pivot_root: EPERM', async () => {
    const r = await probe({
      mount: `sc(${kSys.mount}, 0, 0, 0, 0, 0)`,
      fsopen: `sc(${kSys.fsopen}, 0, 0)`,
      open_tree: `sc(${kSys.open_tree}, -100, 0, 0)`,
      pivot_root: `sc(${kSys.pivot_root}, 0, 0)`,
      open_by_handle_at: `sc(${kSys.open_by_handle_at}, -1, 0, 0)`,
    });
    assert.deepEqual(r, { mount: 'EPERM', fsopen: 'EPERM', open_tree: 'EPERM', pivot_root: 'EPERM', open_by_handle_at: 'EPERM' });
    await assertHealthy(s, fresh);
  });

  it('ptrace (attach to a sibling, traceme), process_vm_readv, pidfd_getfd: EPERM', async () => {
    const r = await s.pyJson(`${kPySyscall}
import subprocess
child = subprocess.Popen(['sleep', '30'])
out = {
  'attach': sc(${kSys.ptrace}, 16, child.pid, 0, 0),
  'seize': sc(${kSys.ptrace}, 0x4206, child.pid, 0, 0),
  'traceme': sc(${kSys.ptrace}, 0, 0, 0, 0),
  'process_vm_readv': sc(${kSys.process_vm_readv}, child.pid, 0, 0, 0, 0, 0),
  'pidfd_getfd': sc(${kSys.pidfd_getfd}, 0, 0, 0),
  'child_alive': child.poll() is None,
}
child.kill()
print(json.dumps(out))`);
    assert.deepEqual(r, { attach: 'EPERM', seize: 'EPERM', traceme: 'EPERM', process_vm_readv: 'EPERM', pidfd_getfd: 'EPERM', child_alive: true });
    await assertHealthy(s, fresh);
  });

  it('bpf, keyrings, io_uring, perf_event_open, userfaultfd: EPERM', async () => {
    const r = await probe({
      bpf: `sc(${kSys.bpf}, 0, 0, 0)`,
      keyctl: `sc(${kSys.keyctl}, 0, 0, 0, 0, 0)`,
      add_key: `sc(${kSys.add_key}, 0, 0, 0, 0, 0)`,
      io_uring_setup: `sc(${kSys.io_uring_setup}, 1, 0)`,
      perf_event_open: `sc(${kSys.perf_event_open}, 0, 0, -1, -1, 0)`,
      userfaultfd: `sc(${kSys.userfaultfd}, 0)`,
    });
    assert.deepEqual(r, { bpf: 'EPERM', keyctl: 'EPERM', add_key: 'EPERM', io_uring_setup: 'EPERM', perf_event_open: 'EPERM', userfaultfd: 'EPERM' });
    await assertHealthy(s, fresh);
  });

  it('kernel modules, kexec, the clock and the hostname: EPERM', async () => {
    const r = await probe({
      init_module: `sc(${kSys.init_module}, 0, 0, 0)`,
      finit_module: `sc(${kSys.finit_module}, -1, 0, 0)`,
      delete_module: `sc(${kSys.delete_module}, 0, 0)`,
      kexec_load: `sc(${kSys.kexec_load}, 0, 0, 0, 0)`,
      iopl: `sc(${kSys.iopl}, 3)`,
      syslog: `sc(${kSys.syslog}, 3, 0, 0)`,
      reboot: `sc(${kSys.reboot}, 0, 0, 0, 0)`,
      settimeofday: 'sc(164, 0, 0)',
      clock_settime: 'sc(227, 0, 0)',
      sethostname: "err(lambda: (_ for _ in ()).throw(OSError(ctypes.get_errno(), 'sethostname')) if libc.sethostname(b'evil', 4) != 0 else None)",
    });
    assert.deepEqual(r, { init_module: 'EPERM', finit_module: 'EPERM', delete_module: 'EPERM', kexec_load: 'EPERM', iopl: 'EPERM', syslog: 'EPERM', reboot: 'EPERM', settimeofday: 'EPERM', clock_settime: 'EPERM', sethostname: 'EPERM' });
    await assertHealthy(s, fresh);
  });

  // i386 getpid (20) through int 0x80, from a page of machine code python maps executable:
  // mov eax, 20; int 0x80; ret. The filter kills the whole process (SIGSYS).
  it('an i386 syscall (int 0x80) kills the process with SIGSYS', async () => {
    const r = await s.py(`import ctypes, mmap, sys
code = bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3])
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
fn = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
print('before', flush=True)
print('returned', fn(), flush=True)`, { allowError: true });
    assert.equal(r.stdout, 'before\n');
    assert.equal(r.signal, 'SIGSYS');
    assert.equal(r.exit_code, -1);
    await assertHealthy(s, fresh);
  });

  it('an x32 syscall (__X32_SYSCALL_BIT) kills the process with SIGSYS', async () => {
    const r = await s.py(`${kPySyscall}
print('before', flush=True)
print('returned', sc(0x40000000 | 39), flush=True)`, { allowError: true });
    assert.equal(r.stdout, 'before\n');
    assert.equal(r.signal, 'SIGSYS');
    await assertHealthy(s, fresh);
  });

  it('personality: ASLR off, READ_IMPLIES_EXEC and foreign personas refused; the query works', async () => {
    const r = await probe({
      addr_no_randomize: `sc(${kSys.personality}, 0x0040000)`,
      read_implies_exec: `sc(${kSys.personality}, 0x0400000)`,
      sunos: `sc(${kSys.personality}, 0x0006)`,
      query: `sc(${kSys.personality}, 0xffffffff)`,
      linux: `sc(${kSys.personality}, 0)`,
    });
    assert.deepEqual(r, { addr_no_randomize: 'EPERM', read_implies_exec: 'EPERM', sunos: 'EPERM', query: 'OK', linux: 'OK' });
    const setarch = await s.run('setarch -R true; echo rc=$?', { allowError: true });
    assert.equal(setarch.stdout, 'rc=1\n');
    assert.match(setarch.stderr, /Operation not permitted/);
    await assertHealthy(s, fresh);
  });

  it('TIOCSTI and TIOCLINUX on a terminal: EPERM; no controlling tty to reach', async () => {
    const r = await s.pyJson(`${kPySyscall}
import fcntl, termios, struct
master, slave = os.openpty()
out = {
  'tiocsti_master': err(lambda: fcntl.ioctl(master, termios.TIOCSTI, b'x')),
  'tiocsti_slave': err(lambda: fcntl.ioctl(slave, termios.TIOCSTI, b'x')),
  'tiocsti_high_bits': sc(16, slave, 0x100000000 | termios.TIOCSTI, 0),
  'tioclinux': err(lambda: fcntl.ioctl(slave, 0x541C, b'\\x06')),
  'dev_tty': err(lambda: os.open('/dev/tty', os.O_RDWR)),
  'winsize': err(lambda: fcntl.ioctl(slave, termios.TIOCGWINSZ, b'\\0' * 8)),
}
print(json.dumps(out))`);
    assert.deepEqual(r, { tiocsti_master: 'EPERM', tiocsti_slave: 'EPERM', tiocsti_high_bits: 'EPERM', tioclinux: 'EPERM', dev_tty: 'ENXIO', winsize: 'OK' });
    await assertHealthy(s, fresh);
  });

  // Only opened for writing, never written: if an open ever succeeded, nothing changed.
  it('/proc/sys is not writable', async () => {
    const r = await probe({
      core_pattern: "err(lambda: open('/proc/sys/kernel/core_pattern', 'w'))",
      hostname: "err(lambda: open('/proc/sys/kernel/hostname', 'w'))",
      drop_caches: "err(lambda: open('/proc/sys/vm/drop_caches', 'w'))",
      ip_forward: "err(lambda: open('/proc/sys/net/ipv4/ip_forward', 'w'))",
      sysrq: "err(lambda: open('/proc/sysrq-trigger', 'w'))",
    });
    // /proc/sysrq-trigger exists only on kernels built with magic SysRq.
    assert.ok(['EACCES', 'ENOENT'].includes(r.sysrq), `sysrq-trigger: ${r.sysrq}`);
    delete r.sysrq;
    assert.deepEqual(r, { core_pattern: 'EACCES', hostname: 'EACCES', drop_caches: 'EACCES', ip_forward: 'EACCES' });
    await assertHealthy(s, fresh);
  });

  it('no cgroup filesystem: nothing under /sys, mounting one is refused, the cell\'s cgroup is its namespace root', async () => {
    const r = await s.pyJson(`${kPySyscall}
libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
def mount_cgroup2():
    os.makedirs('/tmp/cg', exist_ok=True)
    if libc.mount(b'none', b'/tmp/cg', b'cgroup2', 0, None) != 0:
        raise OSError(ctypes.get_errno(), 'mount')
print(json.dumps({
  'sys_entries': os.listdir('/sys'),
  'procs': err(lambda: open('/sys/fs/cgroup/cgroup.procs', 'w')),
  'mount_cgroup2': err(mount_cgroup2),
  'cgroup_paths': sorted(set(l.split(':', 2)[2] for l in open('/proc/self/cgroup').read().split('\\n') if l)),
}))`);
    assert.deepEqual(r, { sys_entries: [], procs: 'ENOENT', mount_cgroup2: 'EPERM', cgroup_paths: ['/'] });
    await assertHealthy(s, fresh);
  });
});
