// Named workspaces over Streamable HTTP with the official SDK (docs/lifecycle.md, "Named
// workspaces"): tenants alice and bob both use `workspace = "persistent:proj"`; carol has no
// policy of her own and no inherit_server_mounts, on a server started with --workspace and
// --output. A second live session of alice on proj is refused naming the workspace, and gets
// it once the first session closed, with the first one's files; bob's proj is another
// directory; carol sees none of the server's host directories; `mcpcell workspace list`
// shows owner and holder, and `workspace delete` is refused while a session holds one.

import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { binary } from '../lib/harness.mjs';
import { connectHttp, startHttpServer } from './http_util.mjs';

const sha = (t) => createHash('sha256').update(t).digest('hex');
const kAlice = 'alice-token-workspaces-0001';
const kBob = 'bob-token-workspaces-0002';
const kCarol = 'carol-token-workspaces-0003';

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

async function run(session, command) {
  return session.client.callTool({ name: 'run_command', arguments: { command } });
}

async function close(session) {
  await session?.transport.terminateSession().catch(() => {});
  await session?.client.close();
}

function mcpcell(args) {
  return spawnSync(binary('mcpcell'), args, { encoding: 'utf8' });
}

describe('mcpcell over HTTP: named workspaces belong to a tenant', () => {
  let dir;
  let stateDir;
  let serverWorkspace;
  let server;
  const sessions = [];
  const connect = async (token) => {
    const s = await connectHttp(server.url, { token });
    sessions.push(s);
    return s;
  };
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-ws-e2e-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-ws-state-'));
    serverWorkspace = path.join(dir, 'server-workspace');
    mkdirSync(serverWorkspace);
    writeFileSync(path.join(serverWorkspace, 'server-marker'), 'the server\'s own\n');
    const named = path.join(dir, 'named.toml');
    writeFileSync(named, 'name = "named"\n[filesystem]\nworkspace = "persistent:proj"\n');
    const config = path.join(dir, 'http.toml');
    writeFileSync(config, `
[[tenant]]
name = "alice"
token_sha256 = ["${sha(kAlice)}"]
policy = "${named}"

[[tenant]]
name = "bob"
token_sha256 = ["${sha(kBob)}"]
policy = "${named}"

[[tenant]]
name = "carol"
token_sha256 = ["${sha(kCarol)}"]
`);
    server = await startHttpServer('mcpcell', ['serve', '--http', '127.0.0.1:0', '--http-config',
      config, '--state-dir', stateDir, '--workspace', serverWorkspace, '--output',
      path.join(dir, 'out')]);
  });
  after(async () => {
    for (const s of sessions) await close(s);
    const code = await server?.stop();
    assert.equal(code, 0, `server exit code; stderr:\n${server?.stderr()}`);
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('refuses a second live session on the workspace and hands it over after the first', async () => {
    const first = await connect(kAlice);
    const w = await run(first, 'echo from-first > /workspace/hello.txt && pwd');
    assert.ok(!w.isError, text(w));
    assert.match(text(w), /\/workspace/);

    const second = await connect(kAlice);
    const refused = await run(second, 'cat /workspace/hello.txt');
    assert.ok(refused.isError, text(refused));
    assert.match(text(refused), /workspace "proj" of tenant "alice" is in use by another session/);

    const listed = JSON.parse(execFileSync(binary('mcpcell'),
      ['workspace', 'list', '--state-dir', stateDir, '--tenant', 'alice', '--json'],
      { encoding: 'utf8' }));
    assert.equal(listed.length, 1);
    assert.equal(listed[0].tenant, 'alice');
    assert.equal(listed[0].name, 'proj');
    assert.ok(listed[0].locked_by, JSON.stringify(listed[0]));
    assert.equal(listed[0].locked_by.pid, server.proc.pid);
    const del = mcpcell(['workspace', 'delete', '--state-dir', stateDir, 'alice/proj']);
    assert.equal(del.status, 2, del.stdout + del.stderr);
    assert.match(del.stderr, /in use by another session.*not deleted/);

    await close(first);
    sessions.splice(sessions.indexOf(first), 1);
    // The first session's cell is destroyed when its session ends; its lock goes with it.
    let after;
    for (let i = 0; i < 50; i += 1) {
      after = await run(second, 'cat /workspace/hello.txt');
      if (!after.isError) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(!after.isError, text(after));
    assert.match(text(after), /from-first/);
  });

  it('gives another tenant\'s "proj" its own directory', async () => {
    const bob = await connect(kBob);
    const r = await run(bob, 'ls -A /workspace; echo bob-was-here > /workspace/bob.txt');
    assert.ok(!r.isError, text(r));
    assert.doesNotMatch(text(r), /hello\.txt/);
    assert.ok(existsSync(path.join(stateDir, 'workspaces', 'bob', 'proj', 'bob.txt')));
    assert.ok(!existsSync(path.join(stateDir, 'workspaces', 'alice', 'proj', 'bob.txt')));
    assert.equal(readFileSync(path.join(stateDir, 'workspaces', 'alice', 'proj', 'hello.txt'),
      'utf8'), 'from-first\n');
  });

  it('gives a tenant without mounts none of the server\'s --workspace and --output', async () => {
    const carol = await connect(kCarol);
    const r = await run(carol, 'ls -A /workspace; test -e /output && echo has-output || echo no-output');
    assert.ok(!r.isError, text(r));
    assert.doesNotMatch(text(r), /server-marker/);
    assert.match(text(r), /no-output/);
  });

  it('lists every tenant\'s workspaces', () => {
    const out = execFileSync(binary('mcpcell'), ['workspace', 'list', '--state-dir', stateDir],
      { encoding: 'utf8' });
    assert.match(out, /^alice\s+proj\s/m);
    assert.match(out, /^bob\s+proj\s/m);
  });
});
