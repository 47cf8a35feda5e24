// Clients that misbehave against `mcpcell serve --http`, each next to a well-behaved SDK
// session (the bystander) whose calls must keep answering:
//   (a) hundreds of calls whose HTTP connection is closed mid-call: after the resume grace
//       (--http-resume-grace 1) the call is cancelled and its command's processes are gone;
//       the server's fd count and RSS come back to where they were;
//   (b) a flood of tools/call and garbage, as fast as possible, on one session and on many:
//       server RSS stays bounded and the bystander answers throughout;
//   (c) clients that never read: a POST stream of a command printing ~40 KiB/s of progress
//       for 20 s and a GET stream: server RSS stays bounded (it drops, never buffers all).

import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { waitFor } from '../../e2e/lib/harness.mjs';
import { cellsOf, processesIn } from '../lib/host_scan.mjs';
import {
  callAndDisconnect, callTool, kJsonHeaders, openSession, post, sendAndNeverRead,
} from '../lib/raw_http.mjs';
import { callOk, connectHttp, startHttpServer, text } from '../lib/servers.mjs';

const rssOf = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
const fdsOf = (pid) => readdirSync(`/proc/${pid}/fd`).length;
const MiB = 1 << 20;

// Processes of the cell `cellId` other than its init.
function cellProcesses(stateDir, cellId) {
  const cell = cellsOf(stateDir).find((c) => c.id === cellId);
  if (!cell || !cell.ns.pid) return [];
  return processesIn(new Set([cell.ns.pid])).filter((p) => p.pid !== cell.initPid && p.state !== 'Z');
}

async function rawCellId(url, sid) {
  const r = await callTool(url, sid, 'session_info', {});
  return r.result.structuredContent.cell_id;
}

