// pip_install and npm_install under governance (docs/packages.md), driven over stdio by the
// official MCP TypeScript SDK against `mcpcell serve`, every install in a real cell whose
// pip and npm reach the server's package service only through the cell's egress proxy.
//
// The upstream registries are the test's own (lib/registries.mjs): real wheels and an sdist
// built here with Debian's python3, npm tarballs made with tar, served on 127.0.0.1 by
// static servers that record every request. Covered: install, then import/require in a
// later call; a dependency pulled; run_command's own pip going through the service; the
// cache shared with the next session (the upstream sees each artifact once); a denied
// package refused before any request for it; an sdist-only package refused by default; a
// tampered artifact refused and audited; the audit record's fields; offline mode from a
// wheelhouse with no upstream at all; disabled mode; npm scripts not run; bad input. Over
// HTTP, two tenants on one server: each gets its own package policy (in the tools and in
// the service, which learns the tenant from the proxy), and they share one cache.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { binary, connect } from '../lib/harness.mjs';
import { connectHttp, startHttpServer } from './http_util.mjs';
import {
  buildNpmTarball, buildSdist, buildWheel, sha256, startNpmRegistry, startPypiIndex,
} from '../lib/registries.mjs';

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

function policyToml({ name, mode, registries = '"pypi", "npm"', pypiIndex = '', npmRegistry = '',
  wheelhouse = '', extra = '' }) {
  return `name = "${name}"
description = "e2e: packages ${mode}"

[time]
exec_max = "5m"

[packages]
mode = "${mode}"
registries = [${registries}]
${pypiIndex ? `pypi_index = "${pypiIndex}"` : ''}
${npmRegistry ? `npm_registry = "${npmRegistry}"` : ''}
${wheelhouse ? `wheelhouse = "${wheelhouse}"` : ''}
allow = ["pypi:tiny*", "pypi:evil*"${registries.includes('npm') ? ', "npm:tiny*"' : ''}]
deny = ["pypi:evil*"]
${extra}
`;
}

async function startServer(stateDir, policyFile) {
  return connect({
    binaryName: 'mcpcell',
    args: ['serve', '--state-dir', stateDir, '--policy', policyFile, '--warm-cells', '0'],
  });
}

