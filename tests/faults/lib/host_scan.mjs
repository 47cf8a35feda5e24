// What the fault tests look at on the host: the cells in a server's state dir (cell init's
// pid, its namespaces and cgroups), every process and open fd that is in or holds one of a
// set of namespaces, cgroup directories, mounts, and the bytes of a directory tree. Reads
// /proc and /sys only; never signals or changes anything.

import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';

const kNamespaces = ['pid', 'mnt', 'net', 'ipc', 'uts', 'user'];

function tryRead(file) {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

function tryReadlink(file) {
  try {
    return readlinkSync(file);
  } catch {
    return null;
  }
}

function statFields(pid) {
  const stat = tryRead(`/proc/${pid}/stat`);
  return stat ? stat.slice(stat.lastIndexOf(')') + 2).split(' ') : null;
}

// Field 22 of /proc/<pid>/stat (start time, clock ticks since boot), or null.
export function startTicks(pid) {
  const fields = statFields(pid);
  return fields ? Number(fields[19]) : null;
}

// Field 3 of /proc/<pid>/stat ("R", "S", "Z", ...), or null.
export function procState(pid) {
  const fields = statFields(pid);
  return fields ? fields[0] : null;
}

// Clock ticks since boot now (USER_HZ is 100 on Linux).
export function nowTicks() {
  return Math.floor(Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 100);
}

export function pids() {
  return readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number);
}

// "net:[4026532000]" -> {type: 'net', inode: '4026532000'}
function parseNsLink(link) {
  const m = /^(\w+):\[(\d+)\]$/.exec(link ?? '');
  return m ? { type: m[1], inode: m[2] } : null;
}

export function namespacesOf(pid) {
  const out = {};
  for (const type of kNamespaces) {
    const ns = parseNsLink(tryReadlink(`/proc/${pid}/ns/${type}`));
    if (ns) out[type] = ns.inode;
  }
  return out;
}

// The cgroup directories of a process on the host (v1: one per hierarchy; v2: the unified
// one), resolved through the cgroup mounts in /proc/self/mountinfo.
export function cgroupDirsOf(pid) {
  const text = tryRead(`/proc/${pid}/cgroup`);
  if (!text) return [];
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((l) => {
    const [pre, post] = l.split(' - ');
    if (!post) return null;
    const [fstype, , superOpts] = post.split(' ');
    return { mountPoint: pre.split(' ')[4], root: pre.split(' ')[3], fstype, superOpts };
  }).filter((m) => m && (m.fstype === 'cgroup' || m.fstype === 'cgroup2'));
  const dirs = [];
  for (const line of text.trim().split('\n')) {
    const [id, controllers, cgPath] = [line.split(':')[0], line.split(':')[1],
      line.split(':').slice(2).join(':')];
    let mount;
    if (id === '0' && controllers === '') {
      mount = mounts.find((m) => m.fstype === 'cgroup2');
    } else {
      const wanted = controllers.split(',');
      mount = mounts.find((m) => m.fstype === 'cgroup' && m.root === '/' &&
        wanted.every((c) => m.superOpts.split(',').includes(c)));
    }
    if (mount) dirs.push(path.join(mount.mountPoint, cgPath));
  }
  return dirs;
}

// Every cell in <stateDir>/cells: {id, dir, initPid, initStart, ns, cgroups}. ns and
// cgroups are empty when init is no longer running.
export function cellsOf(stateDir) {
  const cells = path.join(stateDir, 'cells');
  if (!existsSync(cells)) return [];
  return readdirSync(cells).map((id) => {
    const dir = path.join(cells, id);
    const [pid, start] = (tryRead(path.join(dir, 'init')) ?? '').trim().split(' ');
    const initPid = Number(pid);
    const alive = initPid > 1 && String(startTicks(initPid)) === start;
    return {
      id, dir, initPid, initStart: start,
      ns: alive ? namespacesOf(initPid) : {},
      cgroups: alive ? cgroupDirsOf(initPid).filter((d) => d.includes(`/mcpcell/${id}`)) : [],
    };
  });
}

// Processes (pid, comm, start, state, ns) that are members of any namespace in `inodes` (a Set of
// inode strings), or whose cgroup path names one of `cellIds`.
export function processesIn(inodes, cellIds = []) {
  const found = [];
  for (const pid of pids()) {
    const ns = namespacesOf(pid);
    const hit = Object.entries(ns).find(([, inode]) => inodes.has(inode));
    const cg = tryRead(`/proc/${pid}/cgroup`) ?? '';
    const cgHit = cellIds.find((id) => cg.includes(`/mcpcell/${id}\n`) || cg.endsWith(`/mcpcell/${id}`));
    if (hit || cgHit) {
      found.push({ pid, comm: (tryRead(`/proc/${pid}/comm`) ?? '').trim(), start: startTicks(pid),
        state: procState(pid), ns, why: hit ? `${hit[0]} namespace ${hit[1]}` : `cgroup of cell ${cgHit}` });
    }
  }
  return found;
}

// Open fds (of any process) that refer to a namespace in `inodes`.
export function namespaceFdHolders(inodes) {
  const found = [];
  for (const pid of pids()) {
    let fds;
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      const ns = parseNsLink(tryReadlink(`/proc/${pid}/fd/${fd}`));
      if (ns && inodes.has(ns.inode)) found.push({ pid, fd, ns, start: startTicks(pid) });
    }
  }
  return found;
}

// Lines of /proc/self/mountinfo that mount something under `dir`, or bind an nsfs file of
// a namespace in `inodes`.
export function mountsOf(dir, inodes) {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => {
    const f = l.split(' ');
    if (f.length < 5) return false;
    if (f[4] === dir || f[4].startsWith(dir + '/')) return true;
    const ns = parseNsLink(f[3].replace(/^\//, ''));
    return ns !== null && inodes.has(ns.inode);
  });
}

// Every entry under `root` (relative path -> "dir" / "link:<target>" / "<mode> <size>
// <sha256>"), symlinks not followed.
export function treeDigest(root) {
  const out = {};
  const walk = (rel) => {
    for (const name of readdirSync(path.join(root, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const abs = path.join(root, r);
      const st = lstatSync(abs);
      if (st.isDirectory()) {
        out[r] = `dir ${(st.mode & 0o7777).toString(8)}`;
        walk(r);
      } else if (st.isSymbolicLink()) {
        out[r] = `link:${readlinkSync(abs)}`;
      } else {
        const sha = createHash('sha256').update(readFileSync(abs)).digest('hex');
        out[r] = `${(st.mode & 0o7777).toString(8)} ${st.size} ${sha}`;
      }
    }
  };
  walk('');
  return out;
}
