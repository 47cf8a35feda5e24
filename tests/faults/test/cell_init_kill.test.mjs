// A cell's init SIGKILLed from the host, end to end through MCP over Streamable HTTP: the
// test finds init's host pid from the state dir (<state dir>/cells/<cell id>/init, checked
// against /proc by start time, so only a process of the server this test started is hit).
// The call running in that cell at the time ends promptly with an error (no hang); the next
// call of the session says its previous cell had stopped and runs in a fresh one; the call
// after that runs in the same fresh cell with no note; two other sessions keep their cells
// and answer throughout.

import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { startTicks } from '../lib/host_scan.mjs';
import { callOk, cellIdOf, connectHttp, startHttpServer, text } from '../lib/servers.mjs';

function initPidOf(stateDir, cellId) {
  const [pid, start] = readFileSync(path.join(stateDir, 'cells', cellId, 'init'), 'utf8')
    .trim().split(' ');
  assert.equal(String(startTicks(Number(pid))), start, `init ${pid} of cell ${cellId} runs`);
  return Number(pid);
}

describe('a cell init killed from the host, through MCP over HTTP', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-fault-init-'));
  chmodSync(dir, 0o755);
  const stateDir = path.join(dir, 'state');
  let server;
  const sessions = [];
  before(async () => {
    server = await startHttpServer('mcpcell', ['serve', '--http', '127.0.0.1:0', '--state-dir',
      stateDir]);
    for (let i = 0; i < 3; ++i) sessions.push(await connectHttp(server.url));
  });
  after(async () => {
    for (const s of sessions) {
      await s.transport.terminateSession().catch(() => {});
      await s.client.close();
    }
    const code = await server?.stop();
    rmSync(dir, { recursive: true, force: true });
    assert.equal(code, 0, `server exit; stderr:\n${server?.stderr()}`);
  });

  it('gives that session an error, then a fresh cell; the others are untouched', async () => {
    const [victim, ...others] = sessions;
    await callOk(victim.client, 'write_file', { path: 'before.txt', content: 'old cell' });
    const oldCell = await cellIdOf(victim.client);
    const otherCells = await Promise.all(others.map((s) => cellIdOf(s.client)));
    const pid = initPidOf(stateDir, oldCell);

    // A call in flight when init dies must end, with an error, well before its own timeout.
    const started = Date.now();
    const inFlight = victim.client.callTool(
      { name: 'run_command', arguments: { command: 'sleep 50; echo finished', timeout_s: 60 } },
      undefined, { timeout: 120000 });
    await new Promise((r) => setTimeout(r, 1000));
    process.kill(pid, 'SIGKILL');
    const killed = await inFlight;
    assert.ok(Date.now() - started < 20000, `the running call ended ${Date.now() - started} ms in`);
    assert.equal(killed.isError, true, `the running call reports the failure: ${text(killed)}`);
    assert.doesNotMatch(text(killed), /finished/);
    console.log(`the call running when init died: ${text(killed).split("\n")[0]}`);

    // Next call: a fresh cell, and the session is told why its files are gone.
    const next = await victim.client.callTool({ name: 'run_command',
      arguments: { command: 'ls /workspace; echo fresh' } });
    assert.ok(!next.isError, text(next));
    assert.match(text(next), new RegExp(`previous cell ${oldCell} had stopped`));
    assert.match(text(next), /fresh/);
    assert.doesNotMatch(text(next), /before\.txt/);
    const newCell = await cellIdOf(victim.client);
    assert.notEqual(newCell, oldCell);
    // The call after that: same fresh cell, no note.
    const third = await callOk(victim.client, 'run_command', { command: 'echo again' });
    assert.doesNotMatch(text(third), /had stopped/);
    assert.equal(await cellIdOf(victim.client), newCell);
    initPidOf(stateDir, newCell);

    // The other sessions kept their cells and answer.
    for (const [i, s] of others.entries()) {
      const r = await callOk(s.client, 'run_command', { command: `echo other ${i}` });
      assert.match(text(r), new RegExp(`other ${i}`));
      assert.doesNotMatch(text(r), /had stopped/);
      assert.equal(await cellIdOf(s.client), otherCells[i]);
    }
  });
});