// The package service's records in the audit trail (package.<result>), as
// `mcpcell audit query` prints them.
function auditRecords(stateDir, type = 'package.') {
  const out = execFileSync(binary('mcpcell'),
    ['audit', 'query', '--state-dir', stateDir, '--type', type], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
}
// Every artifact, built once for the whole file (building takes seconds) into its own
// directory, removed at the end.
let fixtureDir;
let fixtureCache;
function fixtures() {
  if (!fixtureCache) {
    fixtureDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-pkg-fixtures-'));
    fixtureCache = buildFixtures(fixtureDir);
  }
  return fixtureCache;
}
after(() => {
  if (fixtureDir) rmSync(fixtureDir, { recursive: true, force: true });
});

function buildFixtures(dir) {
  const wheels = path.join(dir, 'wheels');
  const sdists = path.join(dir, 'sdists');
  const f = {};
  const wheel = (project) => {
    const filename = buildWheel(dir, wheels, project);
    return { name: project.name, filename, bytes: readFileSync(path.join(wheels, filename)) };
  };
  f.alpha = wheel({ name: 'tinyalpha', version: '1.0', value: 'alpha-1', requires: ['tinybeta>=1'] });
  f.beta = wheel({ name: 'tinybeta', version: '1.2', value: 'beta-1.2' });
  f.gamma = wheel({ name: 'tinygamma', version: '0.3', value: 'gamma' });
  f.delta1 = wheel({ name: 'tinydelta', version: '1.0', value: 'delta-1' });
  f.delta2 = wheel({ name: 'tinydelta', version: '2.0', value: 'delta-2' });
  f.evil = wheel({ name: 'evilpkg', version: '6.6.6', value: 'evil' });
  f.tamper = wheel({ name: 'tinytamper', version: '1.0', value: 'tamper' });
  // The upstream promises the real wheel's hash and serves other bytes.
  f.tamper.served = Buffer.concat([f.tamper.bytes, Buffer.from('appended by a man in the middle')]);
  const sdistName = buildSdist(dir, sdists, { name: 'tinysdist', version: '1.0', value: 's' });
  f.sdist = { name: 'tinysdist', filename: sdistName, bytes: readFileSync(path.join(sdists, sdistName)) };
  f.wheelsDir = wheels;
  f.npm = {
    name: 'tinynpm', version: '1.0.0',
    bytes: buildNpmTarball(dir, { name: 'tinynpm', version: '1.0.0',
      files: { 'index.js': 'module.exports = { answer: 42 };\n' } }),
  };
  const scripts = { postinstall: 'touch /workspace/postinstall-ran' };
  f.npmScript = {
    name: 'tinyscript', version: '2.0.0', hasInstallScript: true, scripts,
    bytes: buildNpmTarball(dir, { name: 'tinyscript', version: '2.0.0', scripts,
      files: { 'index.js': 'module.exports = "scripted";\n' } }),
  };
  return f;
}

describe('package tools: online through the server\'s cache', () => {
  let dir;
  let stateDir;
  let fx;
  let pypi;
  let npm;
  let policyFile;
  let s;
  const call = (name, args) => s.client.callTool({ name, arguments: args }, undefined,
    { timeout: 300000 });
  const fileRequests = (filename) => pypi.log.filter((l) => l === `GET /files/${filename}`).length;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-pkg-e2e-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-pkg-state-'));
    fx = fixtures();
    pypi = await startPypiIndex([fx.alpha, fx.beta, fx.gamma, fx.evil, fx.tamper, fx.sdist,
      fx.delta1, fx.delta2]);
    npm = await startNpmRegistry([fx.npm, fx.npmScript]);
    policyFile = path.join(dir, 'online.toml');
    writeFileSync(policyFile, policyToml({ name: 'pkg-online', mode: 'online',
      pypiIndex: pypi.url, npmRegistry: npm.url }));
    s = await startServer(stateDir, policyFile);
  });
  after(async () => {
    await s?.close();
    await pypi?.close();
    await npm?.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('lists pip_install and npm_install with their schemas; session_info shows the mode', async () => {
    const { tools } = await s.client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    for (const name of ['pip_install', 'npm_install']) {
      assert.ok(byName[name], `missing ${name}`);
      assert.equal(byName[name].inputSchema.properties.packages.type, 'array');
      assert.deepEqual(byName[name].outputSchema.required, ['installed', 'refused', 'exit_code', 'output']);
    }
    const info = await call('session_info', {});
    assert.match(info.structuredContent.packages, /^online/);
    assert.ok(info.structuredContent.packages.includes(pypi.url), info.structuredContent.packages);
  });

  it('pip_install installs a package and its dependency; a later run_code imports both', async () => {
    const r = await call('pip_install', { packages: ['tinyalpha'] });
    assert.equal(r.isError ?? false, false, text(r));
    const installed = Object.fromEntries(r.structuredContent.installed.map((p) => [p.name, p]));
    assert.equal(installed.tinyalpha?.version, '1.0', text(r));
    assert.equal(installed.tinybeta?.version, '1.2', 'the dependency is pulled: ' + text(r));
    assert.equal(installed.tinyalpha.sha256, sha256(fx.alpha.bytes));
    assert.equal(installed.tinybeta.sha256, sha256(fx.beta.bytes));
    assert.match(installed.tinyalpha.source, /^http:\/\/packages\.mcpcell\.internal\/pypi\/files\//);
    assert.equal(r.structuredContent.exit_code, 0);
    assert.deepEqual(r.structuredContent.refused, []);
    assert.match(text(r), /installed 2 packages/);
    // A later call, no flag: python3 on PATH is the session's venv.
    const imp = await call('run_code', { language: 'python',
      code: 'import tinyalpha, tinybeta, sys; print(tinyalpha.VALUE, tinybeta.VALUE, sys.prefix)' });
    assert.equal(imp.structuredContent.stdout, 'alpha-1 beta-1.2 /workspace/.venv\n', text(imp));
    // The template's own packages stay visible (--system-site-packages).
    const sys = await call('run_code', { language: 'python', code: 'import pip; print("ok")' });
    assert.equal(sys.structuredContent.stdout, 'ok\n', text(sys));
    assert.equal(fileRequests(fx.alpha.filename), 1);
    assert.equal(fileRequests(fx.beta.filename), 1);
  });

  it('installing again is not an error and installs nothing new', async () => {
    const r = await call('pip_install', { packages: ['tinyalpha==1.0'] });
    assert.equal(r.isError ?? false, false, text(r));
    assert.deepEqual(r.structuredContent.installed, []);
    assert.match(text(r), /nothing new to install/);
  });

  it('upgrade: true moves an installed package to the newest version; without it nothing changes', async () => {
    const old = await call('pip_install', { packages: ['tinydelta==1.0'] });
    assert.deepEqual(old.structuredContent.installed.map((p) => `${p.name} ${p.version}`), ['tinydelta 1.0'], text(old));
    const same = await call('pip_install', { packages: ['tinydelta'] });
    assert.deepEqual(same.structuredContent.installed, [], text(same));
    const up = await call('pip_install', { packages: ['tinydelta'], upgrade: true });
    assert.equal(up.isError ?? false, false, text(up));
    assert.deepEqual(up.structuredContent.installed.map((p) => `${p.name} ${p.version}`), ['tinydelta 2.0'], text(up));
    const imp = await call('run_code', { language: 'python', code: 'import tinydelta; print(tinydelta.VALUE)' });
    assert.equal(imp.structuredContent.stdout, 'delta-2\n', text(imp));
  });

  it('run_command "pip install" goes through the same service and rules', async () => {
    const ok = await call('run_command', { command: 'pip install -q tinygamma && python3 -c "import tinygamma; print(tinygamma.VALUE)"' });
    assert.equal(ok.structuredContent.exit_code, 0, text(ok));
    assert.match(ok.structuredContent.stdout, /^gamma$/m);
    assert.equal(fileRequests(fx.gamma.filename), 1, 'fetched by the service from the upstream');
    const env = await call('run_command', { command: 'echo "$PIP_INDEX_URL $PIP_ONLY_BINARY $npm_config_registry $npm_config_ignore_scripts $NODE_PATH"' });
    assert.equal(env.structuredContent.stdout,
      'http://packages.mcpcell.internal/pypi/simple/ :all: http://packages.mcpcell.internal/npm/ true /workspace/node_modules\n');
    const denied = await call('run_command', { command: 'pip install evilpkg' });
    assert.notEqual(denied.structuredContent.exit_code, 0, text(denied));
    assert.ok((denied.structuredContent.egress_refusals ?? []).some((l) => /pypi:evil\*/.test(l)),
      'the service\'s refusal is shown in the call: ' + text(denied));
    assert.equal(pypi.log.filter((l) => l.includes('evilpkg')).length, 0, pypi.log.join('\n'));
  });

  it('a denied package is refused before anything is downloaded, naming the rule', async () => {
    const before = pypi.log.length;
    const r = await call('pip_install', { packages: ['tinygamma', 'evilpkg==6.6.6'] });
    assert.equal(r.isError, true, text(r));
    assert.deepEqual(r.structuredContent.installed, []);
    assert.equal(r.structuredContent.refused.length, 1, text(r));
    assert.equal(r.structuredContent.refused[0].package, 'evilpkg==6.6.6');
    assert.match(r.structuredContent.refused[0].reason, /packages\.deny rule "pypi:evil\*"/);
    assert.match(text(r), /nothing was installed/);
    assert.equal(pypi.log.length, before, 'no upstream request at all: ' + pypi.log.slice(before).join(', '));
    const notAllowed = await call('pip_install', { packages: ['requests'] });
    assert.equal(notAllowed.isError, true);
    assert.match(notAllowed.structuredContent.refused[0].reason, /packages\.allow/);
    // Each refusal is a policy.refused record naming the call, the policy and the packages.
    const refusals = auditRecords(stateDir, 'policy.refused')
      .filter((r) => r.call === 'tools/call pip_install');
    assert.deepEqual(refusals.map((r) => r.refused.map((x) => x.package)),
      [['evilpkg==6.6.6'], ['requests']], JSON.stringify(refusals));
    for (const r of refusals) assert.match(r.rule, /^packages of policy /);
  });

  it('an sdist-only package is refused by default, saying why', async () => {
    const r = await call('pip_install', { packages: ['tinysdist'] });
    assert.equal(r.isError, true, text(r));
    assert.deepEqual(r.structuredContent.installed, []);
    assert.notEqual(r.structuredContent.exit_code, 0);
    assert.ok(r.structuredContent.refused.some((x) => x.package === 'tinysdist' &&
      /sdist/.test(x.reason) && /allow_sdist/.test(x.reason)), text(r));
    assert.equal(pypi.log.filter((l) => l.startsWith('GET /files/tinysdist')).length, 0,
      'the sdist itself is never downloaded');
  });

  it('a tampered artifact (bytes not matching the index\'s sha256) is refused and audited', async () => {
    const r = await call('pip_install', { packages: ['tinytamper'] });
    assert.equal(r.isError, true, text(r));
    assert.deepEqual(r.structuredContent.installed, []);
    assert.ok(r.structuredContent.refused.some((x) => x.package === 'tinytamper' &&
      /hash mismatch/.test(x.reason) && x.reason.includes(sha256(fx.tamper.served))), text(r));
    const imp = await call('run_code', { language: 'python', code: 'import tinytamper' });
    assert.notEqual(imp.structuredContent.exit_code, 0, 'nothing of it was installed');
    const audit = auditRecords(stateDir).filter((a) => a.package === 'tinytamper');
    assert.ok(audit.some((a) => a.result === 'hash_mismatch'), JSON.stringify(audit));
    // Not cached: a retry goes to the upstream again (and fails again).
    const again = await call('pip_install', { packages: ['tinytamper'] });
    assert.equal(again.isError, true);
    assert.equal(fileRequests(fx.tamper.filename), 2);
  });

  it('every install is recorded in the audit trail (package.served)', async () => {
    const served = auditRecords(stateDir).filter((a) => a.filename === fx.alpha.filename && a.result === 'served');
    assert.ok(served.length >= 1, JSON.stringify(auditRecords(stateDir)));
    const a = served[0];
    assert.equal(a.registry, 'pypi');
    assert.equal(a.version, '1.0');
    assert.equal(a.filename, fx.alpha.filename);
    assert.equal(a.digest, `sha256:${sha256(fx.alpha.bytes)}`);
    assert.match(a.source, new RegExp(`^upstream ${pypi.url.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&').replace('simple\\/', '')}`));
    assert.equal(typeof a.session, 'string');
    assert.ok(a.session.length > 0);
    assert.equal(a.tenant, '');
    assert.match(a.time, /^\d{4}-\d\d-\d\dT/);
    assert.equal(a.type, 'package.served');
    const denied = auditRecords(stateDir).filter((a) => a.package === 'evilpkg');
    assert.ok(denied.some((x) => x.result === 'refused'), 'run_command\'s denied pip is audited too');
  });

  it('npm_install installs from the registry; a later run_code requires it; scripts do not run', async () => {
    const r = await call('npm_install', { packages: ['tinynpm@1.0.0', 'tinyscript'] });
    assert.equal(r.isError ?? false, false, text(r));
    const installed = Object.fromEntries(r.structuredContent.installed.map((p) => [p.name, p]));
    assert.equal(installed.tinynpm?.version, '1.0.0', text(r));
    assert.equal(installed.tinyscript?.version, '2.0.0', text(r));
    assert.match(installed.tinynpm.integrity, /^sha512-/);
    const req = await call('run_code', { language: 'node',
      code: 'console.log(require("tinynpm").answer, require("tinyscript"))' });
    assert.equal(req.structuredContent.stdout, '42 scripted\n', text(req));
    // From another directory too (NODE_PATH).
    const elsewhere = await call('run_command', { command: 'cd /tmp && node -e \'console.log(require("tinynpm").answer)\'' });
    assert.equal(elsewhere.structuredContent.stdout, '42\n', text(elsewhere));
    const ran = await call('run_command', { command: 'test -e /workspace/postinstall-ran && echo ran || echo not-run' });
    assert.equal(ran.structuredContent.stdout, 'not-run\n', 'the postinstall script must not run');
    const tarballs = npm.log.filter((l) => l.endsWith('.tgz'));
    assert.deepEqual(tarballs.sort(), ['GET /tinynpm/-/tinynpm-1.0.0.tgz', 'GET /tinyscript/-/tinyscript-2.0.0.tgz']);
  });

  it('bad input names the entry and installs nothing', async () => {
    const cases = [
      [{ packages: [] }, /packages/],
      [{ packages: ['tinyalpha', 'tiny beta ==='] }, /arguments\.packages\[1\]/],
      [{ packages: ['--index-url=http://evil/'] }, /arguments\.packages\[0\].*options are not accepted/],
      [{ packages: ['tinyalpha @ http://127.0.0.1:1/x.whl'] }, /arguments\.packages\[0\]/],
      [{ packages: 'tinyalpha' }, /packages/],
      [{ packages: ['tinyalpha'], colour: 'red' }, /colour/],
    ];
    for (const [args, re] of cases) {
      const r = await call('pip_install', args);
      assert.equal(r.isError, true, JSON.stringify(args));
      assert.match(text(r), re, JSON.stringify(args));
    }
    const npmBad = await call('npm_install', { packages: ['git+https://example.com/x.git'] });
    assert.equal(npmBad.isError, true);
    assert.match(text(npmBad), /arguments\.packages\[0\]/);
  });

  it('the next session gets the artifacts from the cache: the upstream sees no second download', async () => {
    await s.close();
    s = await startServer(stateDir, policyFile);
    const r = await call('pip_install', { packages: ['tinyalpha'] });
    assert.equal(r.isError ?? false, false, text(r));
    assert.deepEqual(r.structuredContent.installed.map((p) => p.name).sort(), ['tinyalpha', 'tinybeta']);
    assert.equal(fileRequests(fx.alpha.filename), 1, pypi.log.join('\n'));
    assert.equal(fileRequests(fx.beta.filename), 1, pypi.log.join('\n'));
    const cached = auditRecords(stateDir).filter((a) => a.filename === fx.alpha.filename && a.source === 'cache');
    assert.ok(cached.length >= 1, 'the audit says it came from the cache');
    // Two installs at once into the fresh node_modules: each reports just its own package
    // (they take turns: InstallRun::WaitForOtherInstalls).
    const [n, sc] = await Promise.all([call('npm_install', { packages: ['tinynpm'] }),
      call('npm_install', { packages: ['tinyscript'] })]);
    assert.equal(n.isError ?? false, false, text(n));
    assert.equal(sc.isError ?? false, false, text(sc));
    assert.deepEqual(n.structuredContent.installed.map((p) => p.name), ['tinynpm'], text(n));
    assert.deepEqual(sc.structuredContent.installed.map((p) => p.name), ['tinyscript'], text(sc));
    assert.equal(npm.log.filter((l) => l === 'GET /tinynpm/-/tinynpm-1.0.0.tgz').length, 1);
  });
});

describe('package tools: offline from a wheelhouse, and disabled', () => {
  let dir;
  let stateDir;
  let fx;
  let s;
  const call = (name, args) => s.client.callTool({ name, arguments: args }, undefined,
    { timeout: 300000 });

  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-pkg-off-e2e-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-pkg-off-state-'));
    fx = fixtures();
  });
  after(async () => {
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('offline: installs from the wheelhouse with no upstream running at all', async () => {
    const policyFile = path.join(dir, 'offline.toml');
    // An index URL nobody listens on: offline mode must never try it.
    // Offline npm is not served (docs/packages.md#limits): pypi only.
    writeFileSync(policyFile, policyToml({ name: 'pkg-offline', mode: 'offline', registries: '"pypi"',
      pypiIndex: 'http://127.0.0.1:9/simple/', wheelhouse: fx.wheelsDir }));
    s = await startServer(stateDir, policyFile);
    // Two calls at once in a fresh session: both make the venv, both install.
    const [r, g] = await Promise.all([call('pip_install', { packages: ['tinyalpha'] }),
      call('pip_install', { packages: ['tinygamma'] })]);
    assert.equal(r.isError ?? false, false, text(r));
    assert.equal(g.isError ?? false, false, text(g));
    const names = r.structuredContent.installed.map((p) => p.name).sort();
    assert.deepEqual(names, ['tinyalpha', 'tinybeta']);
    assert.deepEqual(g.structuredContent.installed.map((p) => p.name), ['tinygamma']);
    const imp = await call('run_code', { language: 'python', code: 'import tinyalpha; print(tinyalpha.VALUE)' });
    assert.equal(imp.structuredContent.stdout, 'alpha-1\n', text(imp));
    const audit = auditRecords(stateDir).filter((a) => a.filename === fx.alpha.filename);
    assert.ok(audit.some((a) => a.source === 'wheelhouse' && a.result === 'served' &&
      a.digest === `sha256:${sha256(fx.alpha.bytes)}`), JSON.stringify(audit));
    const denied = await call('pip_install', { packages: ['evilpkg'] });
    assert.equal(denied.isError, true);
    assert.match(denied.structuredContent.refused[0].reason, /pypi:evil\*/);
    await s.close();
    s = undefined;
  });

  it('disabled: both tools refuse, naming the policy and the key', async () => {
    const policyFile = path.join(dir, 'disabled.toml');
    writeFileSync(policyFile, policyToml({ name: 'pkg-off', mode: 'disabled' }));
    // The offline test's server, if it failed before closing it: a server left running
    // keeps node from exiting, and the suite would hang instead of failing.
    await s?.close();
    s = await startServer(stateDir, policyFile);
    for (const tool of ['pip_install', 'npm_install']) {
      const r = await call(tool, { packages: ['tinyalpha'] });
      assert.equal(r.isError, true, tool);
      assert.match(text(r), /packages are disabled by policy pkg-off \(packages\.mode = "disabled"\)/);
    }
    const env = await call('run_command', { command: 'echo "[$PIP_INDEX_URL][$NODE_PATH]"; echo "$PATH"' });
    const [vars, pathVar] = env.structuredContent.stdout.split('\n');
    assert.equal(vars, '[][]', 'no package service, no index setting');
    assert.ok(!pathVar.includes('/workspace'), pathVar);
    const info = await call('session_info', {});
    assert.match(info.structuredContent.packages, /^disabled/);
  });
});

describe('package tools over HTTP: two tenants, their own rules, one cache', () => {
  const kAlice = 'alice-token-packages-0001';
  const kBob = 'bob-token-packages-0002';
  const hex = (t) => createHash('sha256').update(t).digest('hex');
  let dir;
  let stateDir;
  let fx;
  let pypi;
  let npm;
  let server;
  let alice;
  let bob;
  const call = (who, name, args) => who.client.callTool({ name, arguments: args }, undefined,
    { timeout: 300000 });
  const fileRequests = (filename) => pypi.log.filter((l) => l === `GET /files/${filename}`).length;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-pkg-http-e2e-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-pkg-http-state-'));
    fx = fixtures();
    pypi = await startPypiIndex([fx.alpha, fx.beta, fx.evil]);
    npm = await startNpmRegistry([fx.npm, fx.npmScript]);
    const alicePolicy = path.join(dir, 'alice.toml');
    writeFileSync(alicePolicy, policyToml({ name: 'alice-pkgs', mode: 'online',
      pypiIndex: pypi.url, npmRegistry: npm.url }));
    const bobPolicy = path.join(dir, 'bob.toml');
    writeFileSync(bobPolicy, policyToml({ name: 'bob-pkgs', mode: 'online', pypiIndex: pypi.url,
      npmRegistry: npm.url, extra: 'allow_install_scripts = true' })
      .replace('deny = ["pypi:evil*"]', 'deny = ["pypi:evil*", "pypi:tinyalpha"]'));
    const config = path.join(dir, 'http.toml');
    writeFileSync(config, `
[[tenant]]
name = "alice"
token_sha256 = ["${hex(kAlice)}"]
policy = "${alicePolicy}"

[[tenant]]
name = "bob"
token_sha256 = ["${hex(kBob)}"]
policy = "${bobPolicy}"
`);
    server = await startHttpServer('mcpcell', ['serve', '--http', '127.0.0.1:0', '--http-config',
      config, '--state-dir', stateDir, '--warm-cells', '0']);
    alice = await connectHttp(server.url, { token: kAlice });
    bob = await connectHttp(server.url, { token: kBob });
  });
  after(async () => {
    for (const who of [alice, bob]) {
      await who?.transport.terminateSession().catch(() => {});
      await who?.client.close();
    }
    const code = await server?.stop();
    await pypi?.close();
    await npm?.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
    assert.equal(code, 0, `server exit code; stderr:\n${server?.stderr()}`);
  });

  it('alice installs; bob gets the shared dependency from the cache, under his own tenant', async () => {
    const a = await call(alice, 'pip_install', { packages: ['tinyalpha'] });
    assert.equal(a.isError ?? false, false, text(a));
    assert.deepEqual(a.structuredContent.installed.map((p) => p.name).sort(), ['tinyalpha', 'tinybeta']);
    const b = await call(bob, 'pip_install', { packages: ['tinybeta'] });
    assert.equal(b.isError ?? false, false, text(b));
    assert.deepEqual(b.structuredContent.installed.map((p) => p.name), ['tinybeta']);
    assert.equal(fileRequests(fx.beta.filename), 1, 'one upstream download for both tenants');
    const audit = auditRecords(stateDir).filter((x) => x.filename === fx.beta.filename);
    assert.ok(audit.some((x) => x.tenant === 'alice' && x.source.startsWith('upstream ')), JSON.stringify(audit));
    assert.ok(audit.some((x) => x.tenant === 'bob' && x.source === 'cache'), JSON.stringify(audit));
  });

  it('bob\'s policy denies what alice\'s allows, in the tool and in the service', async () => {
    const r = await call(bob, 'pip_install', { packages: ['tinyalpha'] });
    assert.equal(r.isError, true, text(r));
    assert.match(r.structuredContent.refused[0].reason, /"pypi:tinyalpha"/);
    // bob's own pip, around the tool: the service applies bob's policy too.
    const shell = await call(bob, 'run_command', { command: 'pip install tinyalpha' });
    assert.notEqual(shell.structuredContent.exit_code, 0, text(shell));
    assert.ok((shell.structuredContent.egress_refusals ?? []).some((l) => /pypi:tinyalpha/.test(l)),
      text(shell));
    const imp = await call(bob, 'run_code', { language: 'python', code: 'import tinyalpha' });
    assert.notEqual(imp.structuredContent.exit_code, 0);
    // alice's session is unaffected and still has it.
    const ok = await call(alice, 'run_code', { language: 'python', code: 'import tinyalpha; print(tinyalpha.VALUE)' });
    assert.equal(ok.structuredContent.stdout, 'alpha-1\n', text(ok));
  });

  it('install scripts run only where the policy allows them', async () => {
    const b = await call(bob, 'npm_install', { packages: ['tinyscript'] });
    assert.equal(b.isError ?? false, false, text(b));
    const ranBob = await call(bob, 'run_command', { command: 'test -e /workspace/postinstall-ran && echo ran || echo not-run' });
    assert.equal(ranBob.structuredContent.stdout, 'ran\n', 'bob\'s policy allows install scripts');
    const a = await call(alice, 'npm_install', { packages: ['tinyscript'] });
    assert.equal(a.isError ?? false, false, text(a));
    const ranAlice = await call(alice, 'run_command', { command: 'test -e /workspace/postinstall-ran && echo ran || echo not-run' });
    assert.equal(ranAlice.structuredContent.stdout, 'not-run\n');
    assert.equal(npm.log.filter((l) => l === 'GET /tinyscript/-/tinyscript-2.0.0.tgz').length, 1,
      'the tarball came from the cache the second time');
  });
});
