// Snapshots and forks through `mcpcell serve --http` with the official SDK (issue 28): two
// tenants (alice with two sessions, bob with one), alice's policy with a file-mode secret and
// a small [limits] snapshot_storage. A restored snapshot equals it file for file (sha256,
// modes, symlinks, deleted and added files), a background program running at restore is
// ended and the result says so, no snapshot holds /run/secrets, a restore in alice's second
// session is a fork (changes do not cross either way), bob cannot list, restore or delete
// alice's snapshots, and bad input (unknown snapshot, a name with "/", the quota, a corrupted
// object in the store) gets a clear error while the session keeps working. A third session
// forking the same snapshot stays apart from the second. The operator's `mcpcell snapshot`
// lists (with the kind), refuses to delete a snapshot a live session runs over, and exports
// alice's snapshot for an import as bob's.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync,
  writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { binary } from '../lib/harness.mjs';
import { connectHttp, startHttpServer } from './http_util.mjs';

const sha = (t) => createHash('sha256').update(t).digest('hex');
const kAlice = 'alice-token-snapshots-0001';
const kBob = 'bob-token-snapshots-0002';
const kSecret = 'snapshot-e2e-secret-value-7f3a';

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// Every path under /workspace (but the tools' own .mcpcell), one line each, sorted: type,
// mode, sha256 of files, target of symlinks.
const kManifest = `cd /workspace && find . -mindepth 1 -not -path './.mcpcell' -not -path './.mcpcell/*' \\
  | LC_ALL=C sort | while IFS= read -r p; do
  if [ -L "$p" ]; then echo "L $p -> $(readlink "$p")";
  elif [ -f "$p" ]; then echo "F $p $(stat -c %a "$p") $(sha256sum < "$p" | cut -d' ' -f1)";
  else echo "$(stat -c '%F %a' "$p") $p"; fi; done`;

// Every file under `dir` (the host's view of the store), recursively.
function walk(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...walk(p));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

