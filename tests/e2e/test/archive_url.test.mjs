// upload_archive with `url` (issue 32), driven over stdio by the official MCP TypeScript
// SDK client against `mcpcell serve`: the archive is fetched inside the session's cell,
// through its egress proxy, from a loopback HTTP server that --egress-hosts names
// files.test and denied.test; the policy allows files.test only and caps archives at
// 16 KiB. An allowed archive is extracted as `data` would be; a host the policy does not
// allow is refused with the proxy's line (also after a redirect to it); an oversized body
// is refused with or without a Content-Length, and a streamed one is cut off while it
// downloads (the upstream sees its response aborted); an HTTP error is named; every fetch
// shows in the cell's egress counters (the proxy served and recorded it).

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { connect } from '../lib/harness.mjs';

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// A tar.gz of two small files, made with python3's tarfile.
function makeArchive(dir) {
  const out = path.join(dir, 'good.tar.gz');
  execFileSync('python3', ['-c', `import io, sys, tarfile
with tarfile.open(sys.argv[1], 'w:gz') as t:
    for name, data in (('hello.txt', b'hello from a url\\n'), ('sub/data.txt', b'x' * 100)):
        ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
`, out]);
  return readFileSync(out);
}

async function startUpstream(archive) {
  const seen = { streamAborted: false, streamSent: 0 };
  const server = http.createServer((req, res) => {
    const port = server.address().port;
    if (req.url === '/good.tar.gz') {
      res.writeHead(200, { 'content-type': 'application/gzip', 'content-length': archive.length });
      res.end(archive);
    } else if (req.url === '/big') {
      res.writeHead(200, { 'content-length': 64 * 1024 });
      res.end(Buffer.alloc(64 * 1024));
    } else if (req.url === '/stream') {
      // No Content-Length: up to 64 MiB in 64 KiB writes, unless the client goes away.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.on('close', () => { if (!res.writableFinished) seen.streamAborted = true; });
      const chunk = Buffer.alloc(64 * 1024);
      const pump = () => {
        while (seen.streamSent < 64 << 20 && !res.destroyed) {
          seen.streamSent += chunk.length;
          if (!res.write(chunk)) return res.once('drain', pump);
        }
        if (!res.destroyed) res.end();
      };
      pump();
    } else if (req.url === '/redirect') {
      res.writeHead(302, { location: `http://denied.test:${port}/good.tar.gz` });
      res.end();
    } else {
      res.writeHead(404);
      res.end('not here\n');
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { seen, port: server.address().port, close: () => new Promise((r) => server.close(r)) };
}

describe('upload_archive from a url', { timeout: 300_000 }, () => {
  let dir, stateDir, upstream, s;
  const call = (args) => s.client.callTool({ name: 'upload_archive', arguments: args });
  const url = (host, p) => `http://${host}:${upstream.port}${p}`;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-e2e-archive-url-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-e2e-archive-url-state-'));
    upstream = await startUpstream(makeArchive(dir));
    writeFileSync(path.join(dir, 'hosts'), '127.0.0.1 files.test\n127.0.0.1 denied.test\n');
    // The loopback address must be named too: the proxy refuses loopback otherwise.
    writeFileSync(path.join(dir, 'policy.toml'), `name = "archive-url"
[limits]
archive_bytes = "16KiB"
[network]
egress = "allowlist"
allow = ["files.test:${upstream.port}", "127.0.0.1:${upstream.port}"]
[tools]
toolset = "full"
`);
    s = await connect({ binaryName: 'mcpcell', args: ['serve', '--state-dir', stateDir,
      '--warm-cells', '0', '--egress-hosts', path.join(dir, 'hosts'),
      '--policy', path.join(dir, 'policy.toml')] });
    await s.client.listTools();  // so the SDK checks structuredContent against outputSchema
  });
  after(async () => {
    await s?.close();
    await upstream?.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('an allowed host: the archive is fetched in the cell and extracted as data would be', async () => {
    const r = await call({ url: url('files.test', '/good.tar.gz'), path: 'fetched' });
    assert.equal(r.isError ?? false, false, text(r));
    assert.equal(r.structuredContent.path, '/workspace/fetched');
    assert.equal(r.structuredContent.refused_count, 0, text(r));
    const paths = r.structuredContent.extracted.map((e) => e.path);
    assert.ok(paths.includes('hello.txt') && paths.includes('sub/data.txt'), JSON.stringify(paths));
    const cat = await s.client.callTool({ name: 'run_command',
      arguments: { command: 'cat /workspace/fetched/hello.txt; wc -c < /workspace/fetched/sub/data.txt' } });
    assert.equal(cat.structuredContent.stdout, 'hello from a url\n100\n', text(cat));
  });

  it('a host the policy does not allow is refused with the proxy\'s line, also behind a redirect', async () => {
    for (const target of [url('denied.test', '/good.tar.gz'), url('files.test', '/redirect')]) {
      const r = await call({ url: target, path: 'denied' });
      assert.equal(r.isError, true, text(r));
      assert.match(text(r), /refused by the egress policy/, text(r));
      assert.match(text(r), new RegExp(`mcpcell: egress to denied\\.test:${upstream.port} denied`), text(r));
    }
    const ls = await s.client.callTool({ name: 'run_command', arguments: { command: 'ls /workspace' } });
    assert.doesNotMatch(ls.structuredContent.stdout, /denied/, 'a refused fetch extracted something');
  });

  it('a body over limits.archive_bytes is refused: by its Content-Length, or cut off while it streams', async () => {
    let r = await call({ url: url('files.test', '/big'), path: 'big' });
    assert.equal(r.isError, true, text(r));
    assert.match(text(r), /over the 16384 bytes cap for archives \(limits\.archive_bytes.*Content-Length 65536/, text(r));
    r = await call({ url: url('files.test', '/stream'), path: 'stream' });
    assert.equal(r.isError, true, text(r));
    assert.match(text(r), /over the 16384 bytes cap for archives .*body passed the cap after \d+ bytes/, text(r));
    // The fetcher stopped reading at the cap: the upstream saw its response aborted long
    // before its 64 MiB were sent (socket buffers hold a few MiB at most).
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(upstream.seen.streamAborted, true);
    assert.ok(upstream.seen.streamSent < 32 << 20, `the upstream sent ${upstream.seen.streamSent} bytes`);
  });

  it('an HTTP error is named, and the fetches went through the cell\'s egress proxy', async () => {
    const r = await call({ url: url('files.test', '/missing.tar.gz'), path: 'missing' });
    assert.equal(r.isError, true, text(r));
    assert.match(text(r), /the server answered HTTP 404/, text(r));
    const info = await s.client.callTool({ name: 'session_info', arguments: {} });
    const egress = info.structuredContent.egress;
    // good, denied, redirect (+ its refused hop), big, stream, missing.
    assert.ok(egress.connections_total >= 7, JSON.stringify(egress));
    assert.ok(egress.connections_refused >= 2, JSON.stringify(egress));
    assert.ok(egress.bytes_down > 16384, JSON.stringify(egress));
  });
});
