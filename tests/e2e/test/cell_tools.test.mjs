// The sandbox tools of `mcpcell serve`, driven over stdio by the official MCP TypeScript SDK
// client: every tool, bad inputs, path escapes, floods, timeouts, cancellation, progress,
// concurrency, idle and lifetime expiry, and two sessions that cannot see each other. Each
// call runs in a real cell.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { connect, waitFor } from '../lib/harness.mjs';

// The default policy's toolset is "core": no snapshot_* or archive tools (toolset "full").
const kTools = ['run_code', 'run_command', 'python', 'process', 'read_file', 'write_file',
  'edit_file', 'list_files', 'session_info'];
const kFullOnly = ['snapshot_create', 'snapshot_list', 'snapshot_restore', 'snapshot_delete',
  'upload_archive', 'download_archive'];

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// A /proc/<pid>/status field in KiB: VmRSS (resident now) or VmHWM (peak resident).
function statusKiB(pid, field) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)[1]);
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// The host pid of a cell's init, from the record the server keeps ("<pid> <start time>").
function cellInitPid(stateDir, cellId) {
  return Number(readFileSync(path.join(stateDir, 'cells', cellId, 'init'), 'utf8').split(' ')[0]);
}

// Starts `mcpcell serve` and lists the tools once: the SDK checks a result's structuredContent
// against the tool's outputSchema only for tools it has listed, so with this every call in
// this file also checks that the server's results match the schemas it publishes.
async function startServer(stateDir, extra = []) {
  const s = await connect({ binaryName: 'mcpcell', args: ['serve', '--state-dir', stateDir, ...extra] });
  try {
    await s.client.listTools();
  } catch (e) {
    await s.close();
    throw e;
  }
  return s;
}

