// Runs the pre-release MCP conformance suite (conformance-next in package.json:
// @modelcontextprotocol/conformance@0.2.0-alpha.12) with `server --requirements 2026-07-28`
// over Streamable HTTP against mcpcell-conformance-server, and counts the checks of the
// scenarios that revision scores (requirements/2026-07-28.yaml, `server:`). Fails when
// fewer than kScoredChecksFloor pass, or when a scored scenario did not run; prints every
// failing check (tests/conformance/README.md says why each one fails).
// Usage: node run_next.mjs <bin dir>   (Node >= 22: use node_modules/.bin/node; see run.sh)

import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// What the conformance server passes today (all of them); raise it with the suite.
const kScoredChecksFloor = 117;
// Not scored by the revision, but the conformance server serves them: every check of these
// must pass (the Tasks extension's scenarios, and json-schema-2020-12).
const kMustPass = [
  'tasks-lifecycle', 'tasks-capability-negotiation', 'tasks-wire-fields',
  'tasks-request-state-removal', 'tasks-mrtr-input', 'tasks-request-headers',
  'tasks-dispatch-and-envelope', 'tasks-required-task-error', 'tasks-mrtr-composition',
  'json-schema-2020-12',
];

const here = path.dirname(fileURLToPath(import.meta.url));
const binDir = process.argv[2] ?? path.resolve(here, '..', '..', 'build', 'bin');
const pkg = path.join(here, 'node_modules', 'conformance-next');
const cli = path.join(pkg, 'dist', 'index.js');

// The `server:` list of the requirements file (a YAML list of plain names).
function scoredScenarios() {
  const yaml = readFileSync(path.join(pkg, 'requirements', '2026-07-28.yaml'), 'utf8');
  const names = [];
  let inServer = false;
  for (const line of yaml.split('\n')) {
    if (/^\S/.test(line)) inServer = line.startsWith('server:');
    const m = /^\s+-\s+([\w/.-]+)\s*$/.exec(line);
    if (inServer && m) names.push(m[1]);
  }
  return names;
}

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

const scored = scoredScenarios();
const s = await start('mcpcell-conformance-server', ['--http', '127.0.0.1:0']);
const r = spawnSync(process.execPath,
  [cli, 'server', '--url', s.url, '--requirements', '2026-07-28'],
  { encoding: 'utf8', timeout: 900000, maxBuffer: 64 << 20 });
s.proc.kill('SIGTERM');
const out = `${r.stdout}\n${r.stderr}`;

// "✓ name: 3 passed, 1 failed[, 2 warnings]" per scenario; failing checks follow as
// "    - CheckName: message".
const results = {};
let current = null;
for (const line of out.split('\n')) {
  const m = /^[✓✗]\s+(\S+):\s+(\d+) passed, (\d+) failed(?:, (\d+) warnings)?/u.exec(line);
  if (m) {
    current = m[1];
    results[current] = { passed: +m[2], failed: +m[3], warnings: +(m[4] ?? 0), failing: [] };
    continue;
  }
  const f = /^\s+- (\S+): (.*)$/.exec(line);
  if (f && current) results[current].failing.push(`${f[1]}: ${f[2].slice(0, 200)}`);
}

let passed = 0;
let total = 0;
const problems = [];
for (const name of scored) {
  const res = results[name];
  if (!res) {
    problems.push(`scored scenario ${name} did not run`);
    continue;
  }
  passed += res.passed;
  total += res.passed + res.failed + res.warnings;
  console.log(`${name}: ${res.passed} passed, ${res.failed} failed, ${res.warnings} warnings`);
  for (const f of res.failing) console.log(`    - ${f}`);
}
console.log(`\nscored checks (2026-07-28 requirements): ${passed} of ${total} passed`);
for (const name of kMustPass) {
  const res = results[name];
  if (!res) {
    problems.push(`scenario ${name} did not run`);
    continue;
  }
  console.log(`${name} (not scored): ${res.passed} passed, ${res.failed} failed`);
  for (const f of res.failing) console.log(`    - ${f}`);
  if (res.failed > 0 || res.passed === 0) problems.push(`scenario ${name}: ${res.failed} failed`);
}
if (passed < kScoredChecksFloor) {
  problems.push(`only ${passed} scored checks passed; the floor is ${kScoredChecksFloor}`);
}
if (problems.length) {
  console.error(`\nFAILED:\n${problems.join('\n')}\n\n${out.slice(-20000)}`);
  process.exit(1);
}
