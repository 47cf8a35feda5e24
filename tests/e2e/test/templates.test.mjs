// Built templates (docs/templates.md) through `mcpcell template` and `mcpcell serve`, driven
// by the official MCP TypeScript SDK: a policy naming a template by its bare name is pinned
// to its latest version; the session's cell runs on that template's root (its os-release,
// not the host's /usr); session_info and the audit's session.start name the pinned
// NAME@VERSION; an unknown template is refused when the policy is loaded, listing what
// exists; a wheel baked in offline is imported by run_code; `template list|show|delete`
// and the --debian-suite refusals; a server with a warm pool gives cells of the template. The templates' rootfs are copies of a
// few of the host's binaries and their libraries (and of its python3.11 and pip).

import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync,
  symlinkSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { binary, connect, waitFor } from '../lib/harness.mjs';

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

function mcpcell(args) {
  return execFileSync(binary('mcpcell'), args, { encoding: 'utf8' });
}

// Copies `file` (symlinks resolved) to the same path under root; /lib* paths under root/usr.
function copyHostFile(file, root) {
  const dest = path.join(root, file.startsWith('/lib') ? '/usr' + file : file);
  mkdirSync(path.dirname(dest), { recursive: true });
  copyFileSync(realpathSync(file), dest);
  chmodSync(dest, 0o755);
}

function makeTinyRootfs(root, osRelease) {
  for (const bin of ['/usr/bin/dash', '/usr/bin/cat', '/usr/bin/ls']) {
    copyHostFile(bin, root);
    for (const word of execFileSync('ldd', [bin], { encoding: 'utf8' }).split(/\s+/)) {
      if (word.startsWith('/')) copyHostFile(word, root);
    }
  }
  symlinkSync('dash', path.join(root, 'usr/bin/sh'));
  for (const link of ['bin', 'lib', 'lib64']) symlinkSync(`usr/${link}`, path.join(root, link));
  mkdirSync(path.join(root, 'etc'), { recursive: true });
  writeFileSync(path.join(root, 'etc/os-release'), osRelease);
}

// The tiny rootfs plus the host's python3.11, its standard library (and the libraries its
// extension modules need) and pip.
function makePythonRootfs(root) {
  makeTinyRootfs(root, 'ID=tiny-python\n');
  for (const file of ['/usr/bin/python3.11',
    ...readdirSync('/usr/lib/python3.11/lib-dynload').map((f) => `/usr/lib/python3.11/lib-dynload/${f}`)]) {
    for (const word of execFileSync('ldd', [file], { encoding: 'utf8' }).split(/\s+/)) {
      if (word.startsWith('/') && existsSync(word)) copyHostFile(word, root);
    }
  }
  copyHostFile('/usr/bin/python3.11', root);
  symlinkSync('python3.11', path.join(root, 'usr/bin/python3'));
  cpSync('/usr/lib/python3.11', path.join(root, 'usr/lib/python3.11'), { recursive: true, verbatimSymlinks: true });
  cpSync('/usr/lib/python3/dist-packages/pip', path.join(root, 'usr/lib/python3/dist-packages/pip'),
    { recursive: true, verbatimSymlinks: true });
}

// A pure-Python wheel of mcpcell_e2e_baked (VALUE = value), written with the host's python.
function writeWheel(dir, value) {
  mkdirSync(dir, { recursive: true });
  const script = `
import sys, zipfile
info = "mcpcell_e2e_baked-1.0.dist-info/"
files = {
  "mcpcell_e2e_baked/__init__.py": "VALUE = %r\\n" % sys.argv[2],
  info + "METADATA": "Metadata-Version: 2.1\\nName: mcpcell-e2e-baked\\nVersion: 1.0\\n",
  info + "WHEEL": "Wheel-Version: 1.0\\nGenerator: e2e\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
files[info + "RECORD"] = "".join(n + ",,\\n" for n in list(files) + [info + "RECORD"])
with zipfile.ZipFile(sys.argv[1], "w") as z:
  for name, text in files.items():
    z.writestr(name, text)
`;
  execFileSync('/usr/bin/python3', ['-c', script, path.join(dir, 'mcpcell_e2e_baked-1.0-py3-none-any.whl'), value]);
}

