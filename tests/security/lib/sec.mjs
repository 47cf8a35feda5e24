// Shared harness of the escape-probe suite: real `mcpcell serve` processes (stdio, and
// Streamable HTTP where a probe needs two sessions of one server) with a decoy secret in
// their environment and a decoy secret file on the host, the SDK client from tests/e2e, and
// the checks every probe ends with: the attack's call answered, the same session still
// works, and a fresh session works.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { binary, Client, connect } from '../../e2e/lib/harness.mjs';
import { StreamableHTTPClientTransport } from '../../e2e/test/http_util.mjs';

export const isRoot = process.getuid() === 0;

// The decoys: a value no cell may ever see. It is in every server's environment (and this
// process's), in a file in the test's temporary directory on the host, and in the HTTP
// config the HTTP servers read.
export const kDecoy = `mcpcell-sec-decoy-${randomBytes(12).toString('hex')}`;
export const kDecoyVar = 'MCPCELL_SEC_DECOY';
process.env[kDecoyVar] = kDecoy;

// A temporary directory of the test on the host, world-searchable so that cells' users
// could reach it if anything let them (the point is that nothing does).
export function hostTempDir(prefix) {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  chmodSync(dir, 0o755);
  return dir;
}

export function text(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

export function rssKiB(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
}

// A session: `call(name, args)` and the shortcuts the probes use.
class Session {
  constructor(client, { pid, close, stderr }) {
    this.client = client;
    this.pid = pid;
    this.closeFn = close;
    this.stderr = stderr ?? (() => '');
  }

  call(name, args = {}, options = {}) {
    return this.client.callTool({ name, arguments: args }, undefined, { timeout: 180000, ...options });
  }

  // run_command; asserts the call itself succeeded as a tool call (not isError) unless
  // `allowError`, and returns structuredContent.
  async run(command, { allowError = false, ...args } = {}) {
    const r = await this.call('run_command', { command, ...args });
    if (!allowError) assert.equal(r.isError ?? false, false, `run_command ${command}: ${text(r)}`);
    return { ...r.structuredContent, text: text(r), isError: r.isError ?? false };
  }

  async py(code, { allowError = false, ...args } = {}) {
    const r = await this.call('run_code', { language: 'python', code, ...args });
    if (!allowError) assert.equal(r.isError ?? false, false, `run_code: ${text(r)}`);
    return { ...r.structuredContent, text: text(r), isError: r.isError ?? false };
  }

  // A python probe that prints one JSON object on its last line; returns it.
  async pyJson(code, args = {}) {
    const r = await this.py(code, args);
    const lines = r.stdout.trim().split('\n');
    try {
      return JSON.parse(lines[lines.length - 1]);
    } catch {
      throw new Error(`probe printed no JSON: stdout ${r.stdout} stderr ${r.stderr}`);
    }
  }

  async close() {
    await this.closeFn();
  }
}

// `mcpcell serve` over stdio with the decoy in its environment. `args` are extra serve
// arguments. Each stdio server is one MCP session.
export async function startStdio(stateDir, args = []) {
  const s = await connect({
    binaryName: 'mcpcell',
    args: ['serve', '--state-dir', stateDir, ...args],
    env: { ...process.env, [kDecoyVar]: kDecoy },
  });
  return new Session(s.client, { pid: s.transport.pid, close: s.close, stderr: s.stderr });
}

// `mcpcell serve --http 127.0.0.1:0` with the decoy in its environment; resolves once it
// printed its URL. `session()` opens a new MCP session on it.
export async function startHttp(stateDir, args = []) {
  const proc = spawn(binary('mcpcell'), ['serve', '--http', '127.0.0.1:0', '--state-dir', stateDir,
    ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, [kDecoyVar]: kDecoy } });
  let stderr = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve --http printed no URL in 30 s:\n${stderr}`)), 30000);
    proc.stderr.on('data', (chunk) => {
      stderr += chunk.toString();
      const m = /(http:\/\/[^\s]+\/mcp)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`serve --http exited (${code}) before listening:\n${stderr}`));
    });
  });
  return {
    pid: proc.pid,
    url,
    stderr: () => stderr,
    async session() {
      const transport = new StreamableHTTPClientTransport(new URL(url));
      const client = new Client({ name: 'mcpcell-sec', version: '0.0.0' }, { capabilities: {} });
      await client.connect(transport);
      return new Session(client, {
        pid: proc.pid,
        close: async () => {
          await transport.terminateSession().catch(() => {});
          await client.close();
        },
      });
    },
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      proc.kill('SIGTERM');
      return new Promise((r) => proc.on('exit', (code) => r(code)));
    },
  };
}

// The end of every probe: the session that attacked still answers, and a fresh session
// (`fresh`: async () => Session, closed here) gets a working cell.
export async function assertHealthy(session, fresh) {
  const same = await session.run('echo healthy-$((6*7))');
  assert.equal(same.stdout, 'healthy-42\n', 'the attacking session still works');
  if (fresh) {
    const other = await fresh();
    try {
      const r = await other.run('echo fresh-$((6*7)); test -w /workspace && echo ws-ok');
      assert.equal(r.stdout, 'fresh-42\nws-ok\n', 'a fresh session works');
    } finally {
      await other.close();
    }
  }
}

// The python prelude of raw-syscall probes: sc(nr, *args) -> "OK" or the errno name.
export const kPySyscall = `
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return 'OK' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
def err(fn):
    try:
        fn()
        return 'OK'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
`;

// x86_64 syscall numbers the probes call directly.
export const kSys = {
  ptrace: 101, syslog: 103, personality: 135, pivot_root: 155, acct: 163, mount: 165,
  swapon: 167, reboot: 169, iopl: 172, ioperm: 173, init_module: 175, delete_module: 176,
  kexec_load: 246, add_key: 248, keyctl: 250, unshare: 272, perf_event_open: 298,
  open_by_handle_at: 304, setns: 308, process_vm_readv: 310, finit_module: 313, bpf: 321,
  userfaultfd: 323, io_uring_setup: 425, open_tree: 428, fsopen: 430, clone3: 435,
  pidfd_getfd: 438,
};

export function writeDecoyFile(dir) {
  const file = path.join(dir, 'decoy-secret.txt');
  writeFileSync(file, `${kDecoy}\n`, { mode: 0o644 });
  return file;
}

export function cleanup(dir) {
  rmSync(dir, { recursive: true, force: true });
}
