// Pictures, archives and toolsets (issue 32), driven over stdio by the official MCP
// TypeScript SDK client against `mcpcell serve`, every call in a real cell:
//   - read_file of a PNG (named without an extension) is image content whose bytes decode
//     as the PNG written; list_files marks pictures; an oversized one names the cap;
//   - upload_archive of a tar.gz holding every escape trick (absolute path, "..", a symlink
//     out and a file through it, a file through an inner symlink, a hard link out, a device
//     node, a FIFO, a setuid file) extracts only the safe entries and lists each refusal;
//     zip and tar.zst are read too; two decompression bombs (declared size, and expansion
//     ratio) stop with their reason;
//   - download_archive returns a tar.gz equal to the directory (names, types, modes,
//     bytes, symlink targets), and uploading it again reproduces the tree;
//   - the policy's [tools] toolset switches what tools/list offers.
// The archives are made here with python3's tarfile.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { deflateSync, gunzipSync } from 'node:zlib';

import { connect } from '../lib/harness.mjs';

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// A real PNG: signature, IHDR, one IDAT, IEND, with their CRCs.
function crc32(buf) {
  let c = ~0;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; ++k) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return ~c >>> 0;
}
function chunk(type, data) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}
function makePng(width, height) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8;  // bit depth
  ihdr[9] = 2;  // RGB
  const rows = [];
  for (let y = 0; y < height; ++y) {
    rows.push(Buffer.from([0]));  // filter: none
    const row = Buffer.alloc(width * 3);
    for (let x = 0; x < width; ++x) row.set([x * 8, y * 8, 128], x * 3);
    rows.push(row);
  }
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr), chunk('IDAT', deflateSync(Buffer.concat(rows))), chunk('IEND', Buffer.alloc(0))]);
}

// Runs a python3 tarfile script that writes the archive to sys.argv[1]; returns its bytes.
function python(dir, name, script) {
  const out = path.join(dir, name);
  execFileSync('python3', ['-c', `import io, sys, tarfile\n${script}`, out]);
  return readFileSync(out);
}

const kTarHelpers = `
def add(t, name, data=b'', **kw):
    ti = tarfile.TarInfo(name)
    for k, v in kw.items(): setattr(ti, k, v)
    ti.size = len(data) if ti.type == tarfile.REGTYPE else 0
    t.addfile(ti, io.BytesIO(data) if ti.type == tarfile.REGTYPE else None)
`;

const kEvil = `${kTarHelpers}
with tarfile.open(sys.argv[1], 'w:gz') as t:
    add(t, 'ok.txt', b'fine\\n', mode=0o640)
    add(t, 'sub/', type=tarfile.DIRTYPE, mode=0o755)
    add(t, 'sub/inner.txt', b'inner\\n')
    add(t, '/etc/abs-escape', b'x')
    add(t, '../dotdot-escape', b'x')
    add(t, 'sub/../../dotdot2-escape', b'x')
    add(t, 'outlink', type=tarfile.SYMTYPE, linkname='/etc')
    add(t, 'outlink/passwd', b'through the symlink')
    add(t, 'uplink', type=tarfile.SYMTYPE, linkname='../..')
    add(t, 'uplink/escaped.txt', b'x')
    add(t, 'inlink', type=tarfile.SYMTYPE, linkname='sub')
    add(t, 'inlink/through.txt', b'x')
    add(t, 'hardout', type=tarfile.LNKTYPE, linkname='../../etc/passwd')
    add(t, 'hardabs', type=tarfile.LNKTYPE, linkname='/etc/passwd')
    add(t, 'hardok', type=tarfile.LNKTYPE, linkname='ok.txt')
    add(t, 'null', type=tarfile.CHRTYPE, devmajor=1, devminor=3)
    add(t, 'fifo', type=tarfile.FIFOTYPE)
    add(t, 'suid', b'#!/bin/sh\\n', mode=0o4755)
    add(t, 'last.txt', b'after the refusals\\n')
`;