describe('snapshots and forks over HTTP, two tenants', () => {
  let dir;
  let stateDir;
  let server;
  let alice;
  let alice2;
  let bob;
  let baseId;

  const run = async (s, command) => {
    const r = await s.client.callTool({ name: 'run_command', arguments: { command } });
    assert.notEqual(r.isError, true, text(r));
    assert.equal(r.structuredContent.exit_code, 0, text(r));
    return r.structuredContent.stdout;
  };
  const tool = (s, name, args = {}) => s.client.callTool({ name, arguments: args });

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-snap-e2e-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-snap-state-'));
    chmodSync(dir, 0o755);
    writeFileSync(path.join(dir, 'key'), `${kSecret}\n`);
    // The snapshot_* tools are in toolset "full" (the default "core" leaves them out).
    writeFileSync(path.join(dir, 'alice.toml'), `name = "alice-snapshots"
[limits]
snapshot_storage = "2MiB"
[tools]
toolset = "full"

[[secrets]]
name = "KEY_FILE"
source = "file:${dir}/key"
mode = "file"
`);
    writeFileSync(path.join(dir, 'bob.toml'), `name = "bob-snapshots"
[tools]
toolset = "full"
`);
    const config = path.join(dir, 'http.toml');
    writeFileSync(config, `
[[tenant]]
name = "alice"
token_sha256 = ["${sha(kAlice)}"]
policy = "${dir}/alice.toml"

[[tenant]]
name = "bob"
token_sha256 = ["${sha(kBob)}"]
policy = "${dir}/bob.toml"
`);
    server = await startHttpServer('mcpcell', ['serve', '--http', '127.0.0.1:0', '--http-config',
      config, '--state-dir', stateDir, '--warm-cells', '0']);
    alice = await connectHttp(server.url, { token: kAlice });
    alice2 = await connectHttp(server.url, { token: kAlice });
    bob = await connectHttp(server.url, { token: kBob });
  });
  after(async () => {
    for (const s of [alice, alice2, bob]) {
      await s?.transport.terminateSession().catch(() => {});
      await s?.client.close();
    }
    const code = await server?.stop();
    assert.equal(code, 0, `server exit code; stderr:\n${server?.stderr()}`);
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('lists the four tools', async () => {
    const names = (await alice.client.listTools()).tools.map((t) => t.name);
    for (const n of ['snapshot_create', 'snapshot_list', 'snapshot_restore', 'snapshot_delete']) {
      assert.ok(names.includes(n), `${n} not in ${names}`);
    }
  });

  it('restores files, modes and symlinks exactly and ends running programs', async () => {
    await run(alice, 'cd /workspace && mkdir -p d/e && echo keep > a.txt && echo bye > gone.txt && ' +
      'head -c 70000 /dev/urandom > d/e/blob && printf "#!/bin/sh\\necho hi\\n" > run.sh && ' +
      'chmod 751 run.sh && chmod 700 d/e && ln -s a.txt link && ln -s /nowhere dangling && ' +
      'test -s /run/secrets/KEY_FILE');
    const before = await run(alice, kManifest);
    assert.match(before, /^L \.\/link -> a\.txt$/m);
    assert.match(before, /^F \.\/run\.sh 751 /m);

    const made = await tool(alice, 'snapshot_create', { name: 'base' });
    assert.notEqual(made.isError, true, text(made));
    assert.match(text(made), /^Created snapshot [0-9a-f]{32} \("base"\)/);
    assert.match(text(made), /used of .* left/);
    baseId = made.structuredContent.snapshot.id;
    assert.equal(made.structuredContent.snapshot.name, 'base');

    await run(alice, 'nohup sleep 1000 >/dev/null 2>&1 &');
    await run(alice, 'cd /workspace && echo changed > a.txt && rm gone.txt && echo new > new.txt && ' +
      'chmod 644 run.sh && rm link && ln -s new.txt link && head -c 10 /dev/zero >> d/e/blob');
    assert.notEqual(await run(alice, kManifest), before);

    const restored = await tool(alice, 'snapshot_restore', { snapshot: 'base' });
    assert.notEqual(restored.isError, true, text(restored));
    assert.match(text(restored), /are now the snapshot's/);
    assert.equal(await run(alice, kManifest), before);
    assert.equal(await run(alice, 'pgrep -x sleep || echo none'), 'none\n');
    // The background sleep was running: the result must say a program was ended.
    assert.ok(restored.structuredContent.programs_ended >= 1, text(restored));
    assert.match(text(restored), /Ended \d+ running process/);
  });

  it('never holds /run/secrets', async () => {
    const stored = walk(path.join(stateDir, 'snapshots'));
    assert.ok(stored.length > 0, 'no snapshot files in the store');
    for (const f of stored) {
      assert.ok(!f.includes(`${path.sep}run${path.sep}secrets`), f);
      if (statSync(f).size < (4 << 20)) {
        assert.ok(!readFileSync(f).includes(kSecret), `${f} holds the secret's value`);
      }
    }
    // The session still has its secret after the restore (it is granted, not snapshotted).
    // (Compared by digest: the tools redact the value itself from every result. The file
    // source's trailing newline is not part of the value.)
    assert.equal(await run(alice, 'sha256sum < /run/secrets/KEY_FILE | cut -c1-64'),
      `${sha(kSecret)}\n`);
  });

  it('forks into another session of the tenant; changes stay on each side', async () => {
    const parent = await run(alice, kManifest);
    const forked = await tool(alice2, 'snapshot_restore', { snapshot: baseId });
    assert.notEqual(forked.isError, true, text(forked));
    assert.equal(await run(alice2, kManifest), parent);
    await run(alice2, 'echo child > /workspace/child.txt && echo child > /workspace/a.txt');
    assert.equal(await run(alice, kManifest), parent);
    await run(alice, 'echo parent-later > /workspace/later.txt');
    assert.equal(await run(alice2, 'cat /workspace/a.txt; test -e /workspace/later.txt || echo no-later'),
      'child\nno-later\n');
  });

  it('a third session forks the same snapshot; siblings do not see each other', async () => {
    const alice3 = await connectHttp(server.url, { token: kAlice });
    try {
      const forked = await tool(alice3, 'snapshot_restore', { snapshot: 'base' });
      assert.notEqual(forked.isError, true, text(forked));
      // The snapshot's a.txt, not the second session's change of it.
      assert.equal(await run(alice3, 'cat /workspace/a.txt; test -e /workspace/child.txt || ' +
        'echo no-child'), 'keep\nno-child\n');
      await run(alice3, 'echo third > /workspace/third.txt && echo third > /workspace/a.txt');
      assert.equal(await run(alice2, 'cat /workspace/a.txt; test -e /workspace/third.txt || ' +
        'echo no-third'), 'child\nno-third\n');
      assert.notEqual(await run(alice3, 'cat /etc/hostname'), await run(alice2, 'cat /etc/hostname'));
    } finally {
      await alice3.transport.terminateSession().catch(() => {});
      await alice3.client.close();
    }
  });

  it('another tenant cannot list, restore or delete it', async () => {
    const listed = await tool(bob, 'snapshot_list');
    assert.notEqual(listed.isError, true, text(listed));
    assert.ok(!listed.structuredContent.snapshots.some((s) => s.id === baseId), text(listed));
    for (const [name, which] of [['snapshot_restore', baseId], ['snapshot_restore', 'base'],
      ['snapshot_delete', baseId], ['snapshot_delete', 'base']]) {
      const r = await tool(bob, name, { snapshot: which });
      assert.equal(r.isError, true, text(r));
      assert.match(text(r), /not found/);
    }
    const still = await tool(alice, 'snapshot_list');
    assert.ok(still.structuredContent.snapshots.some((s) => s.id === baseId), text(still));
  });

  it('mcpcell snapshot list/delete/export/import for operators', async () => {
    const cli = (...args) => spawnSync(binary('mcpcell'),
      ['snapshot', ...args, '--state-dir', stateDir], { encoding: 'utf8' });
    const listed = cli('list', '--tenant', 'alice');
    assert.equal(listed.status, 0, listed.stderr);
    assert.match(listed.stdout, /^ID +NAME +KIND +CREATED +FILES +SIZE$/m);
    assert.match(listed.stdout, new RegExp(`^${baseId} +base +snapshot `, 'm'));
    assert.equal(cli('list', '--tenant', 'bob').stdout.split('\n').filter(Boolean).length, 1);

    // alice2 runs over it (a fork): another process cannot delete its lower layers.
    const refused = cli('delete', 'base', '--tenant', 'alice');
    assert.equal(refused.status, 2, refused.stdout);
    assert.match(refused.stderr, new RegExp(`snapshot ${baseId} is in use: a running server`));
    assert.match(cli('list', '--tenant', 'alice').stdout, new RegExp(baseId));

    const archive = path.join(dir, 'base.tar.gz');
    const exported = cli('export', 'base', archive, '--tenant', 'alice');
    assert.equal(exported.status, 0, exported.stderr);
    assert.ok(statSync(archive).size > 70000);
    const imported = cli('import', archive, '--tenant', 'bob');
    assert.equal(imported.status, 0, imported.stderr);
    const copy = JSON.parse(imported.stdout);
    assert.equal(copy.tenant, 'bob');
    assert.equal(copy.name, 'base');
    assert.equal(copy.kind, 'snapshot');
    assert.notEqual(copy.id, baseId);
    // Bob's session sees and restores its own copy; alice's stays alice's.
    const bobs = await tool(bob, 'snapshot_list');
    assert.deepEqual(bobs.structuredContent.snapshots.map((x) => x.id), [copy.id]);
    const restored = await tool(bob, 'snapshot_restore', { snapshot: 'base' });
    assert.notEqual(restored.isError, true, text(restored));
    assert.equal(await run(bob, 'cat /workspace/a.txt'), 'keep\n');
    assert.equal(cli('import', archive, '--tenant', 'bob').status, 2);  // the name is taken
    const busy = cli('delete', copy.id, '--tenant', 'bob');
    assert.equal(busy.status, 2);
    assert.match(busy.stderr, /is in use/);
    const unknown = cli('delete', 'no-such-snapshot', '--tenant', 'bob');
    assert.equal(unknown.status, 2);
    assert.match(unknown.stderr, /snapshot "no-such-snapshot" not found/);
  });

  it('refuses bad input clearly and loses nothing', async () => {
    const unknown = await tool(alice, 'snapshot_restore', { snapshot: 'no-such-snapshot' });
    assert.equal(unknown.isError, true);
    assert.match(text(unknown), /not found.*snapshot_list shows/s);
    const slash = await tool(alice, 'snapshot_create', { name: 'a/b' });
    assert.equal(slash.isError, true);
    assert.match(text(slash), /not a valid snapshot name: it must be 1 to 64 characters of \[A-Za-z0-9._-\]/);

    const beforeQuota = (await tool(alice, 'snapshot_list')).structuredContent.count;
    await run(alice, 'head -c 3145728 /dev/urandom > /workspace/big');
    const over = await tool(alice, 'snapshot_create', { name: 'too-big' });
    assert.equal(over.isError, true, text(over));
    assert.match(text(over), /quota/);
    assert.match(text(over), /snapshot_delete/);
    assert.equal((await tool(alice, 'snapshot_list')).structuredContent.count, beforeQuota);
    await run(alice, 'rm /workspace/big');
  });

  it('refuses a corrupted snapshot and keeps the session working', async () => {
    const marker = `corrupt-me-${Date.now()}\n`;
    await run(alice, `printf '%s' '${marker}' > /workspace/marker`);
    const made = await tool(alice, 'snapshot_create', { name: 'to-corrupt' });
    assert.notEqual(made.isError, true, text(made));
    const digest = sha(marker);
    const objects = walk(path.join(stateDir, 'snapshots')).filter(
      (f) => f.includes(`${path.sep}objects${path.sep}`) && path.basename(f).startsWith(digest));
    assert.equal(objects.length, 1, `objects for ${digest}: ${objects}`);
    appendFileSync(objects[0], 'tampered');

    await run(alice, 'echo after > /workspace/after.txt');
    const state = await run(alice, kManifest);
    const r = await tool(alice, 'snapshot_restore', { snapshot: 'to-corrupt' });
    assert.equal(r.isError, true, text(r));
    assert.match(text(r), /snapshot_restore failed: snapshot [0-9a-f]{32} is damaged and was not restored: .*marker/s);
    assert.equal(await run(alice, kManifest), state);
    assert.equal(await run(alice, 'echo still-working'), 'still-working\n');

    const deleted = await tool(alice, 'snapshot_delete', { snapshot: 'to-corrupt' });
    assert.notEqual(deleted.isError, true, text(deleted));
    const gone = await tool(alice, 'snapshot_restore', { snapshot: 'to-corrupt' });
    assert.match(text(gone), /not found/);
  });
});
