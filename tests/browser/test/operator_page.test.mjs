// The operator page (/admin/, docs/operations.md "The operator page") in a real browser:
// Debian's chromium driven by playwright-core. `mcpcell serve --http` runs with two tenants
// and two operators (one for all tenants, one for tenant alice only); the official MCP SDK
// client makes a session per tenant. The all-tenants operator logs in with its token, sees
// both sessions with their usage, pauses bob's (an operator hold: the row says "held" and
// bob's client's calls are refused with an error naming the operator until the operator
// resumes it), ends alice's, and alice's client's next call is refused (HTTP 404: unknown
// session); bob's still works; the actions are in the audit table, newest first. The
// scoped operator sees only alice's sessions and pool.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { chromium } from 'playwright-core';

const kChromium = process.env.MCPCELL_CHROMIUM || '/usr/bin/chromium';
const sha = (t) => createHash('sha256').update(t).digest('hex');
const kAlice = 'alice-token-operator-page-0001';
const kBob = 'bob-token-operator-page-0002';
const kOpsAll = 'ops-all-token-operator-page-0003';
const kOpsAlice = 'ops-alice-token-operator-page-0004';

const kConfig = `
[[tenant]]
name = "alice"
token_sha256 = ["${sha(kAlice)}"]

[[tenant]]
name = "bob"
token_sha256 = ["${sha(kBob)}"]

[[operator]]
name = "ops-all"
token_sha256 = ["${sha(kOpsAll)}"]
tenants = "*"

[[operator]]
name = "ops-alice"
token_sha256 = ["${sha(kOpsAlice)}"]
tenants = ["alice"]
`;

function binary(name) {
  const dir = process.env.MCPCELL_BIN_DIR;
  assert.ok(dir, 'set MCPCELL_BIN_DIR to the build\'s bin directory (ctest does)');
  const file = path.join(dir, name);
  assert.ok(existsSync(file), `${file} not found: build it first`);
  return file;
}