// A server of its own for one test, in a state dir of its own: fn(s, stateDir). Both are
// gone afterwards, also when the test fails.
async function withServer(extra, fn) {
  const stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-e2e-'));
  try {
    const s = await startServer(stateDir, extra);
    try {
      return await fn(s, stateDir);
    } finally {
      await s.close();
    }
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
}

// Limits and times of the main session below, each unlike the default policy's, so that
// session_info showing them proves the flags reach the cell and the report.
const kMain = { memoryMiB: 768, pids: 200, cpuMillicores: 1500, idleS: 1200, lifetimeS: 7200,
  defaultTimeoutS: 90, maxTimeoutS: 900 };

describe('mcpcell tools over stdio', () => {
  let stateDir;
  let s;  // the session under test
  let startedAt;  // before the server started: the session cannot be older than this
  const call = (name, args, options) => s.client.callTool({ name, arguments: args }, undefined, options);

  before(async () => {
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-e2e-'));
    startedAt = Date.now();
    s = await startServer(stateDir, [
      '--memory-mib', String(kMain.memoryMiB), '--pids', String(kMain.pids),
      '--cpu-millicores', String(kMain.cpuMillicores), '--idle-timeout', String(kMain.idleS),
      '--max-lifetime', String(kMain.lifetimeS), '--default-timeout', String(kMain.defaultTimeoutS),
      '--max-timeout', String(kMain.maxTimeoutS)]);
  });
  after(async () => {
    await s?.close();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('lists every tool with schemas and the right annotations', async () => {
    const { tools } = await s.client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    for (const name of kTools) {
      assert.ok(byName[name], `missing ${name}`);
      assert.equal(byName[name].inputSchema.type, 'object');
      assert.ok(byName[name].outputSchema, `${name} has no outputSchema`);
    }
    for (const name of ['read_file', 'list_files', 'session_info'])
      assert.equal(byName[name].annotations.readOnlyHint, true, name);
    for (const name of ['run_command', 'run_code', 'write_file', 'edit_file'])
      assert.equal(byName[name].annotations.destructiveHint, true, name);
  });

  it('under the default policy tools/list leaves out pip_install and npm_install; a call by name is refused; session_info says why', async () => {
    const { tools } = await s.client.listTools();
    const names = tools.map((t) => t.name);
    assert.deepEqual(names, kTools, 'packages.mode = "disabled": the package tools are not offered');
    for (const tool of ['pip_install', 'npm_install']) {
      // Still known by name: the tool's own refusal, an isError result, not -32602.
      const r = await call(tool, { packages: ['tinyalpha'] });
      assert.equal(r.isError, true, `${tool}: ${text(r)}`);
      assert.match(text(r), new RegExp(`^${tool}: packages are disabled by policy default \\(packages\\.mode = "disabled"\\)`));
    }
    const info = await call('session_info', {});
    assert.deepEqual(info.structuredContent.tools_off, [
      { tool: 'pip_install', reason: 'packages.mode = "disabled"' },
      { tool: 'npm_install', reason: 'packages.mode = "disabled"' },
      ...kFullOnly.map((tool) => ({ tool, reason: 'tools.toolset = "core"' })),
    ]);
    assert.match(text(info), new RegExp('^tools off: pip_install, npm_install \\(packages\\.mode = "disabled"\\); ' +
      `${kFullOnly.join(', ')} \\(tools\\.toolset = "core"\\)$`, 'm'));
  });

  it('run_command reports stdout, stderr and exit codes; non-zero exit is not an error', async () => {
    const ok = await call('run_command', { command: 'echo hello; echo oops >&2' });
    assert.equal(ok.isError ?? false, false, text(ok));
    assert.equal(ok.structuredContent.exit_code, 0);
    assert.equal(ok.structuredContent.stdout, 'hello\n');
    assert.equal(ok.structuredContent.stderr, 'oops\n');
    assert.match(text(ok), /exit code: 0/);
    const bad = await call('run_command', { command: 'exit 3' });
    assert.equal(bad.isError ?? false, false);
    assert.equal(bad.structuredContent.exit_code, 3);
    const env = await call('run_command', { command: 'echo $FOO; pwd; id -u', env: { FOO: 'bar' } });
    const [foo, cwd, uid] = env.structuredContent.stdout.trim().split('\n');
    assert.equal(foo, 'bar');
    assert.equal(cwd, '/workspace');
    assert.notEqual(uid, '0', 'commands must not run as root inside the cell');
    const stdin = await call('run_command', { command: 'tr a-z A-Z', stdin: 'shout' });
    assert.equal(stdin.structuredContent.stdout, 'SHOUT');
  });

  it('run_code runs python, bash, sh and node', async () => {
    const cases = [
      ['python', 'import sys; print(sys.version_info[0] * 2)', '6\n'],
      ['bash', 'echo $((20 + 1))', '21\n'],
      ['sh', 'printf "%s" sh-ok', 'sh-ok'],
      ['node', 'console.log([1,2,3].map(x => x * 2).join(","))', '2,4,6\n'],
    ];
    for (const [language, code, expected] of cases) {
      const r = await call('run_code', { language, code });
      assert.equal(r.isError ?? false, false, `${language}: ${text(r)}`);
      assert.equal(r.structuredContent.stdout, expected, language);
    }
    // Large code travels in a file rather than argv.
    const big = await call('run_code', { language: 'python', code: '# pad\n'.repeat(8000) + 'import sys; print(sys.argv[0].startswith("/tmp/.mcpcell/"))' });
    assert.equal(big.structuredContent.stdout, 'True\n', text(big));
    const tb = await call('run_code', { language: 'python', code: 'raise ValueError("boom")' });
    assert.equal(tb.structuredContent.exit_code, 1);
    assert.match(tb.structuredContent.stderr, /ValueError: boom/);
  });

  it('files persist across calls: write_file, run_command, read_file, list_files', async () => {
    const w = await call('write_file', { path: 'src/a/hello.txt', content: 'one\ntwo\nthree\n' });
    assert.equal(w.isError ?? false, false, text(w));
    assert.equal(w.structuredContent.bytes_written, 14);
    const cat = await call('run_command', { command: 'cat /workspace/src/a/hello.txt | wc -l' });
    assert.equal(cat.structuredContent.stdout.trim(), '3');
    const r = await call('read_file', { path: 'src/a/hello.txt', offset: 2, limit: 1 });
    assert.equal(r.structuredContent.content, 'two\n');
    assert.equal(r.structuredContent.total_lines, 3);
    assert.equal(r.structuredContent.truncated, true);
    const a = await call('write_file', { path: 'src/a/hello.txt', content: 'four\n', append: true });
    assert.equal(a.structuredContent.size_bytes, 19);
    const all = await call('read_file', { path: '/workspace/src/a/hello.txt' });
    assert.equal(all.structuredContent.content, 'one\ntwo\nthree\nfour\n');
    const ls = await call('list_files', { path: 'src', recursive: true });
    const paths = ls.structuredContent.entries.map((e) => `${e.path}:${e.type}`);
    assert.deepEqual(paths.sort(), ['a/hello.txt:file', 'a:directory']);
  });

  it('list_files gives each entry\'s type and size, and max_entries cuts the listing with truncated', async () => {
    const made = await call('run_command', { command:
      'mkdir -p lf/sub && printf 12345 > lf/five && ln -s five lf/link && mkfifo lf/pipe && printf abc > lf/sub/three' });
    assert.equal(made.structuredContent.exit_code, 0, made.structuredContent.stderr);
    const all = await call('list_files', { path: 'lf', recursive: true });
    assert.equal(all.isError ?? false, false, text(all));
    assert.equal(all.structuredContent.path, 'lf');
    assert.equal(all.structuredContent.truncated, false);
    const byPath = Object.fromEntries(all.structuredContent.entries.map((e) => [e.path, e]));
    assert.deepEqual(Object.keys(byPath).sort(), ['five', 'link', 'pipe', 'sub', 'sub/three']);
    // Sizes are the lstat sizes: a symlink is its target's name ("five"), not followed.
    assert.deepEqual(byPath.five, { path: 'five', type: 'file', size: 5 });
    assert.deepEqual(byPath.link, { path: 'link', type: 'symlink', size: 4 });
    assert.deepEqual(byPath.pipe, { path: 'pipe', type: 'fifo', size: 0 });
    assert.equal(byPath.sub.type, 'directory');
    assert.deepEqual(byPath['sub/three'], { path: 'sub/three', type: 'file', size: 3 });
    // Five entries in all: a cap of 2 (top level) or 4 (recursive) cuts the listing and says so;
    // a cap of exactly the top level's 4 entries does not.
    const two = await call('list_files', { path: 'lf', max_entries: 2 });
    assert.equal(two.structuredContent.entries.length, 2);
    assert.equal(two.structuredContent.truncated, true);
    const four = await call('list_files', { path: 'lf', recursive: true, max_entries: 4 });
    assert.equal(four.structuredContent.entries.length, 4);
    assert.equal(four.structuredContent.truncated, true);
    const exact = await call('list_files', { path: 'lf', max_entries: 4 });
    assert.equal(exact.structuredContent.entries.length, 4);
    assert.equal(exact.structuredContent.truncated, false);
  });

  it('run_command takes cwd (relative to /workspace or absolute) and env; run_code takes stdin', async () => {
    await call('run_command', { command: 'mkdir -p cwd/inner' });
    const rel = await call('run_command', { command: 'pwd', cwd: 'cwd/inner' });
    assert.equal(rel.structuredContent.stdout, '/workspace/cwd/inner\n', text(rel));
    const abs = await call('run_command', { command: 'pwd', cwd: '/tmp' });
    assert.equal(abs.structuredContent.stdout, '/tmp\n', text(abs));
    // Values pass verbatim (spaces, '=', quotes), several at once, over the cell's own ones.
    const env = await call('run_command', { command: 'printf "%s|%s|%s" "$ONE" "$TWO" "$HOME"',
      env: { ONE: 'a b=c', TWO: '"q"', HOME: '/tmp/home' } });
    assert.equal(env.structuredContent.stdout, 'a b=c|"q"|/tmp/home', text(env));
    const badName = await call('run_command', { command: 'true', env: { 'NO=PE': 'x' } });
    assert.equal(badName.isError, true);
    assert.match(text(badName), /env/);
    const stdin = await call('run_code', { language: 'python', code: 'import sys; print(sys.stdin.read()[::-1])',
      stdin: 'abc\ndef' });
    assert.equal(stdin.isError ?? false, false, text(stdin));
    assert.equal(stdin.structuredContent.stdout, 'fed\ncba\n');
  });

  it('binary files go through base64; bad base64 and binary-as-text are refused clearly', async () => {
    const bytes = Buffer.from([0, 1, 2, 255, 254, 10, 0]);
    const w = await call('write_file', { path: 'bin.dat', content: bytes.toString('base64'), encoding: 'base64' });
    assert.equal(w.structuredContent.bytes_written, bytes.length);
    const asText = await call('read_file', { path: 'bin.dat' });
    assert.equal(asText.isError, true);
    assert.match(text(asText), /binary.*base64/);
    const r = await call('read_file', { path: 'bin.dat', encoding: 'base64' });
    assert.deepEqual(Buffer.from(r.structuredContent.content, 'base64'), bytes);
    // Byte windows page through a file larger than one window.
    const hundred = Buffer.alloc(100, 7);
    await call('write_file', { path: 'h.bin', content: hundred.toString('base64'), encoding: 'base64' });
    const win = await call('read_file', { path: 'h.bin', encoding: 'base64', offset: 90, limit: 5 });
    assert.equal(win.isError ?? false, false, text(win));
    assert.equal(Buffer.from(win.structuredContent.content, 'base64').length, 5);
    assert.equal(win.structuredContent.truncated, true);
    assert.match(text(win), /continue with offset=95/);
    const past = await call('read_file', { path: 'h.bin', encoding: 'base64', offset: 101 });
    assert.equal(past.isError, true);
    assert.match(text(past), /past the end/);
    const huge = await call('read_file', { path: 'h.bin', encoding: 'base64', limit: 1e15 });
    assert.equal(huge.isError, true);
    assert.match(text(huge), /limit/);
    const bad = await call('write_file', { path: 'x', content: 'not*base64', encoding: 'base64' });
    assert.equal(bad.isError, true);
    assert.match(text(bad), /arguments\.content: invalid base64/);
  });

  it('edit_file replaces exactly, and says how many matches there were', async () => {
    await call('write_file', { path: 'e.txt', content: 'a b a c' });
    const missing = await call('edit_file', { path: 'e.txt', old_text: 'zzz', new_text: 'y' });
    assert.equal(missing.isError, true);
    assert.match(text(missing), /0 matches/);
    const ambiguous = await call('edit_file', { path: 'e.txt', old_text: 'a', new_text: 'y' });
    assert.equal(ambiguous.isError, true);
    assert.match(text(ambiguous), /matches 2 times/);
    const one = await call('edit_file', { path: 'e.txt', old_text: 'b', new_text: 'B' });
    assert.equal(one.structuredContent.replacements, 1);
    const all = await call('edit_file', { path: 'e.txt', old_text: 'a', new_text: 'A', replace_all: true });
    assert.equal(all.structuredContent.replacements, 2);
    const r = await call('read_file', { path: 'e.txt' });
    assert.equal(r.structuredContent.content, 'A B A c');
  });

  it('refuses bad arguments with a message naming the field, and unknown tools as protocol errors', async () => {
    const wrongType = await call('run_command', { command: 42 });
    assert.equal(wrongType.isError, true);
    assert.match(text(wrongType), /command/);
    const missing = await call('read_file', {});
    assert.equal(missing.isError, true);
    assert.match(text(missing), /path/);
    const unknownField = await call('list_files', { path: '.', colour: 'red' });
    assert.equal(unknownField.isError, true);
    assert.match(text(unknownField), /colour/);
    const badEnum = await call('run_code', { language: 'cobol', code: 'x' });
    assert.equal(badEnum.isError, true);
    assert.match(text(badEnum), /language/);
    const tooLong = await call('run_command', { command: 'true', timeout_s: 100000 });
    assert.equal(tooLong.isError, true);
    assert.match(text(tooLong), /timeout_s/);
    await assert.rejects(call('no_such_tool', {}), (e) => e.code === -32602);
    const huge = await call('write_file', { path: 'big', content: 'x'.repeat(10 * 1024 * 1024) });
    assert.equal(huge.isError, true);
    assert.match(text(huge), /append=true/);
    // Past the stdio message limit (16 MiB) the line is never parsed, but its id (written
    // last by this SDK) is read from its end, so the call fails at once instead of waiting
    // for the client's timeout.
    await assert.rejects(
      call('write_file', { path: 'bigger', content: 'x'.repeat(17 * 1024 * 1024) }, { timeout: 30000 }),
      (e) => e.code === -32600 && /exceeds the maximum message size/.test(e.message),
    );
    // NUL bytes cannot reach a program's argv, environment or path: refused, named.
    for (const [tool, args, field] of [
      ['run_command', { command: 'echo a\0b' }, 'command'],
      ['run_command', { command: 'true', env: { A: 'x\0y' } }, 'env.A'],
      ['run_command', { command: 'true', cwd: '/tmp\0x' }, 'cwd'],
      ['run_code', { language: 'python', code: 'print(1)\0print(2)' }, 'code'],
    ]) {
      const r = await call(tool, args);
      assert.equal(r.isError, true, `${tool} ${field}: ${text(r)}`);
      assert.match(text(r), new RegExp(`arguments\\.${field.replace('.', '\\.')}: contains a NUL byte at offset \\d+`));
    }
    // A missing file says how to look for it.
    const absent = await call('read_file', { path: 'no/such/file.txt' });
    assert.equal(absent.isError, true);
    assert.match(text(absent), /ENOENT.*list_files/);
    // A program killed by the cell's file-size limit is a failure of the tool, with a hint.
    const fsize = await call('run_command', { command: 'ulimit -f 1; exec head -c 100000 /dev/zero > fsize.bin' });
    assert.equal(fsize.isError, true, text(fsize));
    assert.equal(fsize.structuredContent.signal, 'SIGXFSZ');
    assert.match(text(fsize), /file-size limit/);
    // A child of the shell killed so: the shell exits 153, a normal result with the hint.
    const child = await call('run_command', { command: 'ulimit -f 1; head -c 100000 /dev/zero > fsize2.bin; exit $?' });
    assert.equal(child.isError ?? false, false, text(child));
    assert.equal(child.structuredContent.exit_code, 153);
    assert.match(text(child), /128 \+ SIGXFSZ.*file-size limit/);
    // The server is still fine.
    const ok = await call('run_command', { command: 'echo alive' });
    assert.equal(ok.structuredContent.stdout, 'alive\n');
  });

  it('paths cannot escape the cell: .., absolute host paths, planted symlinks, /proc magic links', async () => {
    const hostShadow = readFileSync('/etc/shadow', 'utf8');
    const hostPasswd = readFileSync('/etc/passwd', 'utf8');
    // The cell has its own /etc/passwd (with the sandbox user) and no /etc/shadow, so a probe
    // that reaches the host shows the host's text, and one that stays in the cell reads the
    // cell's file or nothing.
    assert.doesNotMatch(hostPasswd, /^sandbox:/m, 'the host must not have the cell\'s sandbox user');
    const leaked = (r) => text(r).includes(hostShadow.split('\n')[0]);
    const cellsPasswd = (r, p) => {
      assert.equal(r.isError ?? false, false, `${p}: ${text(r)}`);
      assert.match(r.structuredContent.content, /^sandbox:x:\d+:/m, `${p} is not the cell's /etc/passwd`);
      assert.notEqual(r.structuredContent.content, hostPasswd, `${p} read the host's /etc/passwd`);
    };
    // Refused: /proc magic links to a root (the cell's init's or our own), or missing in the
    // cell: a host file outside the template, the host's /etc/shadow, also reached by "..".
    const refused = ['../../../../etc/shadow', 'missing/../../etc/passwd', '/etc/shadow', '/proc/1/root/etc/shadow',
      '/proc/1/root/etc/passwd', '/proc/self/root/etc/passwd', path.resolve('package.json')];
    for (const p of refused) {
      const r = await call('read_file', { path: p });
      assert.equal(r.isError, true, `${p} was read: ${text(r)}`);
      assert.ok(!leaked(r), `${p} leaked the host's /etc/shadow`);
    }
    cellsPasswd(await call('read_file', { path: '/etc/passwd' }), '/etc/passwd');
    // ".." is resolved inside the cell and stops at its root, as for the sandboxed code.
    for (const p of ['../../../../../../etc/passwd', '/workspace/../etc/passwd']) cellsPasswd(await call('read_file', { path: p }), p);
    const endsInDotDot = await call('write_file', { path: 'sub/..', content: 'x' });
    assert.equal(endsInDotDot.isError, true);
    // Planted symlinks: to a magic link (refused), up past the root (resolved inside the
    // cell's root, like chroot), to the host's shadow path (missing in the cell).
    await call('run_command', { command: 'ln -sf /proc/1/root/etc/shadow /workspace/l1; ln -sf ../../../../../etc /workspace/l2; ln -sf /etc/shadow /workspace/l3' });
    for (const p of ['l1', 'l2/shadow', 'l3']) {
      const r = await call('read_file', { path: p });
      assert.equal(r.isError, true, `${p} was read: ${text(r)}`);
      assert.ok(!leaked(r), `${p} leaked the host's /etc/shadow`);
    }
    cellsPasswd(await call('read_file', { path: 'l2/passwd' }), 'l2/passwd');
    const ls = await call('list_files', { path: '/proc/1/root/etc' });
    assert.equal(ls.isError, true, `a /proc magic link was listed: ${text(ls)}`);
    const w = await call('write_file', { path: '/proc/1/root/tmp/escape', content: 'x' });
    assert.equal(w.isError, true);
    const usr = await call('write_file', { path: '/usr/bin/evil', content: 'x' });
    assert.equal(usr.isError, true, 'the template must not be writable by the sandbox user');
  });

  it('a 200 MB flood is cut, saved in the cell, and the server stays small', async () => {
    // The server's peak resident size during the call: "5" to clear_refs resets VmHWM to the
    // current VmRSS, so VmHWM afterwards is the call's peak, however briefly it was reached
    // (RSS before and after would miss a buffer that was freed before the call returned).
    const pid = s.transport.pid;
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    const before = statusKiB(pid, 'VmRSS');
    assert.ok(statusKiB(pid, 'VmHWM') < before + 4096, 'VmHWM was not reset');
    const r = await call('run_command', { command: 'head -c 200000000 /dev/zero | tr "\\0" a', timeout_s: 120 });
    const grown = statusKiB(pid, 'VmHWM') - before;
    assert.equal(r.structuredContent.stdout_bytes, 200000000);
    assert.equal(r.structuredContent.stdout_truncated, true);
    assert.ok(r.structuredContent.stdout.length < 100 * 1024);
    assert.match(r.structuredContent.full_stdout_path, /^\/workspace\/\.mcpcell\//);
    assert.match(text(r), /bytes omitted/);
    assert.ok(grown < 64 * 1024, `server peak RSS grew by ${grown} KiB during a 200 MB flood`);
    const saved = await call('run_command', { command: `wc -c < ${r.structuredContent.full_stdout_path}` });
    assert.ok(Number(saved.structuredContent.stdout.trim()) > 1000000, 'full output was not saved');
    // The saved copy is capped (64 MiB a stream): the result says how much it holds rather
    // than calling it the full output.
    const kept = text(r).match(/the first (\d+) of 200000000 bytes are in \/workspace\/\.mcpcell\//);
    assert.ok(kept, `the marker does not say the saved copy is partial: ${text(r).slice(0, 2000)}`);
    assert.ok(Number(saved.structuredContent.stdout.trim()) >= Number(kept[1]), 'the file holds less than the marker says');
    assert.doesNotMatch(text(r), /full output/);
  });

  it('a timeout kills the whole process group and says so', async () => {
    const r = await call('run_command', { command: 'sleep 300 & sleep 300; echo never', timeout_s: 1 });
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.timed_out, true);
    assert.match(text(r), /timed out after 1 s/);
    const ps = await call('run_command', { command: 'ps -eo comm= | grep -c "^sleep$" || true' });
    assert.equal(ps.structuredContent.stdout.trim(), '0', 'sleep survived the timeout');
  });

  it('cancellation kills the program\'s process group within 3 s, and the session goes on', async () => {
    const run = async (command) => (await call('run_command', { command })).structuredContent;
    const cellBefore = (await call('session_info', {})).structuredContent.cell_id;
    await run('rm -f /tmp/pgid /tmp/pgid.tmp');
    // The program publishes its process group (atomically, by rename), then waits in two
    // sleeps of that group: one in the background, one in the foreground.
    const controller = new AbortController();
    const pending = call('run_command', {
      command: 'ps -o pgid= -p $$ > /tmp/pgid.tmp && mv /tmp/pgid.tmp /tmp/pgid; sleep 300 & sleep 300',
    }, { signal: controller.signal, timeout: 600000 });
    const pgid = await waitFor(async () => (await run('cat /tmp/pgid 2>/dev/null')).stdout.trim(),
      { timeoutMs: 10000, intervalMs: 50, what: 'the program to start' });
    assert.match(pgid, /^\d+$/);
    const members = async () => Number((await run(`ps -eo pgid= | awk '$1 == ${pgid}' | wc -l`)).stdout.trim());
    // The shell and both sleeps, once the background sleep has been forked.
    await waitFor(async () => (await members()) >= 3, { timeoutMs: 5000, what: 'the sleeps to start' });
    controller.abort('test cancels');
    await assert.rejects(pending);
    await waitFor(async () => (await members()) === 0, { timeoutMs: 3000, intervalMs: 50,
      what: `process group ${pgid} to be gone after the cancellation` });
    // Same session, same cell: only the program was killed.
    const ok = await call('run_command', { command: 'echo alive' });
    assert.equal(ok.structuredContent.stdout, 'alive\n', text(ok));
    const info = await call('session_info', {});
    assert.equal(info.structuredContent.cell_id, cellBefore, 'the cancellation cost the session its cell');
  });

  it('streams output as progress notifications while the program runs', async () => {
    const messages = [];
    const r = await call('run_command', { command: 'for i in 1 2 3; do echo line$i; sleep 0.4; done' }, {
      onprogress: (p) => messages.push(p.message ?? ''),
      timeout: 60000,
    });
    assert.equal(r.structuredContent.stdout, 'line1\nline2\nline3\n');
    assert.ok(messages.length >= 2, `expected progress notifications, got ${messages.length}`);
    assert.ok(messages.join('').includes('line1'), `progress did not carry the output: ${messages}`);
  });

  it('sends a heartbeat while a program is silent, so a client that resets its timeout on progress waits', async () => {
    // The client gives up after 6 s without progress; the program is silent for 7 s. Only the
    // server's heartbeat (every 5 s, tools/tool_env.h) keeps the request alive.
    const progress = [];
    const started = Date.now();
    const r = await call('run_command', { command: 'sleep 7' }, {
      onprogress: (p) => progress.push({ at: Date.now() - started, message: p.message ?? '' }),
      timeout: 6000,
      resetTimeoutOnProgress: true,
    });
    const ended = Date.now() - started;
    assert.equal(r.structuredContent.exit_code, 0, text(r));
    assert.ok(progress.length >= 1, 'no progress notification while the program was silent');
    assert.match(progress[0].message, /still running/);
    assert.ok(progress[0].at >= 4000 && progress[0].at < ended - 500,
      `the heartbeat came at ${progress[0].at} ms of ${ended} ms, not ~5 s into the run`);
  });

  it('runs calls of one session concurrently, each streaming its own output', async () => {
    await call('run_command', { command: 'rm -f /tmp/ca /tmp/cb' });
    // Each call says it started, creates its file and waits (up to 10 s) for the other's:
    // both finish with "saw" only if they run at the same time.
    const program = (me, other) => `echo ${me}-started; touch /tmp/c${me}; i=0; ` +
      `while [ ! -f /tmp/c${other} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done; ` +
      `test -f /tmp/c${other} && echo ${me}-saw-${other}`;
    const from = s.wire.length;
    const [a, b] = await Promise.all([
      call('run_command', { command: program('a', 'b'), timeout_s: 30 }, { onprogress: () => {} }),
      call('run_command', { command: program('b', 'a'), timeout_s: 30 }, { onprogress: () => {} }),
    ]);
    assert.equal(a.structuredContent.stdout, 'a-started\na-saw-b\n', text(a));
    assert.equal(b.structuredContent.stdout, 'b-started\nb-saw-a\n', text(b));
    // Progress, read off the wire (a notification sent just before its response would miss
    // the SDK's handler): each call's token carries its own output and none of the other's.
    const wire = s.wire.slice(from);
    const progressOf = (result) => {
      const response = wire.find((m) => m.result?.structuredContent?.stdout === result.structuredContent.stdout);
      assert.ok(response, 'the response is not on the wire');
      return wire.filter((m) => m.method === 'notifications/progress' && m.params.progressToken === response.id)
        .map((m) => m.params.message ?? '').join('\n');
    };
    const [pa, pb] = [progressOf(a), progressOf(b)];
    assert.match(pa, /a-started/);
    assert.doesNotMatch(pa, /b-started|b-saw/);
    assert.match(pb, /b-started/);
    assert.doesNotMatch(pb, /a-started|a-saw/);
  });

  it('session_info describes the cell, its limits and usage', async () => {
    const before = (await call('session_info', {})).structuredContent;
    // About 300 ms of CPU, and 64 MiB more memory touched than the cell's peak so far (the
    // peak is the cell's whole life: earlier tests' files in /workspace count too).
    const allocMiB = Math.ceil(before.peak_memory_bytes / 2 ** 20) + 64;
    const busy = await call('run_command', { command:
      `python3 -c "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\nb = b'x' * (${allocMiB} << 20)"` });
    assert.equal(busy.structuredContent.exit_code, 0, text(busy));
    const r = await call('session_info', {});
    assert.equal(r.isError ?? false, false, text(r));
    const i = r.structuredContent;
    assert.match(i.cell_id, /^[cw][0-9a-f]+$/);
    assert.ok(existsSync(path.join(stateDir, 'cells', i.cell_id)), 'the cell id names no cell of this server');
    assert.equal(i.cell_id, before.cell_id);
    assert.equal(i.policy, 'default');
    // The limits and times the server was started with (none is the default policy's).
    assert.equal(i.memory_limit_bytes, kMain.memoryMiB * 1024 * 1024);
    assert.equal(i.pids_limit, kMain.pids);
    assert.equal(i.cpu_millicores, kMain.cpuMillicores);
    assert.equal(i.exec_default_timeout_s, kMain.defaultTimeoutS);
    assert.equal(i.exec_max_timeout_s, kMain.maxTimeoutS);
    // Usage: the busy call shows in the cell's CPU time and peak memory.
    assert.ok(i.cpu_time_ms - before.cpu_time_ms >= 250,
      `cpu_time_ms went from ${before.cpu_time_ms} to ${i.cpu_time_ms} over a 300 ms busy loop`);
    assert.ok(i.peak_memory_bytes >= allocMiB * 2 ** 20,
      `peak_memory_bytes went from ${before.peak_memory_bytes} to ${i.peak_memory_bytes} over a ${allocMiB} MiB allocation`);
    assert.ok(i.peak_memory_bytes >= i.memory_current_bytes);
    assert.equal(i.calls, before.calls + 2, 'calls counts this session\'s tool calls');
    // Times: the session is no older than the server; a call in progress restarts the idle
    // clock; what is left of the lifetime is the lifetime less the age.
    const maxAgeS = Math.ceil((Date.now() - startedAt) / 1000);
    assert.ok(i.session_wall_time_s >= 0 && i.session_wall_time_s <= maxAgeS, `session_wall_time_s ${i.session_wall_time_s}`);
    assert.equal(i.idle_expiry_s, kMain.idleS);
    assert.ok(i.lifetime_left_s <= kMain.lifetimeS && i.lifetime_left_s >= kMain.lifetimeS - maxAgeS - 1,
      `lifetime_left_s ${i.lifetime_left_s}`);
    assert.ok(Math.abs(i.lifetime_left_s + i.session_wall_time_s - kMain.lifetimeS) <= 1);
    // Network: the default policy denies egress, and nothing went through the proxy.
    assert.match(i.network, /^no network/);
    // Disk: the default shape's RAM-backed /workspace and /tmp, and RLIMIT_FSIZE.
    for (const k of ['workspace_bytes', 'tmp_bytes', 'root_writes_bytes', 'largest_file_bytes']) {
      assert.ok(Number.isInteger(i.disk_limits[k]) && i.disk_limits[k] > 0, `disk_limits.${k}: ${i.disk_limits[k]}`);
    }
    assert.match(text(r), /disk: \/workspace \d+ MiB, \/tmp \d+ MiB/);
    assert.deepEqual(i.egress.allowlist, []);
    assert.equal(i.egress.connections_total, 0);
    assert.deepEqual(i.warnings, []);
  });
});

describe('concurrent appends', () => {
  it('write_file append from many calls at once loses nothing', async () => {
    await withServer([], async (s) => {
      const lines = Array.from({ length: 24 }, (_, i) => `line ${i} ${'x'.repeat(200)}\n`);
      const results = await Promise.all(lines.map((content) =>
        s.client.callTool({ name: 'write_file', arguments: { path: 'log.txt', content, append: true } })));
      for (const r of results) assert.equal(r.isError ?? false, false, text(r));
      const read = await s.client.callTool({ name: 'read_file', arguments: { path: 'log.txt', limit: 1000 } });
      const got = read.structuredContent.content.split('\n').filter((l) => l).sort();
      assert.deepEqual(got, lines.map((l) => l.trimEnd()).sort());
    });
  });
});

describe('edit_file replaces atomically', () => {
  it('keeps the mode, leaves no temporary file, and edits through a symlink', async () => {
    await withServer([], async (s) => {
      const run = async (command) => (await s.client.callTool({ name: 'run_command', arguments: { command } })).structuredContent;
      await run("printf '#!/bin/sh\\necho old\\n' > tool.sh && chmod 750 tool.sh && ln -s tool.sh via-link");
      const e1 = await s.client.callTool({ name: 'edit_file', arguments: { path: 'tool.sh', old_text: 'old', new_text: 'new' } });
      assert.equal(e1.isError ?? false, false, text(e1));
      const after = await run('stat -c %a tool.sh; ./tool.sh; ls -A');
      assert.equal(after.stdout, '750\nnew\ntool.sh\nvia-link\n');
      const e2 = await s.client.callTool({ name: 'edit_file', arguments: { path: 'via-link', old_text: 'new', new_text: 'newer' } });
      assert.equal(e2.isError ?? false, false, text(e2));
      const viaLink = await run('readlink via-link; ./tool.sh');
      assert.equal(viaLink.stdout, 'tool.sh\nnewer\n');
    });
  });
});

describe('disk limit', () => {
  it('write_file past the cell\'s disk limit fails with a clear message, and the cell goes on', async () => {
    await withServer(['--disk-mib', '8'], async (s) => {
      const chunk = 'y'.repeat(3 * 1024 * 1024);
      const results = [];
      for (let i = 0; i < 4; i++) {
        results.push(await s.client.callTool({ name: 'write_file', arguments: { path: 'fill.txt', content: chunk, append: true } }));
      }
      const failed = results.find((r) => r.isError);
      assert.ok(failed, 'four 3 MiB appends fit in an 8 MiB workspace');
      assert.match(text(failed), /disk limit/);
      const df = await s.client.callTool({ name: 'run_command', arguments: { command: 'rm fill.txt && echo freed' } });
      assert.equal(df.structuredContent.stdout, 'freed\n');
      const again = await s.client.callTool({ name: 'write_file', arguments: { path: 'small.txt', content: 'ok' } });
      assert.equal(again.isError ?? false, false, text(again));
    });
  });
});

describe('warm cells', () => {
  it('the first call takes a cell made ahead of need, the pool refills, and nothing survives the server', async () => {
    const stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-e2e-'));
    const cells = () => { const d = path.join(stateDir, 'cells'); return existsSync(d) ? readdirSync(d) : []; };
    const s = await startServer(stateDir);  // --warm-cells defaults to 1
    try {
      // The pool's ready cell, and as root a parked one too (for sessions over a snapshot):
      // wait until their number holds still.
      let pooled = [];
      for (let i = 0, still = 0; i < 300 && still < 10; i++) {
        await new Promise((r) => setTimeout(r, 50));
        const now = cells();
        still = now.length > 0 && now.length === pooled.length ? still + 1 : 0;
        pooled = now;
      }
      assert.ok(pooled.length >= 1 && pooled.length <= 2, `cells ready before any call: ${pooled}`);
      const info = await s.client.callTool({ name: 'session_info', arguments: {} });
      assert.ok(pooled.includes(info.structuredContent.cell_id), 'the session got a ready cell');
      const full = pooled.length + 1;  // the session's cell and a full pool again
      for (let i = 0; i < 300 && cells().length < full; i++) await new Promise((r) => setTimeout(r, 50));
      assert.equal(cells().length, full, 'the pool made the next one');
    } finally {
      await s.close();
    }
    for (let i = 0; i < 100 && cells().length; i++) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(cells(), [], 'the session cell and the pooled cell are gone with the server');
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('--warm-cells 0 makes the cell at the first call', async () => {
    await withServer(['--warm-cells', '0'], async (s, stateDir) => {
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(existsSync(path.join(stateDir, 'cells')) ? readdirSync(path.join(stateDir, 'cells')).length : 0, 0);
      const info = await s.client.callTool({ name: 'session_info', arguments: {} });
      assert.match(info.structuredContent.cell_id, /^c/);
    });
  });
});

describe('a cell that died', () => {
  it('is replaced on the next call, and every tool, file tools included, says the files are gone', async () => {
    await withServer([], async (s, stateDir) => {
      const killInit = async () => {
        const info = await s.client.callTool({ name: 'session_info', arguments: {} });
        const id = info.structuredContent.cell_id;
        const pid = cellInitPid(stateDir, id);  // the cell init this server started
        assert.ok(pid > 1, `init pid of ${id}`);
        process.kill(pid, 'SIGKILL');
        for (let i = 0; i < 200 && alive(pid); i++) await new Promise((r) => setTimeout(r, 10));
        return id;
      };
      await s.client.callTool({ name: 'write_file', arguments: { path: 'keep.txt', content: 'x' } });
      for (const [name, args] of [['read_file', { path: 'keep.txt' }], ['write_file', { path: 'new.txt', content: 'y' }],
        ['list_files', {}], ['edit_file', { path: 'new.txt', old_text: 'y', new_text: 'z' }],
        ['run_command', { command: 'ls' }]]) {
        // Each tool in turn is the first call after a death.
        if (name === 'edit_file') await s.client.callTool({ name: 'write_file', arguments: { path: 'new.txt', content: 'y' } });
        const dead = await killInit();
        const r = await s.client.callTool({ name, arguments: args });
        assert.match(text(r), new RegExp(`previous cell ${dead} had stopped`), `${name}: ${text(r)}`);
        assert.match(text(r), /files from before are gone/, name);
        const next = await s.client.callTool({ name: 'session_info', arguments: {} });
        assert.notEqual(next.structuredContent.cell_id, dead, name);
      }
    });
  });
});

describe('idle timeout', () => {
  it('destroys an idle cell; the next call gets a fresh one over the hibernated files and says so', async () => {
    await withServer(['--idle-timeout', '2'], async (s, stateDir) => {
      const call = (name, args) => s.client.callTool({ name, arguments: args });
      await call('write_file', { path: 'keep.txt', content: 'x' });
      const old = (await call('session_info', {})).structuredContent.cell_id;
      const oldDir = path.join(stateDir, 'cells', old);
      const oldInit = cellInitPid(stateDir, old);
      const idleFrom = Date.now();
      // The reaper looks once a second: the cell goes 2 to 3 s after the last call, not before.
      await waitFor(() => !existsSync(oldDir), { timeoutMs: 6000, intervalMs: 100, what: `${oldDir} to be removed` });
      assert.ok(Date.now() - idleFrom >= 1500, `the cell went after ${Date.now() - idleFrom} ms, before 2 s idle`);
      assert.equal(alive(oldInit), false, 'the idle cell\'s init still runs');
      // The session hibernated: a new cell over its files, and the first call says so.
      const r = await call('read_file', { path: 'keep.txt' });
      assert.notEqual(r.isError, true, text(r));
      assert.match(text(r), /hibernated after 2 s of idle: its programs were stopped, its files kept/);
      const ls = await call('run_command', { command: 'ls -A /workspace' });
      assert.equal(ls.structuredContent.stdout, 'keep.txt\n');
      assert.doesNotMatch(text(ls), /hibernated/, 'only the first call in the new cell carries the note');
      const info = (await call('session_info', {})).structuredContent;
      assert.notEqual(info.cell_id, old);
      assert.equal(info.cells_created, 2);
    });
  });
});

describe('maximum session lifetime', () => {
  it('kills a running program at the lifetime, removes the cell and refuses later calls', async () => {
    const started = Date.now();  // the session starts after this
    await withServer(['--max-lifetime', '4'], async (s, stateDir) => {
      const call = (name, args) => s.client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });
      const id = (await call('session_info', {})).structuredContent.cell_id;
      const init = cellInitPid(stateDir, id);
      const r = await call('run_command', { command: 'sleep 30', timeout_s: 60 });
      const endedS = (Date.now() - started) / 1000;
      assert.equal(r.isError, true, text(r));
      assert.match(text(r), /session/);
      // Killed at 4 s (plus the reaper's 1 s period and some slack), not at the sleep's end.
      assert.ok(endedS >= 3.9 && endedS < 9, `sleep 30 ended ${endedS} s after the server started`);
      await waitFor(() => !alive(init), { timeoutMs: 2000, what: 'the cell\'s init to exit' });
      await waitFor(() => !existsSync(path.join(stateDir, 'cells', id)), { timeoutMs: 2000, what: 'the cell\'s directory to go' });
      for (const [name, args] of [['run_command', { command: 'echo hi' }], ['read_file', { path: 'x' }]]) {
        const later = await call(name, args);
        assert.equal(later.isError, true, `${name} ran after the lifetime: ${text(later)}`);
        assert.match(text(later), /ended.*maximum lifetime/s, name);
      }
    });
  });
});

// A policy of its own for one test, in a directory removed afterwards: fn(policyFile).
async function withPolicy(toml, fn) {
  const dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-e2e-policy-'));
  try {
    const policyFile = path.join(dir, 'policy.toml');
    writeFileSync(policyFile, toml);
    return await fn(policyFile);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// The notifications/message of mcpcell's own logger the server has sent so far.
function mcpcellLogs(s) {
  return s.wire.filter((m) => m.method === 'notifications/message' && m.params?.logger === 'mcpcell')
    .map((m) => m.params);
}

describe('tools a policy turns off', () => {
  it('packages online for pypi only: pip_install is listed, npm_install is not but refuses by name; tools.enabled hides and refuses as before', async () => {
    const toml = `name = "pypi-only"
[packages]
mode = "online"
registries = ["pypi"]
allow = ["pypi:tiny*"]
[tools]
enabled = ["run_code", "run_command", "write_file", "edit_file", "list_files", "session_info", "pip_install", "npm_install"]
`;
    await withPolicy(toml, (policyFile) => withServer(['--policy', policyFile, '--warm-cells', '0'], async (s) => {
      const call = (name, args) => s.client.callTool({ name, arguments: args });
      const names = (await s.client.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('pip_install'), names.join(', '));
      assert.ok(!names.includes('npm_install'), names.join(', '));
      assert.ok(!names.includes('read_file'), names.join(', '));
      const npm = await call('npm_install', { packages: ['tinynpm'] });
      assert.equal(npm.isError, true, text(npm));
      assert.match(text(npm), /^npm_install: registry "npm" is not in packages\.registries \(policy pypi-only\)/);
      // Not in tools.enabled: unknown to this session, as before.
      await assert.rejects(call('read_file', { path: 'x' }), (e) => e.code === -32602);
      const info = await call('session_info', {});
      assert.deepEqual(info.structuredContent.tools_off, [
        { tool: 'python', reason: 'not in tools.enabled' },
        { tool: 'process', reason: 'not in tools.enabled' },
        { tool: 'read_file', reason: 'not in tools.enabled' },
        { tool: 'npm_install', reason: 'registry "npm" is not in packages.registries' },
        ...kFullOnly.map((tool) => ({ tool, reason: 'tools.toolset = "core"' })),
      ]);
      assert.match(text(info), new RegExp('^tools off: python, process, read_file \\(not in tools\\.enabled\\); ' +
        'npm_install \\(registry "npm" is not in packages\\.registries\\); ' +
        `${kFullOnly.join(', ')} \\(tools\\.toolset = "core"\\)$`, 'm'));
    }));
  });
});

describe('log messages to the client (logger "mcpcell")', () => {
  it('an egress refusal is a warning to the session; at level error it is not sent', async () => {
    await withServer(['--warm-cells', '0'], async (s) => {
      const fetch = () => s.client.callTool({ name: 'run_code', arguments: { language: 'python',
        code: 'import urllib.request\ntry:\n  urllib.request.urlopen("http://denied.example/", timeout=10)\nexcept Exception as e:\n  print(e)' } });
      await s.client.setLoggingLevel('warning');
      const r = await fetch();
      assert.match(r.structuredContent.stdout, /403/, text(r));
      const logs = mcpcellLogs(s);
      assert.equal(logs.length, 1, JSON.stringify(logs));
      assert.equal(logs[0].level, 'warning');
      assert.equal(logs[0].data.event, 'egress_refused');
      assert.match(logs[0].data.message, /egress to denied\.example:80 denied/);
      await s.client.setLoggingLevel('error');
      const again = await fetch();
      assert.match(again.structuredContent.stdout, /403/, text(again));
      assert.equal(mcpcellLogs(s).length, 1, 'a warning sent at level error: ' + JSON.stringify(mcpcellLogs(s)));
    });
  });

  it('a replaced cell is a warning related to the call that got the fresh cell; at level error it is not sent', async () => {
    await withServer(['--warm-cells', '0'], async (s, stateDir) => {
      const call = (name, args) => s.client.callTool({ name, arguments: args });
      const killInit = async () => {
        const id = (await call('session_info', {})).structuredContent.cell_id;
        const pid = cellInitPid(stateDir, id);
        process.kill(pid, 'SIGKILL');
        for (let i = 0; i < 200 && alive(pid); i++) await new Promise((r) => setTimeout(r, 10));
        return id;
      };
      await s.client.setLoggingLevel('warning');
      const dead = await killInit();
      assert.deepEqual(mcpcellLogs(s), [], 'nothing before the replacement');
      await call('run_command', { command: 'true' });
      const logs = mcpcellLogs(s);
      assert.equal(logs.length, 1, JSON.stringify(logs));
      assert.equal(logs[0].level, 'warning');
      assert.equal(logs[0].data.event, 'cell_replaced');
      assert.match(logs[0].data.message, new RegExp(`previous cell ${dead} had stopped.*files from before are gone`));
      await s.client.setLoggingLevel('error');
      await killInit();
      const r = await call('run_command', { command: 'true' });
      assert.match(text(r), /had stopped/, 'the cell was replaced again');
      assert.equal(mcpcellLogs(s).length, 1, JSON.stringify(mcpcellLogs(s)));
    });
  });

  it('a session near its maximum lifetime is warned once, at the first call; at level error it is not', async () => {
    // 120 s: less than 5 minutes left from the start.
    await withServer(['--max-lifetime', '120', '--warm-cells', '0'], async (s) => {
      await s.client.setLoggingLevel('warning');
      await s.client.callTool({ name: 'run_command', arguments: { command: 'true' } });
      const logs = mcpcellLogs(s);
      assert.equal(logs.length, 1, JSON.stringify(logs));
      assert.equal(logs[0].level, 'warning');
      assert.equal(logs[0].data.event, 'session_ending');
      assert.match(logs[0].data.message, /this session ends in 1[01]\d s, at its maximum lifetime of 120 s/);
      await s.client.callTool({ name: 'run_command', arguments: { command: 'true' } });
      assert.equal(mcpcellLogs(s).length, 1, 'once per session');
    });
    await withServer(['--max-lifetime', '120', '--warm-cells', '0'], async (s) => {
      await s.client.setLoggingLevel('error');
      await s.client.callTool({ name: 'run_command', arguments: { command: 'true' } });
      assert.deepEqual(mcpcellLogs(s), []);
    });
    // Far from the end (the default 4 h): no warning.
    await withServer(['--warm-cells', '0'], async (s) => {
      await s.client.setLoggingLevel('warning');
      await s.client.callTool({ name: 'run_command', arguments: { command: 'true' } });
      assert.deepEqual(mcpcellLogs(s), []);
    });
  });

  it('a package refused by the rules (pip_install) and by the package service (pip in the cell) are warnings; at level error they are not', async () => {
    const toml = `name = "pypi-rules"
[packages]
mode = "online"
registries = ["pypi"]
allow = ["pypi:tiny*", "pypi:evil*"]
deny = ["pypi:evil*"]
`;
    await withPolicy(toml, (policyFile) => withServer(['--policy', policyFile, '--warm-cells', '0'], async (s) => {
      const call = (name, args) => s.client.callTool({ name, arguments: args }, undefined, { timeout: 120000 });
      await s.client.setLoggingLevel('warning');
      const r = await call('pip_install', { packages: ['tinyalpha', 'requests'] });
      assert.equal(r.isError, true, text(r));
      let logs = mcpcellLogs(s);
      assert.equal(logs.length, 1, JSON.stringify(logs));
      assert.equal(logs[0].level, 'warning');
      assert.equal(logs[0].data.event, 'package_refused');
      assert.match(logs[0].data.message, /^pip_install refused requests: "requests" is not in packages\.allow/);
      // pip in the cell, around the tool: the package service refuses the index request
      // (no venv yet: the system pip, allowed to install there for this test).
      const pipDenied = 'PIP_BREAK_SYSTEM_PACKAGES=1 pip install --no-input evilpkg';
      const shell = await call('run_command', { command: pipDenied });
      assert.notEqual(shell.structuredContent.exit_code, 0, text(shell));
      logs = mcpcellLogs(s);
      assert.ok(logs.length >= 2, JSON.stringify(logs) + '\n' + text(shell));
      assert.ok(logs.slice(1).every((l) => l.level === 'warning' && l.data.event === 'package_refused'),
        JSON.stringify(logs));
      assert.match(logs[1].data.message, /evilpkg.*packages\.deny rule "pypi:evil\*"/);
      await s.client.setLoggingLevel('error');
      const quiet = await call('pip_install', { packages: ['requests'] });
      assert.equal(quiet.isError, true, text(quiet));
      const shellQuiet = await call('run_command', { command: pipDenied });
      assert.notEqual(shellQuiet.structuredContent.exit_code, 0, text(shellQuiet));
      assert.equal(mcpcellLogs(s).length, logs.length, JSON.stringify(mcpcellLogs(s)));
    }));
  });
});
describe('run_command is /bin/sh -c COMMAND', () => {
  it('a plain program call runs under /bin/sh, and a signal death and a missing program read as the shell reports them', async () => {
    await withServer([], async (s) => {
      const call = (command) => s.client.callTool({ name: 'run_command', arguments: { command } });
      // `ps` lists the cell's processes: the shell that ran the line is among them.
      const ps = await call('ps -eo comm=');
      assert.deepEqual(ps.structuredContent.stdout.trim().split('\n').map((l) => l.trim()),
        ['mcpcell-init', 'sh', 'ps'], text(ps));
      // A program killed by a signal reads as dash reports it.
      await s.client.callTool({ name: 'write_file', arguments: { path: 'die.sh', content: '#!/bin/sh\nkill -TERM $$\n' } });
      await call('chmod 755 die.sh');
      const died = await call('./die.sh');
      assert.equal(died.isError ?? false, false, text(died));
      assert.equal(died.structuredContent.exit_code, 143);
      assert.equal(died.structuredContent.signal, '');
      assert.equal(died.structuredContent.stderr, 'Terminated\n');
      // A program that is not there: the shell's own message and code.
      const missing = await call('no-such-program x');
      assert.equal(missing.structuredContent.exit_code, 127);
      assert.equal(missing.structuredContent.stderr, '/bin/sh: 1: no-such-program: not found\n');
    });
  });
});

describe('default timeout', () => {
  it('a call without timeout_s gets --default-timeout', async () => {
    await withServer(['--default-timeout', '2'], async (s) => {
      await s.client.callTool({ name: 'session_info', arguments: {} });  // the cell exists: time only the call
      const started = Date.now();
      const r = await s.client.callTool({ name: 'run_command', arguments: { command: 'sleep 30' } });
      const tookMs = Date.now() - started;
      assert.equal(r.isError, true, text(r));
      assert.equal(r.structuredContent.timed_out, true);
      assert.match(text(r), /timed out after 2 s/);
      assert.ok(tookMs >= 1900 && tookMs < 5000, `sleep 30 with a 2 s default timeout took ${tookMs} ms`);
    });
  });
});

describe('two sessions', () => {
  let stateDir;
  let a;
  let b;
  before(async () => {
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-e2e-'));
    [a, b] = await Promise.all([startServer(stateDir), startServer(stateDir)]);
  });
  after(async () => {
    await Promise.all([a?.close(), b?.close()]);
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('cannot see each other\'s files, processes or /dev/shm', async () => {
    const run = (s, command) => s.client.callTool({ name: 'run_command', arguments: { command } });
    await run(a, 'echo secret-a > /workspace/mine; echo shm-a > /dev/shm/x; sleep 60 >/dev/null 2>&1 & echo started');
    const files = await run(b, 'cat /workspace/mine 2>&1; cat /dev/shm/x 2>&1; ps -eo comm=');
    assert.doesNotMatch(files.structuredContent.stdout, /secret-a|shm-a/);
    assert.doesNotMatch(files.structuredContent.stdout, /^sleep$/m);
    const infoA = await a.client.callTool({ name: 'session_info', arguments: {} });
    const infoB = await b.client.callTool({ name: 'session_info', arguments: {} });
    assert.notEqual(infoA.structuredContent.cell_id, infoB.structuredContent.cell_id);
  });

  it('a symlink planted in one cell to the other\'s host paths reaches nothing of it', async () => {
    const w = await b.client.callTool({ name: 'write_file', arguments: { path: 'marker-b', content: 'B-MARKER' } });
    assert.equal(w.isError ?? false, false, text(w));
    const idB = (await b.client.callTool({ name: 'session_info', arguments: {} })).structuredContent.cell_id;
    const initB = cellInitPid(stateDir, idB);
    const cellDirB = path.join(stateDir, 'cells', idB);
    // From the host, B's files are at /proc/<B's init>/root (its workspace lives only in its
    // mount namespace) and the server keeps B's records in cellDirB: the targets are real.
    assert.equal(readFileSync(`/proc/${initB}/root/workspace/marker-b`, 'utf8'), 'B-MARKER');
    const recordB = readFileSync(path.join(cellDirB, 'init'), 'utf8');
    const plant = await a.client.callTool({ name: 'run_command', arguments: { command:
      `ln -s /proc/${initB}/root rootB && ln -s /proc/${initB}/root/workspace/marker-b markerB && ` +
      `ln -s ${cellDirB} dirB && ln -s ${cellDirB}/init initB` } });
    assert.equal(plant.structuredContent.exit_code, 0, text(plant));
    const reads = ['markerB', 'rootB/workspace/marker-b', 'initB', `/proc/${initB}/root/workspace/marker-b`,
      `${cellDirB}/init`];
    for (const p of reads) {
      const r = await a.client.callTool({ name: 'read_file', arguments: { path: p } });
      assert.equal(r.isError, true, `A read ${p}: ${text(r)}`);
      assert.doesNotMatch(text(r), /B-MARKER/, p);
      assert.ok(!text(r).includes(recordB.trim()), `${p} showed B's init record`);
    }
    for (const p of ['rootB', 'rootB/workspace', 'dirB', `/proc/${initB}/root/workspace`, cellDirB]) {
      const r = await a.client.callTool({ name: 'list_files', arguments: { path: p } });
      assert.equal(r.isError, true, `A listed ${p}: ${text(r)}`);
      assert.doesNotMatch(text(r), /marker-b|owner/, p);
    }
  });
});