// 64 MiB of zeros declared in the header: ~150 bytes of tar.bz2.
const kDeclaredBomb = `${kTarHelpers}
with tarfile.open(sys.argv[1], 'w:bz2') as t:
    add(t, 'small.txt', b'kept\\n')
    add(t, 'bomb.bin', b'\\0' * (64 << 20))
`;
// 16 MiB of zeros in ~16 KiB of tar.gz: past the ratio (200) long before the size limit.
const kRatioBomb = `${kTarHelpers}
with tarfile.open(sys.argv[1], 'w:gz') as t:
    add(t, 'ratio.bin', b'\\0' * (16 << 20))
`;

const kPolicy = `name = "archives-full"
[limits]
archive_bytes = "32MiB"
[tools]
toolset = "full"
`;

async function startServer(stateDir, policyFile) {
  const args = ['serve', '--state-dir', stateDir, '--warm-cells', '0'];
  if (policyFile) args.push('--policy', policyFile);
  const s = await connect({ binaryName: 'mcpcell', args });
  await s.client.listTools();  // so the SDK checks structuredContent against outputSchema
  return s;
}

describe('pictures, archives and toolsets', () => {
  let dir;
  let stateDir;
  let s;
  const call = (name, args) => s.client.callTool({ name, arguments: args });
  const sh = async (command) => {
    const r = await call('run_command', { command });
    assert.equal(r.structuredContent.exit_code, 0, text(r));
    return r.structuredContent.stdout;
  };

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-e2e-archives-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-e2e-archives-state-'));
    writeFileSync(path.join(dir, 'policy.toml'), kPolicy);
    s = await startServer(stateDir, path.join(dir, 'policy.toml'));
  });
  after(async () => {
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('read_file returns a PNG (told by its bytes, not its name) as image content that decodes', async () => {
    const png = makePng(7, 5);
    let r = await call('write_file', { path: 'picture.dat', content: png.toString('base64'), encoding: 'base64' });
    assert.equal(r.isError ?? false, false, text(r));
    r = await call('read_file', { path: 'picture.dat' });
    assert.equal(r.isError ?? false, false, text(r));
    const image = r.content.find((c) => c.type === 'image');
    assert.ok(image, JSON.stringify(r.content).slice(0, 300));
    assert.equal(image.mimeType, 'image/png');
    const bytes = Buffer.from(image.data, 'base64');
    assert.deepEqual(bytes.subarray(0, 8), png.subarray(0, 8), 'PNG signature');
    assert.equal(bytes.subarray(12, 16).toString('ascii'), 'IHDR');
    assert.equal(bytes.readUInt32BE(16), 7, 'width');
    assert.equal(bytes.readUInt32BE(20), 5, 'height');
    assert.ok(bytes.equals(png), 'the bytes written');
    assert.equal(r.structuredContent.encoding, 'image');
    assert.equal(r.structuredContent.mime_type, 'image/png');
    assert.equal(r.structuredContent.size_bytes, png.length);
    // encoding "base64" still reads bytes.
    r = await call('read_file', { path: 'picture.dat', encoding: 'base64' });
    assert.equal(r.structuredContent.encoding, 'base64');
    assert.ok(Buffer.from(r.structuredContent.content, 'base64').equals(png));
  });

  it('list_files marks pictures; an oversized picture names the cap; other binaries keep the base64 hint', async () => {
    await call('write_file', { path: 'pics/plot.png', content: makePng(2, 2).toString('base64'), encoding: 'base64' });
    await sh("cd /workspace/pics && printf 'not a png' > fake.png && printf 'GIF89a\\001\\000\\001\\000' > tiny.gif && " +
      "printf '\\211PNG\\r\\n\\032\\n' > big.png && head -c 6291456 /dev/zero >> big.png && head -c 100 /dev/urandom > blob.bin");
    const listed = await call('list_files', { path: 'pics' });
    const byPath = Object.fromEntries(listed.structuredContent.entries.map((e) => [e.path, e]));
    assert.equal(byPath['plot.png'].mime, 'image/png');
    assert.equal(byPath['tiny.gif'].mime, 'image/gif');
    assert.equal(byPath['fake.png'].mime, undefined, 'a .png name whose bytes are not a PNG');
    assert.equal(byPath['blob.bin'].mime, undefined);
    assert.match(text(listed), /^plot\.png\tfile\t\d+\timage\/png$/m);
    const big = await call('read_file', { path: 'pics/big.png' });
    assert.equal(big.isError, true);
    assert.match(text(big), /image is 6\.0 MiB, over the 5\.0 MiB cap for image content; read it with encoding "base64"/);
    const gif = await call('read_file', { path: 'pics/tiny.gif' });
    assert.equal(gif.content[0].type, 'image');
    assert.equal(gif.content[0].mimeType, 'image/gif');
    const blob = await call('read_file', { path: 'pics/blob.bin' });
    assert.equal(blob.isError, true);
    assert.match(text(blob), /binary file .*encoding "base64"/);
  });

  it('upload_archive extracts only what is safe and lists every refusal with its reason', async () => {
    const evil = python(dir, 'evil.tar.gz', kEvil);
    const r = await call('upload_archive', { data: evil.toString('base64'), path: 'up' });
    assert.equal(r.isError ?? false, false, text(r));
    const refused = Object.fromEntries(r.structuredContent.refused.map((e) => [e.path, e.reason]));
    const expect = {
      '/etc/abs-escape': /^absolute path$/,
      '../dotdot-escape': /"\.\." component/,
      'sub/../../dotdot2-escape': /"\.\." component/,
      outlink: /symlink to an absolute path/,
      uplink: /symlink to "\.\.\/\.\." leaves the directory/,
      'inlink/through.txt': /goes through the symlink "inlink"/,
      hardout: /hard link target "\.\.\/\.\.\/etc\/passwd"/,
      hardabs: /hard link target "\/etc\/passwd": absolute path/,
      null: /^device node$/,
      fifo: /^FIFO$/,
      suid: /^setuid\/setgid bit$/,
    };
    for (const [p, re] of Object.entries(expect)) {
      assert.ok(refused[p], `${p} not refused: ${text(r)}`);
      assert.match(refused[p], re, p);
      assert.match(text(r), new RegExp(`^  ${p.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: `, 'm'));
    }
    assert.equal(r.structuredContent.refused_count, Object.keys(expect).length, text(r));
    assert.equal(r.structuredContent.stopped, false);
    const extracted = r.structuredContent.extracted.map((e) => `${e.path}:${e.kind}`).sort();
    assert.deepEqual(extracted, ['hardok:hardlink', 'inlink:symlink', 'last.txt:file', 'ok.txt:file',
      'outlink/passwd:file', 'sub/:directory', 'sub/inner.txt:file', 'uplink/escaped.txt:file']);
    // In the cell: the safe entries, with their modes; nothing outside `up`; the symlink-named
    // paths are plain directories (the refused symlinks were never made).
    const tree = await sh('cd /workspace/up && find . -printf "%p %y %m\\n" | sort');
    assert.equal(tree, ['. d 755', './hardok f 640', './inlink l 777', './last.txt f 644',
      './ok.txt f 640', './outlink d 755', './outlink/passwd f 644', './sub d 755',
      './sub/inner.txt f 644', './uplink d 755', './uplink/escaped.txt f 644'].join('\n') + '\n');
    const outside = await sh('ls /workspace; ls -la /etc/abs-escape /workspace/dotdot-escape /workspace/dotdot2-escape ' +
      '/escaped.txt /workspace/escaped.txt 2>&1 | grep -c "No such file" || true');
    assert.match(outside, /^5$/m, outside);
    assert.equal(await sh('stat -c %i /workspace/up/ok.txt /workspace/up/hardok | uniq | wc -l'), '1\n');
  });

  it('upload_archive reads zip and tar.zst too, with the same refusals', async () => {
    const zipFile = path.join(dir, 'a.zip');
    execFileSync('python3', ['-c', `import sys, zipfile
with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('z/hello.txt', 'hello from zip\\n')
    z.writestr('../zip-escape.txt', 'x')
`, zipFile]);
    let r = await call('upload_archive', { data: readFileSync(zipFile).toString('base64'), path: 'zipped' });
    assert.equal(r.isError ?? false, false, text(r));
    assert.deepEqual(r.structuredContent.refused, [{ path: '../zip-escape.txt',
      reason: '".." component (leaves the directory)' }]);
    assert.equal(await sh('cat /workspace/zipped/z/hello.txt; ls /workspace/zip-escape.txt 2>&1 | grep -c "No such"'),
      'hello from zip\n1\n');
    const tar = python(dir, 'plain.tar', `${kTarHelpers}
with tarfile.open(sys.argv[1], 'w') as t:
    add(t, 'zst/data.txt', b'zstd works\\n')
`);
    const zst = execFileSync('zstd', ['-q', '-c'], { input: tar });
    r = await call('upload_archive', { data: zst.toString('base64'), path: 'zstd' });
    assert.equal(r.isError ?? false, false, text(r));
    assert.equal(await sh('cat /workspace/zstd/zst/data.txt'), 'zstd works\n');
  });

  it('decompression bombs stop the extraction with the limit that stopped it', async () => {
    const declared = python(dir, 'bomb.tar.bz2', kDeclaredBomb);
    assert.ok(declared.length < 1024, `the bomb is ${declared.length} bytes`);
    let r = await call('upload_archive', { data: declared.toString('base64'), path: 'bomb1' });
    assert.equal(r.isError, true, text(r));
    assert.equal(r.structuredContent.stopped, true);
    assert.deepEqual(r.structuredContent.refused, [{ path: 'bomb.bin',
      reason: 'the files add up to more than 33554432 bytes (limits.archive_bytes)' }]);
    assert.match(text(r), /Stopped early/);
    assert.equal(await sh('ls /workspace/bomb1'), 'small.txt\n');

    const ratio = python(dir, 'ratio.tar.gz', kRatioBomb);
    r = await call('upload_archive', { data: ratio.toString('base64'), path: 'bomb2' });
    assert.equal(r.isError, true, text(r));
    assert.equal(r.structuredContent.refused[0].path, 'ratio.bin');
    assert.match(r.structuredContent.refused[0].reason, /^expands more than 200 times \(limits\.archive_ratio\)/);
    assert.equal(await sh('ls -A /workspace/bomb2 | wc -l'), '0\n', 'the entry in progress is removed');
  });

  it('upload_archive refuses bad arguments and data that is no archive, saying what to send', async () => {
    let r = await call('upload_archive', { data: 'not base64!' });
    assert.equal(r.isError, true);
    assert.match(text(r), /^arguments\.data: /);
    r = await call('upload_archive', { data: Buffer.from('just some text').toString('base64') });
    assert.equal(r.isError, true);
    assert.match(text(r), /not a tar or zip archive.*Send a tar, tar\.gz, tar\.bz2, tar\.xz, tar\.zst or zip archive/s);
    r = await call('upload_archive', { data: 'AAAA', extra: 1 });
    assert.equal(r.isError, true);
    assert.match(text(r), /arguments\.extra: unknown field/);
  });

  it('download_archive returns a tar.gz equal to the directory, and uploading it reproduces the tree', async () => {
    await sh('mkdir -p /workspace/tree/a/b && cd /workspace/tree && printf "one\\n" > one.txt && ' +
      'head -c 70000 /dev/urandom > a/random.bin && printf "#!/bin/sh\\necho hi\\n" > a/b/run.sh && ' +
      'chmod 755 a/b/run.sh && chmod 600 one.txt && ln -s a/random.bin link && mkfifo pipe');
    const r = await call('download_archive', { path: 'tree' });
    assert.equal(r.isError ?? false, false, text(r));
    const res = r.content.find((c) => c.type === 'resource');
    assert.equal(res.resource.mimeType, 'application/gzip');
    assert.equal(res.resource.uri, 'cell:///workspace/tree');
    const tgz = Buffer.from(res.resource.blob, 'base64');
    assert.equal(r.structuredContent.bytes, tgz.length);
    assert.deepEqual(r.structuredContent.skipped, ['pipe: FIFO']);
    writeFileSync(path.join(dir, 'tree.tar.gz'), tgz);
    // The archive, read on the host: path type mode size sha256 (or the link target).
    const listing = execFileSync('python3', ['-c', `
import hashlib, sys, tarfile
rows = []
tf = tarfile.open(sys.argv[1])
for m in tf:
    kind = 'd' if m.isdir() else 'l' if m.issym() else 'f'
    extra = m.linkname if m.issym() else hashlib.sha256(tf.extractfile(m).read()).hexdigest() if m.isfile() else '-'
    rows.append(f"./{m.name.rstrip('/')} {kind} {m.mode & 0o777:o} {extra}")
print('\\n'.join(sorted(rows)))
`, path.join(dir, 'tree.tar.gz')]).toString();
    // The directory, read in the cell the same way.
    const cell = await sh('cd /workspace/tree && find . -mindepth 1 ! -type p | sort | while read p; do ' +
      'if [ -L "$p" ]; then echo "$p l 777 $(readlink "$p")"; elif [ -d "$p" ]; then echo "$p d $(stat -c %a "$p") -"; ' +
      'else echo "$p f $(stat -c %a "$p") $(sha256sum < "$p" | cut -d" " -f1)"; fi; done');
    assert.equal(listing.trim(), cell.trim());
    assert.ok(gunzipSync(tgz).length > 70000);
    // Round trip: the archive uploaded again is the same tree.
    const again = await call('upload_archive', { data: tgz.toString('base64'), path: 'copy' });
    assert.equal(again.isError ?? false, false, text(again));
    const a = await sh('cd /workspace/tree && find . ! -type p -printf "%p %y %m %l\\n" | sort && find . -type f -exec sha256sum {} + | sort');
    const b = await sh('cd /workspace/copy && find . -printf "%p %y %m %l\\n" | sort && find . -type f -exec sha256sum {} + | sort');
    assert.equal(b, a);
  });

  it('download_archive of a missing directory says what to do', async () => {
    const r = await call('download_archive', { path: 'no-such-dir' });
    assert.equal(r.isError, true);
    assert.match(text(r), /download_archive \/workspace\/no-such-dir: open\("\/workspace\/no-such-dir"\): ENOENT.*list_files/);
  });

  it('the policy\'s toolset switches tools/list: "full" offers archives and snapshots, the default "core" does not', async () => {
    const full = (await s.client.listTools()).tools.map((t) => t.name);
    for (const n of ['upload_archive', 'download_archive', 'snapshot_create', 'read_file', 'run_command'])
      assert.ok(full.includes(n), `${n} not in ${full}`);
    const coreState = mkdtempSync(path.join(tmpdir(), 'mcpcell-e2e-core-'));
    const core = await startServer(coreState);
    try {
      const names = (await core.client.listTools()).tools.map((t) => t.name);
      assert.deepEqual(names, ['run_code', 'run_command', 'python', 'process', 'read_file',
        'write_file', 'edit_file', 'list_files', 'session_info']);
      await assert.rejects(core.client.callTool({ name: 'upload_archive', arguments: { data: 'AAAA' } }),
        (e) => e.code === -32602);
      const info = await core.client.callTool({ name: 'session_info', arguments: {} });
      assert.match(text(info), /upload_archive, download_archive \(tools\.toolset = "core"\)/);
    } finally {
      await core.close();
      rmSync(coreState, { recursive: true, force: true });
    }
  });
});
