// Per-tenant policies over Streamable HTTP (`mcpcell serve --http --http-config`): tenant
// alice on the shipped `default` profile, tenant bob on a policy file written here that
// disables run_command and edit_file, sets a 256 MiB memory limit and a 20 s exec maximum. Each
// session sees, calls and is limited by its own tenant's policy; the other is unaffected.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { connectHttp, startHttpServer } from './http_util.mjs';

const sha = (t) => createHash('sha256').update(t).digest('hex');
const kAlice = 'alice-token-tenant-policy-0001';
const kBob = 'bob-token-tenant-policy-0002';
const kBobPolicy = `name = "bob-small"
description = "e2e: no run_command, small memory, short exec maximum"

[limits]
memory = "256MiB"

[time]
exec_default = "10s"
exec_max = "20s"

[tools]
enabled = ["run_code", "read_file", "write_file", "list_files", "session_info"]
`;

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

describe('mcpcell over HTTP: every tenant gets its own policy', () => {
  let dir;
  let stateDir;
  let server;
  let alice;
  let bob;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-tenant-e2e-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-tenant-state-'));
    const bobPolicy = path.join(dir, 'bob.toml');
    writeFileSync(bobPolicy, kBobPolicy);
    const config = path.join(dir, 'http.toml');
    writeFileSync(config, `
[[tenant]]
name = "alice"
token_sha256 = ["${sha(kAlice)}"]
policy = "default"

[[tenant]]
name = "bob"
token_sha256 = ["${sha(kBob)}"]
policy = "${bobPolicy}"
`);
    server = await startHttpServer('mcpcell', ['serve', '--http', '127.0.0.1:0', '--http-config',
      config, '--state-dir', stateDir]);
    alice = await connectHttp(server.url, { token: kAlice });
    bob = await connectHttp(server.url, { token: kBob });
  });
  after(async () => {
    for (const s of [alice, bob]) {
      await s?.transport.terminateSession().catch(() => {});
      await s?.client.close();
    }
    const code = await server?.stop();
    assert.equal(code, 0, `server exit code; stderr:\n${server?.stderr()}`);
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('lists only the tenant\'s enabled tools', async () => {
    const aliceTools = (await alice.client.listTools()).tools.map((t) => t.name);
    const bobTools = (await bob.client.listTools()).tools.map((t) => t.name);
    assert.ok(aliceTools.includes('run_command'), `alice: ${aliceTools}`);
    assert.ok(aliceTools.includes('edit_file'), `alice: ${aliceTools}`);
    assert.ok(!bobTools.includes('run_command'), `bob: ${bobTools}`);
    assert.ok(!bobTools.includes('edit_file'), `bob: ${bobTools}`);
    assert.deepEqual([...bobTools].sort(),
      ['list_files', 'read_file', 'run_code', 'session_info', 'write_file']);
  });

  it('refuses a tool the tenant\'s policy does not enable, as an unknown tool', async () => {
    await assert.rejects(
      bob.client.callTool({ name: 'run_command', arguments: { command: 'echo no' } }),
      (err) => {
        assert.equal(err.code, -32602);
        assert.match(err.message, /Unknown tool: run_command/);
        return true;
      });
    const r = await alice.client.callTool({ name: 'run_command',
      arguments: { command: 'echo alice-runs' } });
    assert.ok(!r.isError, text(r));
    assert.match(text(r), /alice-runs/);
  });

  it('session_info shows each tenant\'s policy and limits', async () => {
    const b = await bob.client.callTool({ name: 'session_info', arguments: {} });
    assert.ok(!b.isError, text(b));
    assert.equal(b.structuredContent.policy, 'bob-small');
    assert.equal(b.structuredContent.memory_limit_bytes, 256 * 1024 * 1024);
    assert.equal(b.structuredContent.exec_max_timeout_s, 20);
    assert.match(text(b), /policy bob-small/);
    const a = await alice.client.callTool({ name: 'session_info', arguments: {} });
    assert.ok(!a.isError, text(a));
    assert.equal(a.structuredContent.policy, 'default');
    assert.equal(a.structuredContent.memory_limit_bytes, 1024 * 1024 * 1024);
    assert.equal(a.structuredContent.exec_max_timeout_s, 600);
  });

  it('the cell itself runs under the tenant\'s policy', async () => {
    const b = await bob.client.callTool({ name: 'run_code',
      arguments: { language: 'bash', code: 'echo "policy=$MCPCELL_POLICY"' } });
    assert.match(text(b), /policy=bob-small/);
    const a = await alice.client.callTool({ name: 'run_code',
      arguments: { language: 'bash', code: 'echo "policy=$MCPCELL_POLICY"' } });
    assert.match(text(a), /policy=default/);
  });

  it('applies the tenant\'s exec maximum', async () => {
    const b = await bob.client.callTool({ name: 'run_code',
      arguments: { language: 'bash', code: 'true', timeout_s: 60 } });
    assert.ok(b.isError, text(b));
    assert.match(text(b), /timeout_s: 60 is over this session's maximum of 20 s \(policy bob-small\)/);
    const a = await alice.client.callTool({ name: 'run_code',
      arguments: { language: 'bash', code: 'echo ok', timeout_s: 60 } });
    assert.ok(!a.isError, text(a));
  });

  it('names every tenant\'s policy at start', () => {
    assert.match(server.stderr(), /tenant alice: policy default/);
    assert.match(server.stderr(), /tenant bob: policy bob-small/);
  });
});

describe('mcpcell over HTTP: a tenant policy that does not load refuses the start', () => {
  it('exits 2 naming the tenant, the policy and the problem', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-tenant-bad-'));
    try {
      const bad = path.join(dir, 'bad.toml');
      writeFileSync(bad, '[limits]\nmemory = "lots"\n');
      const config = path.join(dir, 'http.toml');
      writeFileSync(config, `
[[tenant]]
name = "carol"
token_sha256 = ["${sha('carol-token-000000000')}"]
policy = "${bad}"
`);
      await assert.rejects(
        startHttpServer('mcpcell', ['serve', '--http', '127.0.0.1:0', '--http-config', config,
          '--state-dir', path.join(dir, 'state')]),
        (err) => {
          assert.match(err.message, /exited \(2\)/);
          assert.match(err.message, /tenant "carol": policy ".*bad\.toml"/);
          assert.match(err.message, /limits\.memory: expected a size/);
          return true;
        });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
