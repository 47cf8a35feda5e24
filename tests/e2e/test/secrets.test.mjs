// Secrets (issue 26, docs/secrets.md) through the real server with the official SDK: a
// local HTTPS upstream (its own test CA, made with the openssl CLI and given by
// --egress-ca-file) reached by name through --egress-hosts. The upstream gets the real value
// in a header, Basic auth, a query and (for a secret with the "body" surface) a JSON body;
// the cell only ever holds the placeholder, not even in its processes' memory; the
// placeholder sent to another allowed host, in a body it may not use or over plain HTTP is
// refused and nothing is sent; a value the host reflects comes back masked; a
// rotated source is used at once; ttl; env and file modes; a call cannot set a secret's
// name; bad policies are refused with file:line; a tenant holds only its own secrets.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { binary, connect, sleep, waitFor } from '../lib/harness.mjs';
import { connectHttp, startHttpServer } from './http_util.mjs';

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

function makeCerts(dir) {
  const ssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  ssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=mcpcell-e2e-ca',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
  ssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=api.test');
  writeFileSync(path.join(dir, 'ext.cnf'),
    'subjectAltName=DNS:api.test,DNS:other.test\nextendedKeyUsage=serverAuth\n');
  ssl('x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
    '-out', 'leaf.pem', '-days', '2', '-extfile', 'ext.cnf');
  return { key: readFileSync(path.join(dir, 'leaf.key')), cert: readFileSync(path.join(dir, 'leaf.pem')) };
}

// A server on 127.0.0.1 (HTTPS with tls, else plain HTTP) that records every request and
// answers 200 with the request's X-Echo header (a host reflecting a value back), else "ok".
async function startUpstream(tls) {
  const requests = [];
  const handler = (req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      requests.push({ url: req.url, headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(req.headers['x-echo'] ?? 'ok\n');
    });
  };
  const server = tls ? https.createServer(tls, handler) : http.createServer(handler);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { requests, port: server.address().port, close: () => new Promise((r) => server.close(r)) };
}