describe('misbehaving HTTP clients', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-fault-clients-'));
  chmodSync(dir, 0o755);
  const stateDir = path.join(dir, 'state');
  let server;
  let bystander;
  let pid;
  // The bystander's `run_command true` latencies, and failures, while the tests run.
  const byLat = [];
  const byFail = [];
  let stopBystander = false;
  let bystanderLoop;
  before(async () => {
    server = await startHttpServer('mcpcell', ['serve', '--http', '127.0.0.1:0', '--state-dir',
      stateDir, '--warm-cells', '0', '--http-resume-grace', '1']);
    pid = server.proc.pid;
    bystander = await connectHttp(server.url, { name: 'bystander' });
    await callOk(bystander.client, 'run_command', { command: 'true' });
    bystanderLoop = (async () => {
      while (!stopBystander) {
        const t0 = Date.now();
        try {
          const r = await bystander.client.callTool({ name: 'run_command', arguments: { command: 'echo ok' } },
            undefined, { timeout: 30000 });
          if (r.isError || !text(r).includes('ok')) byFail.push(text(r));
        } catch (e) {
          byFail.push(String(e));
        }
        byLat.push(Date.now() - t0);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
  });
  after(async () => {
    stopBystander = true;
    await bystanderLoop;
    await bystander?.transport.terminateSession().catch(() => {});
    await bystander?.client.close();
    const code = await server?.stop();
    rmSync(dir, { recursive: true, force: true });
    assert.equal(code, 0, `server exit; stderr:\n${server?.stderr().slice(-3000)}`);
  });

  const bystanderOk = (what) => {
    assert.deepEqual(byFail, [], `the bystander's calls failed during ${what}`);
    const worst = Math.max(...byLat);
    assert.ok(worst < 30000, `the bystander waited ${worst} ms during ${what}`);
    console.log(`${what}: bystander ${byLat.length} calls, worst ${worst} ms`);
    byLat.length = 0;
  };

  it('(a) kills the command of a call whose connection closed; no fd or memory leak', async () => {
    const sid = await openSession(server.url);
    await callTool(server.url, sid, 'run_command', { command: 'true' });
    const cellId = await rawCellId(server.url, sid);
    // Settle, then the baseline.
    await new Promise((r) => setTimeout(r, 1500));
    const fds0 = fdsOf(pid);
    const rss0 = rssOf(pid);
    const kTotal = 240;
    const kBatch = 24;
    for (let done = 0; done < kTotal; done += kBatch) {
      await Promise.all(Array.from({ length: kBatch }, (_, i) => callAndDisconnect(server.url, sid,
        'run_command', { command: `sleep 300; echo never ${done + i}`, timeout_s: 600 })));
      await waitFor(() => cellProcesses(stateDir, cellId).some((p) => p.comm === 'sleep'),
        { timeoutMs: 10000, what: 'the dropped calls\' commands to run' });
      // Grace 1 s, noticed within ~2 probes of 1 s, cancelled: well under 15 s.
      await waitFor(() => cellProcesses(stateDir, cellId).length === 0,
        { timeoutMs: 15000, intervalMs: 200,
          what: `the commands of ${kBatch} dropped calls to be killed ` +
            `(left: ${JSON.stringify(cellProcesses(stateDir, cellId).slice(0, 5))})` });
    }
    // The session itself still works, in the same cell.
    const r = await callTool(server.url, sid, 'run_command', { command: 'echo alive' });
    assert.match(r.result.content[0].text, /alive/);
    assert.equal(await rawCellId(server.url, sid), cellId);
    // Streams of dropped calls are dropped after the grace; connections closed.
    await new Promise((r) => setTimeout(r, 3000));
    const fds1 = fdsOf(pid);
    const rss1 = rssOf(pid);
    console.log(`(a) ${kTotal} dropped calls: fds ${fds0} -> ${fds1}, RSS ${(rss0 / MiB).toFixed(1)} -> ` +
      `${(rss1 / MiB).toFixed(1)} MiB`);
    // Slack: the bystander's client may hold one more keep-alive connection by then.
    assert.ok(fds1 <= fds0 + 8, `fds ${fds0} before, ${fds1} after ${kTotal} dropped calls`);
    assert.ok(rss1 <= rss0 + 32 * MiB, `RSS ${rss0} before, ${rss1} after`);
    bystanderOk('dropped calls');
  });

  it('(b) survives a flood of calls and garbage on one session and on many', async () => {
    const rss0 = rssOf(pid);
    let peak = rss0;
    const sampler = setInterval(() => { peak = Math.max(peak, rssOf(pid)); }, 200);
    const garbage = ['{', 'null', '[]', '{"jsonrpc":"2.0","id":1,"method":"nope"}', 'x'.repeat(100000),
      '{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call"}',
      '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":7}}}'];
    const flood = async (sid, n, concurrency) => {
      let i = 0;
      const statuses = {};
      await Promise.all(Array.from({ length: concurrency }, async () => {
        while (i < n) {
          const k = i++;
          const body = k % 3 === 0 ? garbage[k % garbage.length]
            : { jsonrpc: '2.0', id: k, method: 'tools/call',
              params: { name: 'run_command', arguments: { command: 'true' } } };
          const headers = k % 17 === 0 ? { 'Content-Type': 'text/plain' } : {};
          try {
            const r = await post(server.url, body, { 'Mcp-Session-Id': sid, ...headers });
            statuses[r.status] = (statuses[r.status] ?? 0) + 1;
          } catch (e) {
            statuses[e.code ?? 'error'] = (statuses[e.code ?? 'error'] ?? 0) + 1;
          }
        }
      }));
      return statuses;
    };
    const one = await openSession(server.url);
    const s1 = await flood(one, 3000, 64);
    const many = await Promise.all(Array.from({ length: 16 }, () => openSession(server.url)));
    const s2 = await Promise.all(many.map((sid) => flood(sid, 150, 8)));
    clearInterval(sampler);
    console.log(`(b) one session: ${JSON.stringify(s1)}; 16 sessions: ${JSON.stringify(s2[0])} ...; ` +
      `RSS ${(rss0 / MiB).toFixed(1)} -> peak ${(peak / MiB).toFixed(1)} MiB`);
    assert.ok((s1[200] ?? 0) > 1000, `most calls were answered: ${JSON.stringify(s1)}`);
    assert.ok(peak <= rss0 + 256 * MiB, `peak RSS ${(peak / MiB).toFixed(1)} MiB`);
    // Everyone still answers.
    const r = await callTool(server.url, one, 'run_command', { command: 'echo still' });
    assert.match(r.result.content[0].text, /still/);
    bystanderOk('the flood');
  });

  it('(c) drops what a client that never reads does not take', async () => {
    const sid = await openSession(server.url);
    await callTool(server.url, sid, 'run_command', { command: 'true' });
    const rss0 = rssOf(pid);
    let peak = rss0;
    const sampler = setInterval(() => { peak = Math.max(peak, rssOf(pid)); }, 200);
    const get = sendAndNeverRead(server.url, 'GET', { Accept: 'text/event-stream', 'Mcp-Session-Id': sid });
    // ~20 s of output as fast as the cell makes it, streamed as progress and kept in the
    // result: the server writes until the socket buffers are full, then drops.
    const body = JSON.stringify({ jsonrpc: '2.0', id: 'flood-out', method: 'tools/call', params: {
      name: 'run_command', _meta: { progressToken: 'p' },
      arguments: { command: 'end=$(($(date +%s)+20)); while [ $(date +%s) -lt $end ]; do ' +
        'head -c 1048576 /dev/urandom | base64; done', timeout_s: 60 } } });
    const sock = sendAndNeverRead(server.url, 'POST', { ...kJsonHeaders, 'Mcp-Session-Id': sid }, body);
    await new Promise((r) => setTimeout(r, 24000));
    clearInterval(sampler);
    sock.destroy();
    get.destroy();
    console.log(`(c) never-reading clients: RSS ${(rss0 / MiB).toFixed(1)} -> peak ${(peak / MiB).toFixed(1)} MiB`);
    assert.ok(peak <= rss0 + 64 * MiB, `peak RSS ${(peak / MiB).toFixed(1)} MiB, from ${(rss0 / MiB).toFixed(1)}`);
    const r = await callTool(server.url, sid, 'run_command', { command: 'echo after' });
    assert.match(r.result.content[0].text, /after/);
    bystanderOk('never-reading clients');
  });
});