describe('built templates under mcpcell serve', () => {
  let dir;
  let stateDir;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-tmpl-e2e-'));
    chmodSync(dir, 0o755);  // the cells' uids must reach the state dir inside
    stateDir = path.join(dir, 'state');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('pins a bare name to the latest version; the cell, session_info and the audit use it', async () => {
    const src = path.join(dir, 'src');
    makeTinyRootfs(src, 'ID=tiny-e2e\nVERSION_ID=1\n');
    const first = JSON.parse(mcpcell(['template', 'build', 'tiny', '--from', src, '--state-dir', stateDir]));
    assert.equal(first.ref, 'tiny@1');
    writeFileSync(path.join(src, 'etc/os-release'), 'ID=tiny-e2e\nVERSION_ID=2\n');
    const second = JSON.parse(mcpcell(['template', 'build', 'tiny', '--from', src, '--state-dir', stateDir]));
    assert.equal(second.ref, 'tiny@2');
    assert.notEqual(second.digest, first.digest);

    const policyFile = path.join(dir, 'tiny.toml');
    writeFileSync(policyFile, 'name = "on-tiny"\n\n[filesystem]\ntemplate = "tiny"\n');
    assert.match(mcpcell(['policy', 'show', policyFile, '--state-dir', stateDir]), /template = "tiny@2"/);

    const s = await connect({
      binaryName: 'mcpcell',
      args: ['serve', '--state-dir', stateDir, '--policy', policyFile, '--warm-cells', '0'],
    });
    const pid = s.transport.pid;
    try {
      const run = await s.client.callTool({
        name: 'run_command',
        arguments: { command: 'cat /etc/os-release; ls /usr/bin' },
      });
      assert.notEqual(run.isError, true, text(run));
      assert.match(text(run), /VERSION_ID=2/);
      assert.doesNotMatch(text(run), /python3/, 'the host\'s /usr is not in the cell');
      const info = await s.client.callTool({ name: 'session_info', arguments: {} });
      assert.equal(info.structuredContent.template, 'tiny@2');
      assert.match(text(info), /template tiny@2/);
    } finally {
      await s.close();
      await waitFor(() => {
        try {
          process.kill(pid, 0);
          return false;
        } catch {
          return true;
        }
      }, { timeoutMs: 30000, what: 'the server to exit' });
    }
    const records = mcpcell(['audit', 'query', '--state-dir', stateDir, '--type', 'session.start'])
      .split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
    assert.equal(records.length, 1, JSON.stringify(records));
    assert.equal(records[0].template, 'tiny@2');
  });

  it('lists, shows and deletes versions; a warm pool keeps cells of the policy\'s template', async () => {
    const cli = (...args) => spawnSync(binary('mcpcell'), ['template', ...args, '--state-dir', stateDir],
      { encoding: 'utf8' });
    const listed = cli('list');
    assert.equal(listed.status, 0, listed.stderr);
    assert.match(listed.stdout, /^TEMPLATE +CREATED +FILES +DIGEST +SOURCE$/m);
    assert.match(listed.stdout, /^tiny@1 /m);
    assert.match(listed.stdout, /^tiny@2 /m);
    const shown = JSON.parse(cli('show', 'tiny').stdout);
    assert.equal(shown.ref, 'tiny@2');
    assert.match(shown.source, /^from:/);
    assert.equal(JSON.parse(cli('show', 'tiny@1').stdout).ref, 'tiny@1');

    const bare = cli('delete', 'tiny');
    assert.equal(bare.status, 2);
    assert.match(bare.stderr, /delete needs NAME@VERSION, not the bare name "tiny"/);
    const deleted = cli('delete', 'tiny@1');
    assert.equal(deleted.status, 0, deleted.stderr);
    assert.doesNotMatch(cli('list').stdout, /^tiny@1 /m);
    assert.match(cli('list').stdout, /^tiny@2 /m);
    const gone = cli('show', 'tiny@1');
    assert.equal(gone.status, 2);
    assert.match(gone.stderr, /template "tiny" has no version 1; versions: 2/);

    const both = cli('build', 'deb', '--from', path.join(dir, 'src'), '--debian-suite', 'bookworm');
    assert.equal(both.status, 2);
    assert.match(both.stderr, /give exactly one of --from and --debian-suite/);
    const badSuite = cli('build', 'deb', '--debian-suite', 'Book worm');
    assert.equal(badSuite.status, 2);
    assert.match(badSuite.stderr, /--debian-suite "Book worm": not a suite name like bookworm/);
    assert.doesNotMatch(cli('list').stdout, /^deb@/m);

    // The pool makes its cells from the policy's template: the first call gets a pool cell
    // and sees tiny@2's files, not the host's.
    const policyFile = path.join(dir, 'tiny-warm.toml');
    writeFileSync(policyFile, 'name = "on-tiny-warm"\n\n[filesystem]\ntemplate = "tiny"\n');
    const s = await connect({
      binaryName: 'mcpcell',
      args: ['serve', '--state-dir', stateDir, '--policy', policyFile, '--warm-cells', '1'],
    });
    try {
      const run = await s.client.callTool({
        name: 'run_command',
        arguments: { command: 'cat /etc/os-release; ls /usr/bin' },
      });
      assert.notEqual(run.isError, true, text(run));
      assert.match(text(run), /VERSION_ID=2/);
      assert.doesNotMatch(text(run), /python3/);
      const info = await s.client.callTool({ name: 'session_info', arguments: {} });
      assert.equal(info.structuredContent.template, 'tiny@2');
    } finally {
      await s.close();
    }
  });

  it('bakes a wheel in offline with --pip-wheels; run_code imports it in a cell of the template', async (t) => {
    if (!existsSync('/usr/bin/python3.11') || !existsSync('/usr/lib/python3/dist-packages/pip')) {
      t.skip('needs Debian\'s python3.11 and python3-pip on the host to copy');
      return;
    }
    const src = path.join(dir, 'pysrc');
    makePythonRootfs(src);
    writeWheel(path.join(dir, 'wheels'), 'baked-e2e');
    writeFileSync(path.join(dir, 'req.txt'), 'mcpcell-e2e-baked==1.0\n');
    const built = JSON.parse(mcpcell(['template', 'build', 'py', '--from', src, '--state-dir', stateDir,
      '--pip-wheels', path.join(dir, 'wheels'), '--pip-requirements', path.join(dir, 'req.txt')]));
    assert.equal(built.ref, 'py@1');
    assert.deepEqual(built.packages, ['pip: req.txt from 1 wheels']);

    const policyFile = path.join(dir, 'py.toml');
    writeFileSync(policyFile, 'name = "on-py"\n\n[filesystem]\ntemplate = "py@1"\n');
    const s = await connect({
      binaryName: 'mcpcell',
      args: ['serve', '--state-dir', stateDir, '--policy', policyFile, '--warm-cells', '0'],
    });
    try {
      const run = await s.client.callTool({
        name: 'run_code',
        arguments: { language: 'python', code: 'import mcpcell_e2e_baked as m, sys\nprint(m.VALUE, sys.version_info[:2])' },
      });
      assert.notEqual(run.isError, true, text(run));
      assert.match(text(run), /baked-e2e \(3, 11\)/);
    } finally {
      await s.close();
    }
  });

  it('refuses an unknown template when the policy is loaded, listing the known ones', () => {
    const policyFile = path.join(dir, 'nope.toml');
    writeFileSync(policyFile, '[filesystem]\ntemplate = "nope"\n');
    const r = spawnSync(binary('mcpcell'), ['policy', 'check', policyFile, '--state-dir', stateDir],
      { encoding: 'utf8' });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr + r.stdout, /filesystem\.template: no template "nope".*known: "host", (?:"py", )?"tiny"/s);
  });
});