describe('secrets', { timeout: 300_000 }, () => {
  let dir, stateDir, api, other, plain, server;
  const call = async (command, extra = {}) =>
    server.client.callTool({ name: 'run_command', arguments: { command, ...extra } });
  const curl = (args) => call(`curl -sS -o /dev/null -w '%{http_code}' ${args}`);

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-secrets-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-secrets-state-'));
    const tls = makeCerts(dir);
    api = await startUpstream(tls);
    other = await startUpstream(tls);
    plain = await startUpstream(null);
    writeFileSync(path.join(dir, 'hosts'),
      '127.0.0.1 api.test\n127.0.0.1 other.test\n127.0.0.1 plain.test\n');
    writeFileSync(path.join(dir, 'body'), 'body-secret-value\n');
    writeFileSync(path.join(dir, 'token'), 'real-value-1\n');
    writeFileSync(path.join(dir, 'db'), 'db-password-value\n');
    writeFileSync(path.join(dir, 'key'), 'file-secret-value\n');
    writeFileSync(path.join(dir, 'policy.toml'), `name = "secrets-e2e"
[network]
egress = "allowlist"
allow = ["api.test:${api.port}", "other.test:${other.port}", "127.0.0.1:${api.port}", "127.0.0.1:${other.port}",
  "plain.test:${plain.port}", "127.0.0.1:${plain.port}"]

[[secrets]]
name = "API_TOKEN"
source = "file:${dir}/token"
hosts = ["api.test:${api.port}"]

# Makes other.test intercepted too, so a placeholder sent there is seen and refused.
[[secrets]]
name = "OTHER_TOKEN"
source = "file:${dir}/db"
hosts = ["other.test:${other.port}"]

[[secrets]]
name = "BODY_TOKEN"
source = "file:${dir}/body"
hosts = ["api.test:${api.port}"]
surfaces = ["header", "body"]

[[secrets]]
name = "END_TOKEN"
source = "file:${dir}/db"
hosts = ["api.test:${api.port}"]
on_violation = "block_and_end_session"

[[secrets]]
name = "SHORT_TOKEN"
source = "file:${dir}/token"
hosts = ["api.test:${api.port}"]
ttl = "3s"

[[secrets]]
name = "DB_PASSWORD"
source = "file:${dir}/db"
mode = "env"

[[secrets]]
name = "KEY_FILE"
source = "file:${dir}/key"
mode = "file"
`);
    server = await connect({
      binaryName: 'mcpcell',
      args: ['serve', '--state-dir', stateDir, '--policy', path.join(dir, 'policy.toml'),
        '--egress-hosts', path.join(dir, 'hosts'), '--egress-ca-file', path.join(dir, 'ca.pem'),
        '--warm-cells', '0'],
    });
  });

  after(async () => {
    await server?.close();
    await api?.close();
    await other?.close();
    await plain?.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('the cell holds a placeholder; the upstream gets the value in a header, Basic auth and a query', async () => {
    const env = text(await call('printenv API_TOKEN'));
    assert.match(env, /mcpcell-secret-[0-9a-f]{32}/);
    assert.doesNotMatch(env, /real-value/);
    const url = `https://api.test:${api.port}`;
    assert.match(text(await curl(`-H "Authorization: Bearer $API_TOKEN" ${url}/header`)), /200/);
    assert.match(text(await curl(`-u "me:$API_TOKEN" ${url}/basic`)), /200/);
    assert.match(text(await curl(`"${url}/query?token=$API_TOKEN"`)), /200/);
    const byPath = Object.fromEntries(api.requests.map((r) => [r.url.split('?')[0], r]));
    assert.equal(byPath['/header'].headers.authorization, 'Bearer real-value-1');
    assert.equal(Buffer.from(byPath['/basic'].headers.authorization.slice(6), 'base64').toString(),
      'me:real-value-1');
    assert.equal(byPath['/query'].url, '/query?token=real-value-1');
  });

  it('the cell cannot read the value: not in env, /proc/*/environ, nor any file it can read', async () => {
    const r = await call('env; cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n"; ' +
      'grep -rIl real-value- / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev --exclude-dir=usr 2>/dev/null; echo scanned');
    const out = text(r);
    assert.match(out, /scanned/);
    // env and at least the shell's own /proc/PID/environ were read, with the placeholder.
    assert.ok(out.match(/API_TOKEN=mcpcell-secret-/g).length >= 2, out);
    assert.doesNotMatch(out, /real-value-/);
  });

  it('the placeholder sent to another allowed host is refused and that host gets nothing', async () => {
    const r = await curl(`-H "Authorization: Bearer $API_TOKEN" https://other.test:${other.port}/steal`);
    assert.match(text(r), /403/);
    assert.match(text(r), /secret API_TOKEN refused/);
    assert.equal(other.requests.length, 0);
  });

  it('a JSON body gets the value only for a secret with the "body" surface', async () => {
    const json = (name, p) => curl(`-H 'Content-Type: application/json' ` +
      `--data '{"token":"'"$${name}"'"}' https://api.test:${api.port}${p}`);
    assert.match(text(await json('BODY_TOKEN', '/json')), /200/);
    const got = api.requests.find((x) => x.url === '/json');
    assert.deepEqual(JSON.parse(got.body), { token: 'body-secret-value' });
    const before = api.requests.length;
    const r = text(await json('API_TOKEN', '/json-refused'));
    assert.match(r, /403/);
    assert.match(r, /secret API_TOKEN refused: its placeholder was in the request body/);
    assert.equal(api.requests.length, before);
  });

  it('a placeholder over plain HTTP is refused and nothing is sent', async () => {
    const r = text(await curl(`-H "X-Token: $API_TOKEN" http://plain.test:${plain.port}/plain`));
    assert.match(r, /403/);
    assert.match(r, /secret API_TOKEN refused: its placeholder was in a plain-HTTP request/);
    assert.equal(plain.requests.length, 0);
    // The same host without a placeholder is reached: the refusal is the placeholder's.
    assert.match(text(await curl(`http://plain.test:${plain.port}/clean`)), /200/);
    assert.deepEqual(plain.requests.map((x) => x.url), ['/clean']);
  });

  it('a value the host reflects comes back as the placeholder', async () => {
    const r = text(await call(`got="$(curl -sS -H "X-Echo: $API_TOKEN" https://api.test:${api.port}/echo)"; ` +
      '[ "$got" = "$API_TOKEN" ] && echo masked-ok; printf "%s\n" "$got"'));
    assert.match(r, /masked-ok\nmcpcell-secret-[0-9a-f]{32}/);
    assert.doesNotMatch(r, /real-value/);
    // The upstream did get the value and sent it back: the proxy masked it.
    assert.match(api.requests.find((x) => x.url === '/echo').headers['x-echo'], /^real-value-\d$/);
  });

  it('no process of the cell holds a placeholder secret\'s value in its memory', async () => {
    // The needles (the values of API_TOKEN/SHORT_TOKEN and BODY_TOKEN) are joined at run
    // time so the command text never holds them; the scanner skips its own process, which
    // holds them. Every readable region of every other process of the cell's uid is read.
    const script = `
import os, re
needles = [a.encode() + b.encode() for a, b in (("real-", "value-"), ("body-secret", "-value"))]
me, uid, read, pids, found = os.getpid(), os.getuid(), 0, 0, []
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) == me: continue
    try:
        if os.stat("/proc/" + pid).st_uid != uid: continue
        maps = open("/proc/%s/maps" % pid).read().splitlines()
        mem = open("/proc/%s/mem" % pid, "rb", 0)
    except OSError: continue
    got = read
    for line in maps:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
        if not m or line.endswith("[vvar]"): continue
        lo, hi = int(m.group(1), 16), int(m.group(2), 16)
        try:
            mem.seek(lo); data = mem.read(hi - lo)
        except (OSError, ValueError, OverflowError): continue
        read += len(data)
        found += [pid for n in needles if n in data]
    pids += read > got
print("pids=%d bytes=%d" % (pids, read))
print("FOUND " + " ".join(found) if found else "CLEAN")
`;
    const r = text(await call(`sleep 30 & cat > /tmp/scan.py <<'PYEOF'\n${script}PYEOF\n` +
      'printenv API_TOKEN BODY_TOKEN; python3 /tmp/scan.py; kill $!'));
    assert.match(r, /mcpcell-secret-[0-9a-f]{32}\nmcpcell-secret-[0-9a-f]{32}/);
    const m = r.match(/pids=(\d+) bytes=(\d+)/);
    assert.ok(m, r);
    assert.ok(Number(m[1]) >= 2 && Number(m[2]) > 0, r);  // at least the shell and sleep
    assert.match(r, /\nCLEAN/);
  });

  it('a rotated source is used from the next request on', async () => {
    writeFileSync(path.join(dir, 'token'), 'real-value-2\n');
    assert.match(text(await curl(`-H "X-Token: $API_TOKEN" https://api.test:${api.port}/rotated`)), /200/);
    const got = api.requests.find((x) => x.url === '/rotated');
    assert.equal(got.headers['x-token'], 'real-value-2');
  });

  it('env and file modes give the value to the programs; a call cannot set a secret', async () => {
    // The programs get the value; what the model sees of it, plain or base64, is redacted.
    const e = text(await call(
      '[ "$DB_PASSWORD" = db-password-value ] && echo env-ok; printenv DB_PASSWORD; ' +
      'printf %s "$DB_PASSWORD" | base64'));
    // (OTHER_TOKEN and END_TOKEN share DB_PASSWORD's source: any of their names may label it.)
    assert.match(e, /env-ok\n\[secret [A-Z_]+\]\n\[secret [A-Z_]+\]\n/);
    assert.doesNotMatch(e, /db-password-value|ZGItcGFzc3dvcmQtdmFsdWU/);
    const f = text(await call('[ "$(cat /run/secrets/KEY_FILE)" = file-secret-value ] && ' +
      'echo file-ok; cat /run/secrets/KEY_FILE; stat -c "%a %U" /run/secrets/KEY_FILE'));
    assert.match(f, /file-ok\n\[secret KEY_FILE\]/);
    assert.doesNotMatch(f, /file-secret-value/);
    assert.match(f, /400 (?!root)\w+/);
    const refused = await call('true', { env: { API_TOKEN: 'mine' } });
    assert.equal(refused.isError, true);
    assert.match(text(refused), /arguments\.env\.API_TOKEN: API_TOKEN is a secret the operator granted/);
  });

  it('session_info lists the secrets without values', async () => {
    const r = await server.client.callTool({ name: 'session_info', arguments: {} });
    const names = r.structuredContent.secrets.map((s) => `${s.name}:${s.mode}`);
    assert.deepEqual(names, ['API_TOKEN:placeholder', 'OTHER_TOKEN:placeholder',
      'BODY_TOKEN:placeholder', 'END_TOKEN:placeholder', 'SHORT_TOKEN:placeholder',
      'DB_PASSWORD:env',
      'KEY_FILE:file']);
    assert.doesNotMatch(JSON.stringify(r),
      /real-value|db-password-value|file-secret-value|body-secret-value/);
  });

  it('after its ttl a placeholder is refused and nothing is sent', async () => {
    const before = api.requests.length;
    await sleep(3500);  // SHORT_TOKEN's ttl is 3 s from the session's start
    const r = await curl(`-H "X-Token: $SHORT_TOKEN" https://api.test:${api.port}/late`);
    assert.match(text(r), /403/);
    assert.equal(api.requests.length, before);
    const info = await server.client.callTool({ name: 'session_info', arguments: {} });
    assert.equal(info.structuredContent.secrets.find((s) => s.name === 'SHORT_TOKEN').expired, true);
  });

  // Last: it ends the session.
  it('a violation of a block_and_end_session secret ends the session, naming the secret', async () => {
    const r = await curl(`-H "X-Token: $END_TOKEN" https://other.test:${other.port}/end`);
    // The session may end before the program has printed the 403: then the call says so.
    assert.match(text(r), /403|the session is ending/);
    assert.equal(other.requests.length, 0);
    await waitFor(async () => (await call('true')).isError === true, { what: 'the session to end' });
    const next = await call('true');
    assert.match(text(next), /the session has ended.*secret END_TOKEN was sent where its policy does not allow/s);
  });

  it('bad policies are refused with file:line', () => {
    const bad = path.join(dir, 'bad.toml');
    writeFileSync(bad, `[network]\negress = "allowlist"\nallow = ["api.test"]\n[[secrets]]\n` +
      `name = "T"\nsource = "file:${dir}/token"\nhosts = ["evil.test"]\n`);
    const r = spawnSync(binary('mcpcell'), ['policy', 'check', bad], { encoding: 'utf8' });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, new RegExp(`${bad}:7:10: secrets\\[0\\]\\.hosts\\[0\\]: "evil.test" is not within network.allow`));
  });
});

