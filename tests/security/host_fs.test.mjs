// Escape probes, host filesystem: what an agent's code and the file tools try to reach
// outside the cell (host files, the server's own files and /proc entries, the template,
// symlink / hard link / ".." tricks, magic links, device nodes, setuid binaries, a
// read-only host mount and a persistent workspace). Each probe asserts the exact refusal,
// then that the session and a fresh session still work.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  assertHealthy, cleanup, hostTempDir, isRoot, kDecoy, kPySyscall, rssKiB, startStdio, text, writeDecoyFile,
} from './lib/sec.mjs';

// A refused file-tool call: isError, the syscall and errno named, nothing of the decoy.
function assertRefused(r, errnoName, what) {
  assert.equal(r.isError, true, `${what}: expected a refusal, got ${text(r)}`);
  assert.match(text(r), new RegExp(`\\): (${errnoName}) \\(`), `${what}: ${text(r)}`);
  assert.ok(!text(r).includes(kDecoy), `${what} leaked the decoy`);
}

describe('host filesystem (default policy, stdio)', () => {
  let dir;
  let stateDir;
  let decoyFile;
  let s;
  const fresh = () => startStdio(stateDir, ['--warm-cells', '0']);

  before(async () => {
    dir = hostTempDir('mcpcell-sec-fs-');
    stateDir = hostTempDir('mcpcell-sec-fs-state-');
    decoyFile = writeDecoyFile(dir);
    s = await startStdio(stateDir, ['--warm-cells', '0']);
  });
  after(async () => {
    await s?.close();
    cleanup(dir);
    cleanup(stateDir);
  });

  it('host files outside the template are not there: a decoy secret, the state dir, /root, /home', async () => {
    assertRefused(await s.call('read_file', { path: decoyFile }), 'ENOENT', 'read_file of the host decoy');
    assertRefused(await s.call('list_files', { path: stateDir }), 'ENOENT', 'list_files of the state dir');
    const code = await s.run(`cat ${decoyFile}; echo rc=$?; ls ${stateDir}; echo rc=$?; ls -A /home; ls -A /root; echo rc=$?`);
    assert.match(code.stderr, /cat: .*decoy-secret.txt: No such file or directory/);
    const home = await s.call('list_files', { path: '/home' });
    assert.deepEqual(home.structuredContent.entries, [], 'the cell\'s /home is empty');
    // The template's /root: 0700 and not the sandbox user's under a root server; in desktop
    // mode everything of the template maps to the one user, and it is empty.
    if (isRoot) {
      assert.equal(code.stdout, 'rc=1\nrc=2\nrc=2\n');
      assert.match(code.stderr, /ls: cannot open directory '\/root': Permission denied/);
      assertRefused(await s.call('list_files', { path: '/root' }), 'EACCES', 'list_files /root');
    } else {
      assert.equal(code.stdout, 'rc=1\nrc=2\nrc=0\n');
      assert.deepEqual((await s.call('list_files', { path: '/root' })).structuredContent.entries, []);
    }
    await assertHealthy(s, fresh);
  });

  it('/etc/shadow does not exist and /etc/passwd is the cell\'s own', async () => {
    assertRefused(await s.call('read_file', { path: '/etc/shadow' }), 'ENOENT', '/etc/shadow');
    const passwd = await s.call('read_file', { path: '/etc/passwd' });
    assert.match(passwd.structuredContent.content, /^sandbox:x:1000:1000:/m);
    assert.notEqual(passwd.structuredContent.content, readFileSync('/etc/passwd', 'utf8'));
    if (isRoot) {
      // The host's password hashes are nowhere in the cell's /etc.
      const hashes = readFileSync('/etc/shadow', 'utf8').split('\n').map((l) => l.split(':')[1] ?? '')
        .filter((h) => h.length > 8);
      for (const h of hashes.slice(0, 3)) {
        const grep = await s.run(`grep -rlF -- '${h.replace(/'/g, '')}' /etc; echo rc=$?`);
        assert.equal(grep.stdout, 'rc=1\n');
      }
    }
    await assertHealthy(s, fresh);
  });

  it('/proc/<server pid>/environ and /proc/1/root lead nowhere: other pid namespace, magic links refused', async () => {
    const pids = (await s.run('ls /proc | grep -E "^[0-9]+$"')).stdout.trim().split('\n').map(Number);
    const environ = await s.call('read_file', { path: `/proc/${s.pid}/environ` });
    if (!pids.includes(s.pid)) assertRefused(environ, 'ENOENT', 'the server pid\'s environ');
    assert.ok(!text(environ).includes(kDecoy));
    assertRefused(await s.call('read_file', { path: '/proc/1/root/etc/hostname' }), 'ELOOP', '/proc/1/root via read_file');
    assertRefused(await s.call('list_files', { path: '/proc/1/root' }), 'ELOOP', '/proc/1/root via list_files');
    const code = await s.run('cat /proc/1/root/etc/hostname; ls /proc/1/root/; cat /proc/1/environ; echo done', { allowError: true });
    assert.equal(code.stdout, 'done\n');
    assert.match(code.stderr, /cat: \/proc\/1\/root\/etc\/hostname: Permission denied/);
    assert.match(code.stderr, /cat: \/proc\/1\/environ: Permission denied/);
    await assertHealthy(s, fresh);
  });

  // The template (host /usr and the skeleton the server prepared) is the lower layer of
  // each cell's overlays; whatever a cell manages to write lands in its own upper layer.
  // /usr belongs to the host's root: EACCES in both modes. The rest of the skeleton is not
  // the sandbox user's under a root server (EACCES); in desktop mode it maps to the one
  // user, so such writes succeed, in that cell only. Either way a fresh cell and the host's
  // template see nothing.
  it('the template is read-only: /usr refuses writes, and nothing a cell writes reaches the template or another cell', async () => {
    assertRefused(await s.call('write_file', { path: '/usr/bin/evil', content: 'x' }), 'EACCES', 'write_file /usr/bin/evil');
    const rootWrite = await s.call('write_file', { path: '/evil', content: 'x' });
    const passwdEdit = await s.call('edit_file', { path: '/etc/passwd', old_text: 'sandbox:x:1000', new_text: 'sandbox:x:0' });
    if (isRoot) {
      assertRefused(rootWrite, 'EACCES', 'write_file /evil');
      assertRefused(passwdEdit, 'EACCES', 'edit_file /etc/passwd');
    } else {
      assert.equal(rootWrite.isError ?? false, false, text(rootWrite));
      assert.equal(passwdEdit.isError ?? false, false, text(passwdEdit));
    }
    const code = await s.pyJson(`${kPySyscall}
print(json.dumps({
  'usr_bin': err(lambda: open('/usr/bin/evil', 'w')),
  'python3': err(lambda: open('/usr/bin/python3', 'ab')),
  'chmod': err(lambda: os.chmod('/usr/bin/python3', 0o777)),
  'rename': err(lambda: os.rename('/usr/bin/python3', '/usr/bin/p')),
  'etc': err(lambda: open('/etc/hostname', 'a')),
  'root': err(lambda: os.mkdir('/evil-dir')),
}))`);
    const skeleton = isRoot ? 'EACCES' : 'OK';
    assert.deepEqual(code, { usr_bin: 'EACCES', python3: 'EACCES', chmod: 'EPERM', rename: 'EACCES', etc: skeleton, root: skeleton });
    const other = await fresh();
    try {
      const r = await other.run('ls -d /usr/bin/evil /evil /evil-dir 2>&1; grep -c "^sandbox:x:1000:" /etc/passwd', { allowError: true });
      assert.equal(r.stdout.match(/No such file or directory/g)?.length, 3, r.stdout);
      assert.match(r.stdout, /^1$/m, 'a fresh cell sees the template unchanged');
    } finally {
      await other.close();
    }
    const planted = [];
    const walk = (d) => {
      for (const e of readdirSync(d, { withFileTypes: true })) {
        if (/^evil/.test(e.name)) planted.push(path.join(d, e.name));
        if (e.isDirectory() && !e.isSymbolicLink()) walk(path.join(d, e.name));
      }
    };
    walk(path.join(stateDir, 'templates'));
    assert.deepEqual(planted, [], 'the host\'s template directory is unchanged');
    assert.ok(!existsSync('/usr/bin/evil') && !existsSync('/evil'), 'nothing reached the host');
    await assertHealthy(s, fresh);
  });

  it('symlinks, hard links and ".." through the file tools stay inside the cell', async () => {
    await s.run(`ln -s ${decoyFile} esc; ln -s ../../../../../.. up; ln -s /proc/1/root pr; ln -s /usr/bin/python3 py; ln -s /usr/lib/os-release osr`);
    assertRefused(await s.call('read_file', { path: 'esc' }), 'ENOENT', 'a symlink to the host decoy');
    const up = await s.call('read_file', { path: 'up/etc/hostname' });
    assert.match(up.structuredContent.content, /^cell-/, 'a symlink climbing out lands on the cell root');
    assertRefused(await s.call('read_file', { path: 'pr/etc/hostname' }), 'ELOOP', 'a symlink to /proc/1/root');
    assertRefused(await s.call('write_file', { path: 'py', content: 'x' }), 'EACCES', 'write_file through a symlink into the template');
    assertRefused(await s.call('edit_file', { path: 'osr', old_text: 'PRETTY_NAME=', new_text: 'PRETTY_NAME="evil" #' }), 'EACCES', 'edit_file through a symlink into the template');
    const listed = await s.call('list_files', { path: 'up' });
    assert.ok(listed.structuredContent.entries.some((e) => e.path === 'workspace'), 'list_files through a climbing link lists the cell\'s root');
    assert.ok(!listed.structuredContent.entries.some((e) => e.path === path.basename(dir)));
    // ".." is resolved inside the cell, as the sandboxed code's own open resolves it: it
    // climbs no higher than the cell's root, and a write lands where the code could write.
    const cellPasswd = (await s.run('cat /etc/passwd')).stdout;
    for (const p of ['../../../etc/passwd', '/workspace/../etc/passwd', '../../../../../../../../etc/passwd']) {
      const r = await s.call('read_file', { path: p });
      assert.equal(r.isError ?? false, false, `${p}: ${text(r)}`);
      assert.equal(r.structuredContent.content, cellPasswd, `${p} is the cell's /etc/passwd`);
    }
    assertRefused(await s.call('read_file', { path: `../../../..${decoyFile}` }), 'ENOENT', 'the host decoy by ..');
    // A write by ".." to the cell's root succeeds exactly when the code's own write does
    // (its root is the user's in a cell without privilege), and lands in the cell.
    const byCode = await s.run('echo x > /escape-by-code && echo wrote || true');
    const byTool = await s.call('write_file', { path: '../escape', content: 'x' });
    assert.equal(byTool.isError ?? false, byCode.stdout !== 'wrote\n', `write_file: ${text(byTool)}; the code: ${byCode.text}`);
    if (!byTool.isError) assert.equal((await s.run('cat /escape')).stdout, 'x');
    assert.ok(!existsSync('/escape') && !existsSync('/escape-by-code'), 'a write at the cell root reached the host root');
    assertRefused(await s.call('read_file', { path: 'missing/../../etc/passwd' }), 'ENOENT', '.. after a directory that is not there');
    const links = await s.pyJson(`${kPySyscall}
print(json.dumps({
  'ws': err(lambda: os.link('/usr/bin/python3', '/workspace/hl')),
  'tmp': err(lambda: os.link('/etc/passwd', '/tmp/hl')),
  'host_decoy': err(lambda: os.link(${JSON.stringify(decoyFile)}, '/workspace/hl2')),
  'escape_read': err(lambda: open('/workspace/up/../../..${decoyFile}').read()),
}))`);
    assert.deepEqual(links, { ws: 'EXDEV', tmp: 'EXDEV', host_decoy: 'ENOENT', escape_read: 'ENOENT' });
    const py = await s.run('python3 -c "print(1)"');
    assert.equal(py.stdout, '1\n', 'python3 in the template is intact');
    await assertHealthy(s, fresh);
  });

  it('magic links of other processes (/proc/<pid>/root, /proc/<pid>/fd) are refused', async () => {
    const bg = await s.run('sleep 120 >/dev/null 2>&1 & echo $!');
    const pid = Number(bg.stdout.trim());
    assert.ok(pid > 1);
    for (const p of [`/proc/${pid}/root/etc/hostname`, `/proc/${pid}/cwd/x`, `/proc/${pid}/fd/0`, '/proc/self/fd/0', '/proc/thread-self/root/etc/hostname']) {
      assertRefused(await s.call('read_file', { path: p }), 'ELOOP', p);
    }
    // write_file makes missing parents: the walk stops at the magic link, which it does not
    // take for a directory.
    const w = await s.call('write_file', { path: `/proc/${pid}/root/tmp/x`, content: 'x' });
    assertRefused(w, 'ENOTDIR', 'write through /proc/<pid>/root');
    assert.match(text(w), new RegExp(`mkdirat\\("/proc/${pid}/root"\\)`));
    const code = await s.run('ls /proc/1/fd 2>&1; readlink /proc/1/exe 2>&1; echo done', { allowError: true });
    assert.match(code.stdout, /ls: cannot open directory '\/proc\/1\/fd': Permission denied/);
    assert.match(code.stdout, /^done$/m);
    assert.doesNotMatch(code.stdout, /mcpcell-init/, 'the path of cell init on the host stays hidden');
    await s.run(`kill ${pid}`);
    await assertHealthy(s, fresh);
  });

  // The file tools run in cell init (pid 1), with the sandbox user's fsuid and no effective
  // capabilities. The kernel lets a process read its own /proc entries whatever its ids,
  // so without a check of their own the tools would show what the sandboxed code cannot:
  // init's memory map (the host path of mcpcell-init, its address layout), its descriptors.
  it('cell init\'s own /proc entries are out of the file tools\' reach, as they are out of the code\'s', async () => {
    const code = await s.run('cat /proc/1/maps 2>&1; ls /proc/1/fd 2>&1; ls /proc/1/map_files 2>&1; true');
    assert.match(code.stdout, /cat: \/proc\/1\/maps: Permission denied/);
    for (const p of ['/proc/1/maps', '/proc/self/maps', '/proc/thread-self/maps', '/proc/1/fdinfo/0', '/proc/1/task/1/maps', '/proc/1/mountinfo']) {
      assertRefused(await s.call('read_file', { path: p }), 'EACCES', `read_file ${p}`);
    }
    for (const p of ['/proc/1/fd', '/proc/self/fd', '/proc/1/map_files', '/proc/1']) {
      assertRefused(await s.call('list_files', { path: p }), 'EACCES', `list_files ${p}`);
    }
    // write_file first makes sure the parent directory is there: init's /proc/1 (also as
    // /proc/self) cannot be opened, so the write stops at its parent.
    for (const [p, parent] of [['/proc/1/attr/current', '/proc/1'], ['/proc/1/timerslack_ns', '/proc/1'], ['/proc/self/comm', '/proc/self']]) {
      const w = await s.call('write_file', { path: p, content: '1' });
      assertRefused(w, 'ENOTDIR', `write_file ${p}`);
      assert.match(text(w), new RegExp(`mkdirat\\("${parent}"\\)`));
    }
    // A recursive listing of /proc does not descend into init's entries.
    const procs = await s.call('list_files', { path: '/proc', recursive: true, max_entries: 5000 });
    assert.ok(procs.structuredContent.entries.some((e) => e.path === '1'), 'init\'s directory is listed');
    assert.deepEqual(procs.structuredContent.entries.filter((e) => e.path.startsWith('1/') || e.path.startsWith('self/')), []);
    // The code's own /proc entries stay readable through the tools (they are the user's).
    const bg = await s.run('sleep 60 >/dev/null 2>&1 & echo $!');
    const own = await s.call('read_file', { path: `/proc/${bg.stdout.trim()}/status` });
    assert.equal(own.isError ?? false, false, text(own));
    assert.match(own.structuredContent.content, /^Name:\s+sleep$/m);
    await s.run(`kill ${bg.stdout.trim()}`);
    await assertHealthy(s, fresh);
  });

  // Files that would block or flood the server if the file tools trusted them: a FIFO with
  // no writer, endless devices, a 1 GB sparse file. Each answer comes at once and bounded.
  it('hostile files for the file tools: FIFOs and devices refused, a 1 GB sparse file bounded, quickly', async () => {
    await s.run('mkfifo fifo; truncate -s 1000M big.txt; printf x >> big.txt');
    const before = rssKiB(s.pid);
    const cases = [
      ['read_file', { path: 'fifo' }, /^read_file fifo: not a regular file/],
      ['write_file', { path: 'fifo', content: 'x' }, /openat2\("\/workspace\/fifo"\): ENXIO/],
      ['edit_file', { path: 'fifo', old_text: 'a', new_text: 'b' }, /fifo is not a regular file/],
      ['read_file', { path: '/dev/zero' }, /^read_file \/dev\/zero: not a regular file/],
      ['read_file', { path: '/dev/urandom', encoding: 'base64' }, /not a regular file/],
      ['edit_file', { path: 'big.txt', old_text: 'x', new_text: 'y' }, /file is 1048576001 bytes, over the limit/],
      ['read_file', { path: 'big.txt' }, /binary file \(1048576001 bytes\)/],
    ];
    for (const [tool, args, expected] of cases) {
      const t0 = performance.now();
      const r = await s.call(tool, args);
      const ms = performance.now() - t0;
      assert.equal(r.isError, true, `${tool} ${JSON.stringify(args)}: ${text(r)}`);
      assert.match(text(r), expected);
      assert.ok(ms < 5000, `${tool} ${args.path} took ${ms.toFixed(0)} ms`);
    }
    const window = await s.call('read_file', { path: 'big.txt', encoding: 'base64', offset: 1048576000 });
    assert.equal(Buffer.from(window.structuredContent.content, 'base64').toString(), 'x');
    assert.ok(rssKiB(s.pid) - before < 64 * 1024, 'the server did not take the big file into memory');
    await s.run('rm fifo big.txt');
    await assertHealthy(s, fresh);
  });

  it('device nodes cannot be made (mknod: EPERM); a FIFO can', async () => {
    const r = await s.pyJson(`${kPySyscall}
import stat
print(json.dumps({
  'chr_ws': err(lambda: os.mknod('/workspace/null2', stat.S_IFCHR | 0o666, os.makedev(1, 3))),
  'blk_tmp': err(lambda: os.mknod('/tmp/sda', stat.S_IFBLK | 0o666, os.makedev(8, 0))),
  'mem_shm': err(lambda: os.mknod('/dev/shm/mem', stat.S_IFCHR | 0o666, os.makedev(1, 1))),
  'fifo': err(lambda: os.mkfifo('/workspace/fifo')),
}))`);
    assert.deepEqual(r, { chr_ws: 'EPERM', blk_tmp: 'EPERM', mem_shm: 'EPERM', fifo: 'OK' });
    await assertHealthy(s, fresh);
  });

  it('setuid binaries of the template gain nothing (nosuid mounts, no_new_privs)', async () => {
    const r = await s.run('stat -c "%a %U %n" /usr/bin/mount /usr/bin/su /usr/bin/passwd; grep NoNewPrivs /proc/self/status; mount -t tmpfs none /tmp; echo mount=$?; su -c "id -u" root </dev/null; echo su=$?', { allowError: true });
    const setuid = r.stdout.split('\n').filter((l) => /^4755 /.test(l));
    assert.ok(setuid.length >= 1, `the template has setuid binaries to try: ${r.stdout}`);
    assert.match(r.stdout, /^NoNewPrivs:\s+1$/m);
    assert.match(r.stdout, /^mount=32$/m);
    assert.match(r.stderr, /mount: \/tmp: must be superuser to use mount/);
    assert.doesNotMatch(r.stdout, /^0$/m, 'su ran a command as uid 0');
    assert.doesNotMatch(r.stdout, /^su=0$/m);
    await assertHealthy(s, fresh);
  });
});

