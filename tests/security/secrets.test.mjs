// Escape probes, secrets: the server's environment (a decoy variable), its files (a decoy
// secret, the HTTP config with a tenant's token hash, the state dir) and the token itself
// are never visible inside a cell: not in its environment, not in any /proc/*/environ or
// cmdline it can read, not anywhere in its filesystem, not in a tool result.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { StreamableHTTPClientTransport } from '../e2e/test/http_util.mjs';
import { Client } from '../e2e/lib/harness.mjs';
import {
  assertHealthy, cleanup, hostTempDir, kDecoy, kDecoyVar, kPySyscall, startHttp, startStdio, text, writeDecoyFile,
} from './lib/sec.mjs';

const kToken = `sec-token-${kDecoy.slice(-16)}`;
const kTokenHash = createHash('sha256').update(kToken).digest('hex');

// Python: every environ and cmdline under /proc the cell can read, and every file in the
// cell's own trees (not /usr: the host's system files, read-only and never written by the
// server; not /proc, /sys, /dev), searched for the needles. Prints what it looked at. The
// needles travel base64-encoded, so the probe's own command line does not hold them.
const search = (needles) => `${kPySyscall}
import base64
needles = [base64.b64decode(n) for n in ${JSON.stringify(needles.map((n) => Buffer.from(n).toString('base64')))}]
found, read_proc, read_files = [], 0, 0
for pid in os.listdir('/proc'):
    if not pid.isdigit():
        continue
    for what in ('environ', 'cmdline'):
        try:
            data = open(f'/proc/{pid}/{what}', 'rb').read()
        except OSError:
            continue
        read_proc += 1
        found += [f'/proc/{pid}/{what}' for n in needles if n in data]
for top in ('/etc', '/var', '/opt', '/srv', '/mnt', '/home', '/root', '/tmp', '/run', '/workspace', '/dev/shm'):
    for root, dirs, files in os.walk(top):
        for name in files:
            p = os.path.join(root, name)
            try:
                if not os.path.isfile(p) or os.path.islink(p):
                    continue
                data = open(p, 'rb').read(1 << 20)
            except OSError:
                continue
            read_files += 1
            found += [p for n in needles if n in data]
print(json.dumps({'found': found, 'read_proc': read_proc, 'read_files': read_files, 'env': dict(os.environ)}))`;

describe('secrets (stdio)', () => {
  let dir;
  let stateDir;
  let s;

  before(async () => {
    dir = hostTempDir('mcpcell-sec-secrets-');
    stateDir = hostTempDir('mcpcell-sec-secrets-state-');
    writeDecoyFile(dir);
    s = await startStdio(stateDir, ['--warm-cells', '0']);
  });
  after(async () => {
    await s?.close();
    cleanup(dir);
    cleanup(stateDir);
  });

  it('the server\'s environment is not the cell\'s: the decoy is in no environ, cmdline or file a cell can read', async () => {
    assert.equal(process.env[kDecoyVar], kDecoy, 'the decoy is in the environment the server inherited');
    // A background process too: its environ is the user's to read.
    await s.run('sleep 60 >/dev/null 2>&1 &');
    const r = await s.pyJson(search([kDecoy, kDecoyVar]), { timeout_s: 120 });
    assert.deepEqual(r.found, []);
    assert.ok(r.read_proc >= 4, `read ${r.read_proc} /proc environ/cmdline files`);
    assert.ok(r.read_files >= 20, `read ${r.read_files} files`);
    assert.equal(r.env[kDecoyVar], undefined);
    assert.equal(r.env.MCPCELL_POLICY, 'default');
    const env = await s.run('env; cat /proc/1/environ 2>&1; true');
    assert.ok(!env.stdout.includes(kDecoy));
    const info = await s.call('session_info');
    assert.ok(!text(info).includes(kDecoy) && !JSON.stringify(info.structuredContent).includes(stateDir),
      'session_info names neither the decoy nor the host state dir');
    await s.run('pkill sleep || true');
    await assertHealthy(s, () => startStdio(stateDir, ['--warm-cells', '0']));
  });
});

describe('secrets (HTTP with a tenant token)', () => {
  let dir;
  let stateDir;
  let config;
  let server;

  before(async () => {
    dir = hostTempDir('mcpcell-sec-token-');
    stateDir = hostTempDir('mcpcell-sec-token-state-');
    config = path.join(dir, 'http.toml');
    writeFileSync(config, `[[tenant]]\nname = "sec"\ntoken_sha256 = ["${kTokenHash}"]\n`, { mode: 0o600 });
    server = await startHttp(stateDir, ['--warm-cells', '0', '--http-config', config]);
  });
  after(async () => {
    const code = await server?.stop();
    assert.equal(code, 0, server?.stderr());
    cleanup(dir);
    cleanup(stateDir);
  });

  async function session() {
    const transport = new StreamableHTTPClientTransport(new URL(server.url), {
      requestInit: { headers: { Authorization: `Bearer ${kToken}` } },
    });
    const client = new Client({ name: 'mcpcell-sec', version: '0.0.0' }, { capabilities: {} });
    await client.connect(transport);
    const call = (name, args = {}) => client.callTool({ name, arguments: args }, undefined, { timeout: 180000 });
    return {
      call,
      async run(command, args = {}) {
        const r = await call('run_command', { command, ...args });
        assert.equal(r.isError ?? false, false, text(r));
        return r.structuredContent;
      },
      async pyJson(code, args = {}) {
        const r = await call('run_code', { language: 'python', code, ...args });
        assert.equal(r.isError ?? false, false, text(r));
        const lines = r.structuredContent.stdout.trim().split('\n');
        return JSON.parse(lines[lines.length - 1]);
      },
      close: async () => {
        await transport.terminateSession().catch(() => {});
        await client.close();
      },
    };
  }

  it('the bearer token, its hash, the config file and the decoy stay out of the cell', async () => {
    const s = await session();
    try {
      const cfg = await s.call('read_file', { path: config });
      assert.equal(cfg.isError, true);
      assert.match(text(cfg), /ENOENT/);
      const r = await s.pyJson(search([kToken, kTokenHash, kDecoy]), { timeout_s: 120 });
      assert.deepEqual(r.found, []);
      assert.ok(r.read_proc >= 2 && r.read_files >= 20);
      assert.equal(r.env[kDecoyVar], undefined);
      await assertHealthy(s, session);
    } finally {
      await s.close();
    }
  });
});
