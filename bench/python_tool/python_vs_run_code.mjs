// Median latency of 30 calls each in one session, after one warm-up call: the python tool
// (one persistent interpreter) against run_code language=python (a fresh interpreter per
// call), for a trivial expression and for one that imports matplotlib.pyplot.
// Usage: see README.md in this folder.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect } from '../../tests/e2e/lib/harness.mjs';
const stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-pybench-'));
const s = await connect({ binaryName: 'mcpcell', args: ['serve', '--state-dir', stateDir] });
const call = (name, args) => s.client.callTool({ name, arguments: args });
await call('python', { code: 'import json' }); await call('run_code', { language: 'python', code: 'print(1)' });
const N = 30; const med = (a) => a.sort((x, y) => x - y)[a.length >> 1];
const py = [], rc = [], pyimp = [], rcimp = [];
for (let i = 0; i < N; ++i) {
  let t = performance.now(); await call('python', { code: '1 + 1' }); py.push(performance.now() - t);
  t = performance.now(); await call('run_code', { language: 'python', code: 'print(1 + 1)' }); rc.push(performance.now() - t);
  t = performance.now(); await call('python', { code: 'import matplotlib.pyplot; 1' }); pyimp.push(performance.now() - t);
  t = performance.now(); await call('run_code', { language: 'python', code: 'import matplotlib.pyplot; print(1)' }); rcimp.push(performance.now() - t);
}
console.log(JSON.stringify({ N, python_ms: med(py), run_code_ms: med(rc), python_pyplot_ms: med(pyimp), run_code_pyplot_ms: med(rcimp) }));
await s.close();
rmSync(stateDir, { recursive: true, force: true });