// `mcpcell serve ...`, resolved once it printed its http://.../mcp URL.
function startServer(args) {
  const proc = spawn(binary('mcpcell'), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL in 30 s:\n${stderr}`)), 30000);
    proc.stderr.on('data', (chunk) => {
      stderr += chunk.toString();
      const m = /(http:\/\/[^\s]+)\/mcp/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve({
          base: m[1],
          stderr: () => stderr,
          stop() {
            if (proc.exitCode !== null) return Promise.resolve(proc.exitCode);
            proc.kill('SIGTERM');
            return new Promise((r) => proc.on('exit', (code) => r(code)));
          },
        });
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`mcpcell exited (${code}) before listening:\n${stderr}`));
    });
  });
}

async function connect(base, token, name) {
  const transport = new StreamableHTTPClientTransport(new URL(base + '/mcp'), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name, version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  const result = await client.callTool({ name: 'run_command', arguments: { command: 'echo hi' } });
  assert.ok(!result.isError, JSON.stringify(result));
  return { client, transport };
}

// The rows of the sessions table as {tenant, id, state, calls, cpu}.
async function sessionRows(page) {
  return page.$$eval('#sessions tbody tr', (rows) => rows.map((tr) => ({
    tenant: tr.children[0].textContent,
    id: tr.dataset.session,
    state: tr.querySelector('td.state').textContent,
    calls: tr.querySelector('td.calls').textContent,
    cpu: tr.querySelector('td.cpu').textContent,
  })));
}

async function logIn(browser, base, token) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // Script errors and failed loads, by URL (chromium's console line for a 4xx has none);
  // the favicon chromium asks for on its own is not the page's.
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push(m.text());
  });
  page.on('response', (r) => {
    if (r.status() >= 400 && !r.url().endsWith('/favicon.ico')) errors.push(`${r.status()} ${r.url()}`);
  });
  const res = await page.goto(base + '/admin/');
  assert.equal(res.status(), 200);
  assert.match(res.headers()['content-security-policy'], /default-src 'self'/);
  await page.fill('#token', token);
  await page.click('#login-button');
  await page.waitForSelector('#data:not([hidden])');
  return { context, page, errors };
}

describe('the operator page in chromium', () => {
  let dir;
  let stateDir;
  let server;
  let browser;
  let alice;
  let bob;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-operator-page-'));
    // Its own temp dir (mode 0711 by mcpcell): the cells' uids must be able to reach it.
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-operator-page-state-'));
    const config = path.join(dir, 'http.toml');
    writeFileSync(config, kConfig);
    server = await startServer(['serve', '--http', '127.0.0.1:0', '--http-config', config,
      '--state-dir', stateDir]);
    alice = await connect(server.base, kAlice, 'alice-client');
    bob = await connect(server.base, kBob, 'bob-client');
    browser = await chromium.launch({ executablePath: kChromium, args: ['--no-sandbox'] });
  });
  after(async () => {
    await browser?.close();
    for (const s of [alice, bob]) await s?.client.close().catch(() => {});
    const code = await server?.stop();
    assert.equal(code, 0, `server exit code; stderr:\n${server?.stderr()}`);
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('shows both sessions with their usage, ends one, and its client is refused', async () => {
    const { context, page, errors } = await logIn(browser, server.base, kOpsAll);
    assert.match(await page.textContent('#who'), /operator ops-all \(all tenants\)/);
    await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 2);
    const rows = await sessionRows(page);
    assert.deepEqual(rows.map((r) => r.tenant).sort(), ['alice', 'bob']);
    for (const r of rows) {
      assert.equal(r.calls, '1', JSON.stringify(r));  // the run_command each client made
      assert.match(r.cpu, /^\d+\.\d{3}$/);
      assert.match(r.state, /^(running|paused|idle)$/);
    }
    const pools = await page.$$eval('#pools tbody tr td:first-child', (tds) => tds.map((t) => t.textContent));
    assert.deepEqual(pools.sort(), ['(server policy)', 'alice', 'bob']);

    // Pause holds bob's session: its cell frozen, the row "held" with the operator's name,
    // and bob's client's calls refused (not thawing the cell) until the operator resumes.
    const bobId = rows.find((r) => r.tenant === 'bob').id;
    const stateOf = (id) => page.waitForFunction(
      ([sid, want]) => document.querySelector(`#sessions tr[data-session="${sid}"] td.state`)
        ?.textContent === want, [id[0], id[1]]);
    await page.click(`#sessions tr[data-session="${bobId}"] button.action-pause`);
    await stateOf([bobId, 'held']);
    assert.match(await page.textContent('#status'), /paused and held by operator ops-all/);
    assert.match(await page.getAttribute(`#sessions tr[data-session="${bobId}"] td.state`, 'title'),
      /^held by operator ops-all since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    for (const tool of ['run_command', 'session_info']) {
      await assert.rejects(
        bob.client.callTool({ name: tool, arguments: tool === 'run_command' ? { command: 'echo no' } : {} }),
        (e) => e.code === -32003 &&
          /is held by operator ops-all since \S+Z: .*refused until the operator resumes it\. Wait .* or ask the operator/
            .test(e.message));
    }
    await stateOf([bobId, 'held']);  // the refused calls did not thaw it
    await page.click(`#sessions tr[data-session="${bobId}"] button.action-resume`);
    await stateOf([bobId, 'running']);
    const released = await bob.client.callTool({ name: 'run_command', arguments: { command: 'echo back' } });
    assert.ok(!released.isError, JSON.stringify(released));

    const aliceId = rows.find((r) => r.tenant === 'alice').id;
    await page.click(`#sessions tr[data-session="${aliceId}"] button.action-end`);
    await page.waitForFunction(
      (id) => !document.querySelector(`#sessions tr[data-session="${id}"]`), aliceId);
    assert.match(await page.textContent('#status'), /ended/);

    // The ended session's next call: HTTP 404 for its Mcp-Session-Id.
    await assert.rejects(
      alice.client.callTool({ name: 'run_command', arguments: { command: 'echo again' } }),
      (e) => /404|not found/i.test(String(e.message)) || e.code === 404);
    const still = await bob.client.callTool({ name: 'run_command', arguments: { command: 'echo ok' } });
    assert.ok(!still.isError, JSON.stringify(still));

    // The action is audited with the operator's name; the audit filter finds it.
    await page.fill('#f-type', 'session.operator');
    await page.click('#audit-apply');
    await page.waitForFunction(() => [...document.querySelectorAll('#audit tbody td.type')]
      .some((td) => td.textContent === 'session.operator'));
    const details = await page.$$eval('#audit tbody td.details', (tds) => tds.map((t) => t.textContent));
    // Newest first: the end, then the resume, then the pause.
    const actions = details.map((d) => JSON.parse(d)).filter((d) => d.operator === 'ops-all')
      .map((d) => d.action);
    assert.deepEqual(actions.slice(0, 3), ['end', 'resume', 'pause'], details.join('\n'));
    const seqs = await page.$$eval('#audit tbody td.num', (tds) => tds.map((t) => Number(t.textContent)));
    assert.deepEqual(seqs, [...seqs].sort((a, b) => b - a), 'the audit table is newest first');
    assert.deepEqual(errors, []);
    await context.close();
  });

  it('shows a tenant-scoped operator only its tenant', async () => {
    const second = await connect(server.base, kAlice, 'alice-again');
    try {
      const { context, page, errors } = await logIn(browser, server.base, kOpsAlice);
      assert.match(await page.textContent('#who'), /operator ops-alice \(tenants alice\)/);
      await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length >= 1);
      const rows = await sessionRows(page);
      assert.ok(rows.length >= 1 && rows.every((r) => r.tenant === 'alice'), JSON.stringify(rows));
      const pools = await page.$$eval('#pools tbody tr td:first-child', (tds) => tds.map((t) => t.textContent));
      assert.deepEqual(pools, ['alice']);
      // bob's session is not there to act on: the API answers as for no session at all.
      const all = await fetch(server.base + '/admin/api/sessions',
        { headers: { Authorization: `Bearer ${kOpsAll}` } }).then((r) => r.json());
      const bobId = all.sessions.find((s) => s.tenant === 'bob').id;
      const refused = (await fetch(`${server.base}/admin/api/sessions/${bobId}/end`,
        { method: 'POST', headers: { Authorization: `Bearer ${kOpsAlice}` } })).status;
      assert.equal(refused, 404);
      assert.deepEqual(errors, []);
      await context.close();
    } finally {
      await second.client.close().catch(() => {});
    }
  });
});
