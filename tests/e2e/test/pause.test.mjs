// Pause and resume through `mcpcell serve` with the official SDK (issue 28): with
// [time] session_pause_idle = "2s" an idle session's cell is frozen; a background counter
// started by run_command stops while it is paused (read from the host through a persistent
// workspace, without a call that would resume it) and keeps counting from where it was once
// the next call resumes the cell; session_info and the audit trail report the paused time.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { binary, connect, sleep, waitFor } from '../lib/harness.mjs';

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

function query(stateDir, ...filters) {
  return execFileSync(binary('mcpcell'), ['audit', 'query', '--state-dir', stateDir, ...filters],
    { encoding: 'utf8' }).split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
}

function counter(workspace) {
  const file = path.join(workspace, 'c');
  if (!existsSync(file)) return -1;
  const v = Number.parseInt(readFileSync(file, 'utf8'), 10);
  return Number.isNaN(v) ? -1 : v;
}

describe('pause and resume: a session idle past session_pause_idle', () => {
  let dir;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-pause-e2e-'));
    chmodSync(dir, 0o755);  // the cells' uids must reach the state dir and workspace
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps a background counter, stopped while paused, counting from where it was', async () => {
    const stateDir = path.join(dir, 'state');
    const workspace = path.join(dir, 'ws');
    mkdirSync(workspace, { mode: 0o755 });
    const policyFile = path.join(dir, 'pause.toml');
    writeFileSync(policyFile,
      'name = "pause"\n\n[time]\nsession_idle = "10m"\nsession_pause_idle = "2s"\n');
    const s = await connect({
      binaryName: 'mcpcell',
      args: ['serve', '--state-dir', stateDir, '--policy', policyFile, '--warm-cells', '0',
        '--workspace', workspace],
    });
    try {
      const started = await s.client.callTool({
        name: 'run_command',
        arguments: {
          // Written to a temp file and renamed, so a reader never sees the file empty (a
          // resume can land between the truncation and the write).
          command: "sh -c 'i=0; while :; do i=$((i+1)); echo $i > /workspace/c.t; " +
            "mv /workspace/c.t /workspace/c; sleep 0.1; done' " +
            '>/dev/null 2>&1 &',
        },
      });
      assert.notEqual(started.isError, true, text(started));
      await waitFor(async () => counter(workspace) >= 3, { timeoutMs: 20000, what: 'the counter' });

      // No call for 2 s: the reaper pauses the cell (it checks once a second).
      const paused = await waitFor(async () => query(stateDir, '--type', 'session.pause')[0],
        { timeoutMs: 20000, what: 'session.pause in the audit trail' });
      assert.ok(paused.cell, JSON.stringify(paused));
      const atPause = counter(workspace);
      await sleep(1500);  // fifteen ticks of the counter, had it run
      assert.equal(counter(workspace), atPause, 'the counter advanced while the cell was paused');

      // The next call resumes the cell first, transparently: same processes, same count.
      const read = await s.client.callTool({ name: 'run_command', arguments: { command: 'cat /workspace/c' } });
      assert.notEqual(read.isError, true, text(read));
      assert.ok(!/fresh cell/.test(text(read)), text(read));
      const afterResume = Number.parseInt(read.structuredContent?.stdout ?? text(read), 10);
      assert.ok(afterResume >= atPause, `${afterResume} < ${atPause}: the counter started again`);
      await waitFor(async () => counter(workspace) > afterResume + 3,
        { timeoutMs: 20000, what: 'the counter to continue after resume' });

      const info = await s.client.callTool({ name: 'session_info', arguments: {} });
      assert.notEqual(info.isError, true, text(info));
      assert.equal(info.structuredContent.state, 'running');
      assert.ok(info.structuredContent.paused_s > 1, JSON.stringify(info.structuredContent));
      assert.ok(info.structuredContent.usage.wall_paused_s > 1,
        JSON.stringify(info.structuredContent.usage));
      const resumed = query(stateDir, '--type', 'session.resume');
      assert.equal(resumed.length, 1, JSON.stringify(resumed));
      assert.equal(resumed[0].cell, paused.cell);
      assert.ok(resumed[0].paused_s > 1, JSON.stringify(resumed[0]));
    } finally {
      await s.close();
    }
  });

  it('refuses a pause that is not shorter than session_idle, naming the key', () => {
    const policyFile = path.join(dir, 'bad.toml');
    writeFileSync(policyFile, '[time]\nsession_idle = "1m"\nsession_pause_idle = "2m"\n');
    let out = '';
    try {
      execFileSync(binary('mcpcell'), ['policy', 'check', policyFile, '--state-dir', path.join(dir, 'state-check')], { encoding: 'utf8', stdio: 'pipe' });
    } catch (e) {
      out = String(e.stderr) + String(e.stdout);
    }
    assert.match(out, /time\.session_pause_idle: must be shorter than time\.session_idle/);
  });
});
