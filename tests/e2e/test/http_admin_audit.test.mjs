// The audit trail over HTTP (`GET /admin/audit`, docs/audit.md "Access"): two tenants use
// MCP with the official SDK client; two operators scoped to one tenant each and one for all
// read the trail with plain fetch. Each scoped operator gets exactly the records of its
// tenant that the all-tenants operator sees; the 401s of the wrong token kinds are recorded
// as auth.refused with the peer; bad filters and another tenant's records are refused.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { connectHttp, kInit, post, startHttpServer } from './http_util.mjs';

const sha = (t) => createHash('sha256').update(t).digest('hex');
const kAlice = 'alice-token-admin-audit-0001';
const kBob = 'bob-token-admin-audit-0002';
const kOpsAlice = 'ops-alice-token-admin-audit-0003';
const kOpsBob = 'ops-bob-token-admin-audit-0004';
const kOpsAll = 'ops-all-token-admin-audit-0005';

const kConfig = `
[[tenant]]
name = "alice"
token_sha256 = ["${sha(kAlice)}"]

[[tenant]]
name = "bob"
token_sha256 = ["${sha(kBob)}"]

[[operator]]
name = "ops-alice"
token_sha256 = ["${sha(kOpsAlice)}"]
tenants = ["alice"]

[[operator]]
name = "ops-bob"
token_sha256 = ["${sha(kOpsBob)}"]
tenants = ["bob"]

[[operator]]
name = "ops-all"
token_sha256 = ["${sha(kOpsAll)}"]
tenants = "*"
`;

describe('mcpcell over HTTP: /admin/audit is scoped by operator tokens', () => {
  let dir;
  let stateDir;
  let server;
  let admin;
  const sessions = [];

  async function audit(token, query = '') {
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    const res = await fetch(`${admin}${query}`, { headers });
    const text = await res.text();
    const records = res.status === 200 ? text.split('\n').filter((l) => l).map((l) => JSON.parse(l)) : [];
    return { status: res.status, text, records, type: res.headers.get('content-type') };
  }

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-admin-e2e-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-admin-state-'));
    const config = path.join(dir, 'http.toml');
    writeFileSync(config, kConfig);
    server = await startHttpServer('mcpcell', ['serve', '--http', '127.0.0.1:0', '--http-config',
      config, '--state-dir', stateDir]);
    admin = server.url.replace(/\/mcp$/, '/admin/audit');
    for (const token of [kAlice, kBob]) {
      const s = await connectHttp(server.url, { token });
      sessions.push(s);
      const result = await s.client.callTool({ name: 'run_command', arguments: { command: 'echo hi' } });
      assert.ok(!result.isError, JSON.stringify(result));
    }
  });
  after(async () => {
    for (const s of sessions) {
      await s.transport.terminateSession().catch(() => {});
      await s.client.close();
    }
    const code = await server?.stop();
    assert.equal(code, 0, `server exit code; stderr:\n${server?.stderr()}`);
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('refuses tenant tokens on /admin and operator tokens on /mcp, and records both', async () => {
    assert.equal((await audit(kAlice)).status, 401);
    assert.equal((await audit('')).status, 401);
    const mcp = await post(server.url, kInit, { Authorization: `Bearer ${kOpsAll}` });
    assert.equal(mcp.status, 401, mcp.text);
    const refused = (await audit(kOpsAll, '?type=auth.refused')).records;
    const admins = refused.filter((r) => r.path === '/admin/audit' && r.status === 401);
    const mcps = refused.filter((r) => r.path === '/mcp' && r.status === 401);
    assert.ok(admins.length >= 2, JSON.stringify(refused));
    assert.equal(mcps.length, 1, JSON.stringify(refused));
    for (const r of refused) {
      assert.match(r.peer, /^127\.0\.0\.1:\d+$/);
      assert.equal(r.tenant, '');
    }
  });

  it('gives each scoped operator exactly its tenant\'s records', async () => {
    const all = await audit(kOpsAll);
    assert.equal(all.status, 200, all.text);
    assert.equal(all.type, 'application/jsonl');
    assert.ok(all.records.length > 0);
    for (const [token, tenant] of [[kOpsAlice, 'alice'], [kOpsBob, 'bob']]) {
      const mine = await audit(token);
      assert.equal(mine.status, 200, mine.text);
      for (const r of mine.records) assert.equal(r.tenant, tenant, JSON.stringify(r));
      // Whatever the trail holds about the tenant (sessions, commands once recorded), and
      // nothing of the trail's own or the refusals: those are for all-tenant operators.
      const expected = all.records.filter((r) => r.tenant === tenant).map((r) => r.seq);
      assert.ok(expected.length > 0, `no records of ${tenant} in the trail`);
      assert.deepEqual(mine.records.map((r) => r.seq), expected);
      // The tenant's own session is among them, under its name.
      const starts = mine.records.filter((r) => r.type === 'session.start');
      assert.ok(starts.length > 0, JSON.stringify(mine.records.map((r) => r.type)));
      for (const r of starts) assert.equal(r.tenant, tenant);
      const filtered = await audit(token, `?tenant=${tenant}`);
      assert.deepEqual(filtered.records.map((r) => r.seq), expected);
    }
  });

  it('refuses another tenant\'s records and bad filters, naming them', async () => {
    const other = await audit(kOpsAlice, '?tenant=bob');
    assert.equal(other.status, 403, other.text);
    assert.match(other.text, /may not read tenant \\"bob\\"/);
    const since = await audit(kOpsAll, '?since=yesterday');
    assert.equal(since.status, 400);
    assert.match(since.text, /since: /);
    const limit = await audit(kOpsAll, '?limit=0');
    assert.equal(limit.status, 400);
    assert.match(limit.text, /limit: /);
    const unknown = await audit(kOpsAll, '?colour=red');
    assert.equal(unknown.status, 400);
    assert.match(unknown.text, /unknown parameter \\"colour\\"/);
    const forbidden = (await audit(kOpsAll, '?type=auth.refused')).records
      .filter((r) => r.status === 403 && r.path === '/admin/audit');
    assert.equal(forbidden.length, 1, JSON.stringify(forbidden));
    assert.match(forbidden[0].reason, /ops-alice/);
  });
});
