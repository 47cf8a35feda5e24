// `kill -9` of `mcpcell serve --http` with 20 live sessions, then a restart on the same state
// dir. Each session has a cell with a background process (setsid, so it outlives its call)
// and files; ten sessions (ten tenants, one persistent workspace each) write to host
// directories. Before the kill the test records every cell's init pid, namespaces and
// cgroup directories; after the kill it checks the leftovers exist (so the reaping below is
// not vacuous); after the restart (once it printed its URL, i.e. reaped) it asserts that no
// process is in or holds any old namespace or cgroup, no mount or nsfs bind of them is on
// the host, no cgroup directory or cell directory is left, and every persistent workspace
// is intact to the byte (sha256 of every file, modes and sizes) and usable by a new session.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';

import { waitFor } from '../../e2e/lib/harness.mjs';
import {
  cellsOf, mountsOf, namespaceFdHolders, nowTicks, processesIn, procState, startTicks, treeDigest,
} from '../lib/host_scan.mjs';
import {
  callOk, cellIdOf, connectHttp, persistentPolicy, startHttpServer, text, tokenOf, writeHttpConfig,
} from '../lib/servers.mjs';

const kPersistent = 10;
const kEphemeral = 10;

describe('kill -9 of the server with 20 live sessions, then a restart', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-fault-kill-'));
  chmodSync(dir, 0o755);  // cell init of a root server runs as a range uid: must reach state/
  const stateDir = path.join(dir, 'state');
  const servers = [];
  after(async () => {
    for (const s of servers) if (s.proc.exitCode === null && s.proc.signalCode === null) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reaps every process, namespace, cgroup and cell dir; persistent workspaces intact', async () => {
    const tenants = [];
    const workspaces = [];
    for (let i = 0; i < kPersistent; ++i) {
      const ws = path.join(dir, `ws${i}`);
      workspaces.push(ws);
      tenants.push({ name: `p${i}`, policy: persistentPolicy(`persistent-${i}`, ws) });
    }
    tenants.push({ name: 'eph', maxSessions: kEphemeral });
    const config = writeHttpConfig(dir, tenants);
    // --warm-cells 0: every cell in the state dir belongs to a session, so the snapshot below
    // never catches a pool cell half made, and the restart must reap exactly those.
    const args = ['serve', '--http', '127.0.0.1:0', '--http-config', config, '--state-dir',
      stateDir, '--warm-cells', '0'];
    const first = await startHttpServer('mcpcell', args);
    servers.push(first);

    // 20 sessions; each: files, and a background process that outlives its call.
    const sessions = [];
    for (let i = 0; i < kPersistent + kEphemeral; ++i) {
      const tenant = i < kPersistent ? `p${i}` : 'eph';
      sessions.push({ tenant, ...(await connectHttp(first.url, { token: tokenOf(tenant) })) });
    }
    await Promise.all(sessions.map(async (s, i) => {
      const blob = randomBytes(4096 + i * 1000).toString('base64');
      await callOk(s.client, 'write_file', { path: 'data/blob.bin', content: blob, encoding: 'base64' });
      await callOk(s.client, 'write_file', { path: 'notes.txt', content: `session ${i}\n`.repeat(50) });
      await callOk(s.client, 'run_command', {
        command: 'head -c 1048576 /dev/urandom > big.bin && mkdir -p deep/er && ' +
          'echo nested > deep/er/file && ln -s notes.txt link && chmod 600 notes.txt',
      });
      await callOk(s.client, 'run_command', {
        command: 'setsid sleep 100000 </dev/null >/dev/null 2>&1 & echo started',
      });
      s.cellId = await cellIdOf(s.client);
    }));

    // What exists now: every cell with its init, namespaces and cgroups.
    const cells = cellsOf(stateDir);
    const ids = cells.map((c) => c.id);
    assert.equal(cells.length, sessions.length, `one cell per session: ${ids}`);
    for (const s of sessions) assert.ok(ids.includes(s.cellId), `cell ${s.cellId} in the state dir`);
    const inodes = new Set();
    for (const c of cells) {
      assert.ok(Object.keys(c.ns).length === 6, `cell ${c.id}: init ${c.initPid} runs, namespaces read`);
      for (const inode of Object.values(c.ns)) inodes.add(inode);
      assert.ok(c.cgroups.length > 0, `cell ${c.id} has cgroup directories`);
    }
    // Each session cell runs a background sleep besides its init.
    const before = processesIn(inodes, ids);
    for (const s of sessions) {
      const cell = cells.find((c) => c.id === s.cellId);
      const sleeps = processesIn(new Set([cell.ns.pid])).filter((p) => p.comm === 'sleep');
      assert.equal(sleeps.length, 1, `cell ${s.cellId}: one background sleep`);
    }
    const digests = workspaces.map((ws) => treeDigest(ws));
    for (const d of digests) {
      assert.ok(d['big.bin'] && d['data/blob.bin'] && d['deep/er/file'] && d.link === 'link:notes.txt',
        `workspace holds what the session wrote: ${JSON.stringify(Object.keys(d))}`);
    }

    // kill -9: the server gets no chance to clean up.
    first.proc.kill('SIGKILL');
    await new Promise((r) => (first.proc.exitCode !== null || first.proc.signalCode !== null
      ? r() : first.proc.on('exit', r)));
    const killedAt = nowTicks();
    for (const s of sessions) s.transport.close().catch(() => {});
    // Leftovers the restart must reap (cell init alone does not remove them).
    for (const c of cells) {
      assert.ok(existsSync(c.dir), `cell dir ${c.dir} left by the killed server`);
      for (const cg of c.cgroups) assert.ok(existsSync(cg), `cgroup ${cg} left by the killed server`);
    }

    const second = await startHttpServer('mcpcell', args);
    servers.push(second);
    assert.match(second.stderr(), new RegExp(`reaped ${cells.length} cell\\(s\\)`),
      `the restart reports what it reaped:\n${second.stderr()}`);

    // Old processes: in an old namespace or cgroup, started before the kill (a namespace
    // inode freed by the kill may be reused by a later cell of any server on this host).
    // A cell init killed by the reaper is a zombie until its parent reaps it: after the kill
    // that is the host's pid 1 (the new server is not its ancestor), so a zombie may linger
    // briefly. It runs nothing; it keeps its pid namespace and (through its credentials) its
    // user namespace, but no mount, network, IPC or UTS namespace.
    const old = processesIn(inodes, ids).filter((p) => p.start !== null && p.start <= killedAt);
    const survivors = old.filter((p) => p.state !== 'Z');
    assert.deepEqual(survivors, [], `processes of the old cells survive (before: ${before.length})`);
    for (const z of old.filter((p) => p.state === 'Z')) {
      assert.deepEqual(Object.keys(z.ns).filter((t) => t !== 'pid' && t !== 'user'), [],
        `zombie ${z.pid} (${z.comm}) keeps no mount, network, IPC or UTS namespace`);
    }
    for (const p of before) {
      if (String(startTicks(p.pid)) !== String(p.start)) continue;  // gone (pid maybe reused)
      assert.equal(procState(p.pid), 'Z', `old process ${p.pid} (${p.comm}) still runs`);
    }
    const holders = namespaceFdHolders(inodes).filter((h) => h.start !== null && h.start <= killedAt);
    assert.deepEqual(holders, [], 'no process holds an fd of an old namespace');
    assert.deepEqual(mountsOf(stateDir, inodes), [], 'no mount under the state dir, no nsfs bind');
    for (const c of cells) {
      for (const cg of c.cgroups) assert.ok(!existsSync(cg), `cgroup ${cg} removed`);
    }
    assert.deepEqual(readdirSync(path.join(stateDir, 'cells')), [], 'no cell dir left');
    const ranges = path.join(stateDir, 'idranges');
    if (existsSync(ranges)) assert.deepEqual(readdirSync(ranges), [], 'no id range claim left');

    // The persistent workspaces, byte for byte, and usable again.
    workspaces.forEach((ws, i) => assert.deepEqual(treeDigest(ws), digests[i], `workspace ${ws}`));
    const again = await connectHttp(second.url, { token: tokenOf('p3') });
    const read = await callOk(again.client, 'read_file', { path: 'notes.txt' });
    assert.match(text(read), /session 3/);
    const ls = await callOk(again.client, 'run_command', { command: 'sha256sum big.bin' });
    assert.ok(text(ls).includes(digests[3]['big.bin'].split(' ')[2]), text(ls));
    await again.transport.terminateSession();
    await again.client.close();

    assert.equal(await second.stop(), 0, `second server's exit; stderr:\n${second.stderr()}`);
    await waitFor(() => readdirSync(path.join(stateDir, 'cells')).length === 0,
      { what: 'no cell left after a clean stop' });
  });
});