describe('a read-only host mount and a persistent workspace', () => {
  let dir;
  let stateDir;
  let decoyFile;
  let roDir;
  let wsDir;

  before(() => {
    dir = hostTempDir('mcpcell-sec-mounts-');
    stateDir = hostTempDir('mcpcell-sec-mounts-state-');
    decoyFile = writeDecoyFile(dir);
    roDir = path.join(dir, 'project');
    mkdirSync(roDir, { mode: 0o755 });
    writeFileSync(path.join(roDir, 'a.txt'), 'project file\n', { mode: 0o644 });
    // Links the host's owner made in the mounted directory: the cell resolves them in its
    // own root, never the host's.
    symlinkSync(decoyFile, path.join(roDir, 'secret'));
    symlinkSync('../../../../..', path.join(roDir, 'up'));
    wsDir = path.join(dir, 'ws');
  });
  after(() => {
    cleanup(dir);
    cleanup(stateDir);
  });

  it('a read-only mount stays read-only (EROFS, remount EPERM), and host symlinks in it reach nothing', async () => {
    const s = await startStdio(stateDir, ['--warm-cells', '0', '--mount', `${roDir}:/workspace/project:ro`]);
    try {
      assertRefused(await s.call('write_file', { path: 'project/new', content: 'x' }), 'EROFS', 'write_file into the ro mount');
      assertRefused(await s.call('edit_file', { path: 'project/a.txt', old_text: 'project', new_text: 'evil' }), 'EROFS', 'edit_file in the ro mount');
      assertRefused(await s.call('read_file', { path: 'project/secret' }), 'ENOENT', 'a host symlink to the decoy');
      const up = await s.call('read_file', { path: 'project/up/etc/hostname' });
      assert.match(up.structuredContent.content, /^cell-/);
      const r = await s.pyJson(`${kPySyscall}
libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
def remount():
    if libc.mount(b'none', b'/workspace/project', None, 0x20 | 0x1000, None) != 0:
        raise OSError(ctypes.get_errno(), 'mount')
print(json.dumps({
  'create': err(lambda: open('/workspace/project/new', 'w')),
  'append': err(lambda: open('/workspace/project/a.txt', 'a')),
  'unlink': err(lambda: os.unlink('/workspace/project/a.txt')),
  'chmod': err(lambda: os.chmod('/workspace/project/a.txt', 0o777)),
  'remount_rw': err(remount),
  'umount': err(lambda: (_ for _ in ()).throw(OSError(ctypes.get_errno(), 'umount')) if libc.umount2(b'/workspace/project', 2) != 0 else None),
  'secret': err(lambda: open('/workspace/project/secret').read()),
}))`);
      // The host's file is not the sandbox user's under a root server (its owner maps to
      // nobody): EACCES comes first. In desktop mode it is, and the mount says EROFS.
      assert.deepEqual(r, { create: 'EROFS', append: isRoot ? 'EACCES' : 'EROFS', unlink: 'EROFS', chmod: 'EROFS', remount_rw: 'EPERM', umount: 'EPERM', secret: 'ENOENT' });
      assert.deepEqual(readdirSync(roDir).sort(), ['a.txt', 'secret', 'up']);
      assert.equal(readFileSync(path.join(roDir, 'a.txt'), 'utf8'), 'project file\n');
      await assertHealthy(s, () => startStdio(stateDir, ['--warm-cells', '0', '--mount', `${roDir}:/workspace/project:ro`]));
    } finally {
      await s.close();
    }
  });

  it('a persistent workspace: links and setuid files a cell plants there act on nothing of the host', async () => {
    const before = statSync(decoyFile);
    const etcBefore = statSync('/etc');
    const s = await startStdio(stateDir, ['--workspace', wsDir]);
    try {
      await s.run(`ln -s ${decoyFile} decoy-link; ln -s /etc etc-link; mkdir d; ln -s ${dir} d/dir-link; cp /bin/sh sh; chmod 4755 sh; echo data > f; ln f f-hard; ls`);
    } finally {
      await s.close();
    }
    // A fresh cell on the same workspace re-owns what the last one made (root server):
    // symlinks themselves, never their targets.
    const s2 = await startStdio(stateDir, ['--workspace', wsDir]);
    try {
      const r = await s2.run('cat f; ls -l decoy-link | cut -c1; cat decoy-link 2>&1; stat -c %U f', { allowError: true });
      assert.match(r.stdout, /^data\nl\ncat: decoy-link: No such file or directory\nsandbox\n$/);
      await assertHealthy(s2, () => startStdio(stateDir, ['--workspace', wsDir]));
    } finally {
      await s2.close();
    }
    const afterDecoy = statSync(decoyFile);
    assert.deepEqual([afterDecoy.uid, afterDecoy.gid, afterDecoy.mode], [before.uid, before.gid, before.mode], 'the decoy\'s owner and mode are untouched');
    const etcAfter = statSync('/etc');
    assert.deepEqual([etcAfter.uid, etcAfter.gid, etcAfter.mode], [etcBefore.uid, etcBefore.gid, etcBefore.mode]);
    const dirStat = statSync(dir);
    assert.equal(dirStat.uid, process.getuid(), 'the test directory behind a planted link keeps its owner');
    // The cell may set the setuid bit on its own copy; re-owning the workspace for a cell
    // with another host uid range clears it (chown does), so whether it is still set depends
    // on which range the second cell got. Either way the file is never root's.
    const sh = statSync(path.join(wsDir, 'sh'));
    if (isRoot) assert.notEqual(sh.uid, 0, 'the file belongs to the cell\'s host uid, never root');
    else assert.equal(sh.uid, process.getuid());
  });

  // Cut output is saved by cell init under /workspace/.mcpcell, which a cell can replace
  // with a link; in a persistent workspace that link also exists on the host, where an
  // absolute target would mean a host directory. The save resolves it inside the cell.
  it('a persistent workspace: a planted .mcpcell link does not send saved output to the host', async () => {
    const ws3 = path.join(dir, 'ws3');
    const target = path.join(dir, 'output-target');
    mkdirSync(target, { mode: 0o777 });
    const s = await startStdio(stateDir, ['--workspace', ws3]);
    try {
      await s.run(`ln -s ${target} .mcpcell`);
      const r = await s.run('head -c 300000 /dev/zero | tr "\\0" a');
      assert.equal(r.stdout_truncated, true);
      assert.equal(r.full_stdout_path, '', 'the output could not be saved through the link');
      assert.deepEqual(readdirSync(target), [], 'nothing was written to the host directory');
      await assertHealthy(s, () => startStdio(stateDir, ['--warm-cells', '0']));
    } finally {
      await s.close();
    }
  });

  it('a persistent workspace: a symlink planted where a mount point goes is refused at the next cell', async () => {
    const ws2 = path.join(dir, 'ws2');
    const s = await startStdio(stateDir, ['--workspace', ws2]);
    try {
      await s.run('ln -s /etc project; ln -s /usr sub');
    } finally {
      await s.close();
    }
    for (const target of ['/workspace/project', '/workspace/sub/deeper']) {
      const s2 = await startStdio(stateDir, ['--workspace', ws2, '--mount', `${roDir}:${target}:ro`]);
      try {
        const r = await s2.call('run_command', { command: 'true' });
        assert.equal(r.isError, true, `${target}: ${text(r)}`);
        assert.match(text(r), /mount point .*\/workspace\/(project|sub) is a symlink/);
      } finally {
        await s2.close();
      }
    }
    assert.deepEqual(readdirSync(path.join(ws2)).sort(), ['project', 'sub']);
    assert.ok(!existsSync('/etc/a.txt') && !existsSync('/usr/deeper'), 'nothing was mounted or made on the host');
  });
});
