// One path from a policy to a cell: for each shipped profile, the cell spec that
// `mcpcell policy check` prints (environment and mounts) is what a cell of `mcpcell serve
// --policy` really gets, seen from inside the cell.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';

import { binDir, connect } from '../lib/harness.mjs';

// Variables the program's shell sets itself: not part of any spec.
const kShellSet = new Set(['PWD']);

// The "  env: A=1 B=2" and "  mount: SRC -> DST (...)" lines of `policy check`.
function printedSpec(profile, stateDir) {
  const out = execFileSync(path.join(binDir(), 'mcpcell'), ['policy', 'check', profile, '--state-dir', stateDir],
    { encoding: 'utf8' });
  const envLine = out.split('\n').find((l) => l.startsWith('  env:'));
  assert.ok(envLine, `no env line in:\n${out}`);
  const env = new Map();
  for (const word of envLine.slice('  env:'.length).trim().split(' ')) {
    const eq = word.indexOf('=');
    env.set(word.slice(0, eq), word.slice(eq + 1));
  }
  const mounts = out.split('\n').filter((l) => l.startsWith('  mount: '))
    .map((l) => /-> (\S+) /.exec(l)[1]);
  return { env, mounts, out };
}

function parseEnv(text) {
  const env = new Map();
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) env.set(line.slice(0, eq), line.slice(eq + 1));
  }
  return env;
}

describe('policy check prints what a served cell gets', () => {
  for (const profile of ['default', 'dev', 'offline-strict']) {
    it(`${profile}: the printed environment and mounts are the cell's`, async () => {
      const stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-e2e-spec-'));
      try {
        const printed = printedSpec(profile, stateDir);
        const s = await connect({ binaryName: 'mcpcell', args: ['serve', '--state-dir', stateDir, '--policy', profile] });
        try {
          // run_code is in every shipped profile (offline-strict has no run_command).
          const r = await s.client.callTool({ name: 'run_code',
            arguments: { language: 'sh', code: 'env; echo @@@; cat /proc/self/mountinfo' } });
          assert.equal(r.isError ?? false, false, JSON.stringify(r));
          const [envText, mountinfo] = r.structuredContent.stdout.split('@@@\n');
          const cell = parseEnv(envText);
          for (const [name, value] of printed.env) {
            assert.equal(cell.get(name), value, `${profile}: ${name} printed as "${value}", the cell has "${cell.get(name)}"`);
          }
          for (const name of cell.keys()) {
            assert.ok(printed.env.has(name) || kShellSet.has(name),
              `${profile}: the cell has ${name}=${cell.get(name)}, which policy check does not print:\n${printed.out}`);
          }
          for (const target of printed.mounts) {
            assert.ok(mountinfo.split('\n').some((l) => l.split(' ')[4] === target), `${profile}: ${target} is not mounted`);
          }
          if (profile === 'dev') {
            assert.ok(printed.env.has('PIP_INDEX_URL'), 'dev enables pypi: its cells point pip at the package service');
          }
        } finally {
          await s.close();
        }
      } finally {
        rmSync(stateDir, { recursive: true, force: true });
      }
    });
  }
});
