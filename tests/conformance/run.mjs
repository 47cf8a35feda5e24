// Runs the official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
// package.json) over Streamable HTTP against:
//   1. mcpcell-conformance-server: every scenario of the active suite must pass;
//   2. mcpcell serve --http: every scenario that needs no fixture must pass (the list below).
// Usage: node run.mjs <bin dir>   (Node >= 22: use node_modules/.bin/node; see run.sh)
// Exits non-zero, naming the scenario, when one regresses.

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const binDir = process.argv[2] ?? path.resolve(here, '..', '..', 'build', 'bin');
const cli = path.join(here, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');

// Scenarios mcpcell must pass without the conformance fixtures.
const kMcpcellScenarios = ['server-initialize', 'ping', 'logging-set-level', 'tools-list',
  'dns-rebinding-protection', 'server-sse-multiple-streams'];

function start(bin, args) {
  const proc = spawn(path.join(binDir, bin), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${bin}: no URL in 20 s\n${stderr}`)), 20000);
    proc.stderr.on('data', (c) => {
      stderr += c;
      const m = /(http:\/\/\S+\/mcp)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1] });
      }
    });
    proc.on('exit', (code) => reject(new Error(`${bin} exited (${code}):\n${stderr}`)));
  });
}

// Runs the suite (or one scenario); returns {scenario: {passed, failed}} and the output.
function runSuite(url, scenario) {
  const args = [cli, 'server', '--url', url];
  if (scenario) args.push('--scenario', scenario);
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 600000 });
  const out = `${r.stdout}\n${r.stderr}`;
  const results = {};
  for (const m of out.matchAll(/^[✓✗]\s+(\S+):\s+(\d+) passed, (\d+) failed/gmu)) {
    results[m[1]] = { passed: Number(m[2]), failed: Number(m[3]) };
  }
  const single = /Passed: (\d+)\/(\d+), (\d+) failed/.exec(out);  // one-scenario output
  if (scenario && single) results[scenario] = { passed: Number(single[1]), failed: Number(single[3]) };
  return { results, out, status: r.status };
}

let failures = [];

{
  const s = await start('mcpcell-conformance-server', ['--http', '127.0.0.1:0']);
  const { results, out } = runSuite(s.url);
  // Outside the active suite of 0.1.16 but served by the fixtures: run it explicitly.
  for (const extra of ['json-schema-2020-12']) {
    const one = runSuite(s.url, extra);
    if (one.results[extra]) results[extra] = one.results[extra];
    else failures.push(`conformance server: ${extra} did not run:\n${one.out}`);
  }
  s.proc.kill('SIGTERM');
  const names = Object.keys(results);
  if (names.length < 20) failures.push(`conformance server: only ${names.length} scenarios ran:\n${out}`);
  for (const [name, r] of Object.entries(results)) {
    console.log(`conformance-server ${name}: ${r.passed} passed, ${r.failed} failed`);
    if (r.failed > 0 || r.passed === 0) failures.push(`conformance server: ${name} failed`);
  }
  if (failures.length) console.log(out);
}

{
  const stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-conformance-'));
  const s = await start('mcpcell', ['serve', '--http', '127.0.0.1:0', '--state-dir', stateDir]);
  try {
    for (const scenario of kMcpcellScenarios) {
      const { results, out } = runSuite(s.url, scenario);
      const r = results[scenario];
      console.log(`mcpcell ${scenario}: ${r ? `${r.passed} passed, ${r.failed} failed` : 'did not run'}`);
      if (!r || r.failed > 0 || r.passed === 0) failures.push(`mcpcell: ${scenario} failed:\n${out}`);
    }
  } finally {
    s.proc.kill('SIGTERM');
    await new Promise((res) => s.proc.on('exit', res));
    rmSync(stateDir, { recursive: true, force: true });
  }
}

if (failures.length) {
  console.error(`\nFAILED:\n${failures.join('\n')}`);
  process.exit(1);
}
console.log('\nall conformance scenarios passed');