// Tenants over HTTP: each tenant's sessions hold only its own policy's secrets.
describe('secrets per tenant', { timeout: 120_000 }, () => {
  const sha = (t) => createHash('sha256').update(t).digest('hex');
  const kAlice = 'alice-token-secrets-0001';
  const kBob = 'bob-token-secrets-0002';
  let dir, stateDir, server, alice, bob;
  const run = (s, command) => s.client.callTool({ name: 'run_command', arguments: { command } });

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-secrets-tenants-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-secrets-tenants-state-'));
    for (const who of ['alice', 'bob']) {
      writeFileSync(path.join(dir, `${who}.value`), `${who}-secret-value\n`);
      writeFileSync(path.join(dir, `${who}.toml`), `name = "${who}-secrets"
[[secrets]]
name = "${who.toUpperCase()}_TOKEN"
source = "file:${dir}/${who}.value"
mode = "env"

[[secrets]]
name = "${who.toUpperCase()}_FILE"
source = "file:${dir}/${who}.value"
mode = "file"
`);
    }
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
    bob = await connectHttp(server.url, { token: kBob });
  });

  after(async () => {
    for (const s of [alice, bob]) {
      await s?.transport.terminateSession().catch(() => {});
      await s?.client.close();
    }
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('a tenant cannot get another tenant\'s secret', async () => {
    // Each cell's own values are checked inside it (the result shows them redacted); the
    // other tenant's names and values appear nowhere.
    const probe = 'env; ls /run/secrets; cat /run/secrets/* 2>&1; ' +
      '[ "$ALICE_TOKEN" = alice-secret-value ] && echo has-alice-token; ' +
      '[ "$BOB_TOKEN" = bob-secret-value ] && echo has-bob-token; ' +
      'grep -rl -e alice-secret-value -e bob-secret-value /run/secrets /workspace /tmp 2>/dev/null; ' +
      'echo done';
    const a = text(await run(alice, probe));
    const b = text(await run(bob, probe));
    assert.match(a, /ALICE_TOKEN=\[secret ALICE_TOKEN\]/);
    assert.match(a, /has-alice-token/);
    assert.match(a, /ALICE_FILE/);
    assert.doesNotMatch(a, /bob-secret-value|BOB_|has-bob-token/);
    assert.match(b, /BOB_TOKEN=\[secret BOB_TOKEN\]/);
    assert.match(b, /has-bob-token/);
    assert.doesNotMatch(b, /alice-secret-value|ALICE_|has-alice-token/);
  });
});
