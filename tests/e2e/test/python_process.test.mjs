// Issue 32 with the official MCP TypeScript SDK: the `python` tool keeps one interpreter
// per session (state across calls, kept through a timeout and a cancellation, restarted
// when the code ignores KeyboardInterrupt, matplotlib figures returned as PNG images), and
// background processes (`run_command background=true` and the `process` tool): a web
// server in the cell started, polled, written to, read again by a new client connection
// on the same HTTP session, then signalled and waited for.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { Client, connect, waitFor } from '../lib/harness.mjs';
import { StreamableHTTPClientTransport, connectHttp, startHttpServer } from './http_util.mjs';

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

const python = (client, args, options) =>
  client.callTool({ name: 'python', arguments: args }, undefined, options);
const processTool = (client, args) => client.callTool({ name: 'process', arguments: args });

// PNG: the 8-byte signature, then the IHDR chunk (length 13) with width and height.
function checkPng(base64) {
  const png = Buffer.from(base64, 'base64');
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.equal(png.readUInt32BE(8), 13, 'IHDR length');
  assert.equal(png.subarray(12, 16).toString('latin1'), 'IHDR');
  const width = png.readUInt32BE(16);
  const height = png.readUInt32BE(20);
  assert.ok(width > 0 && height > 0, `image size ${width}x${height}`);
  assert.equal(png.subarray(png.length - 8, png.length - 4).toString('latin1'), 'IEND');
  return { width, height };
}

describe('python: a persistent interpreter per session (stdio)', () => {
  let stateDir;
  let s;
  before(async () => {
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-py-e2e-'));
    s = await connect({ binaryName: 'mcpcell', args: ['serve', '--state-dir', stateDir] });
    const { tools } = await s.client.listTools();
    assert.ok(tools.some((t) => t.name === 'python'), 'python is listed');
    assert.ok(tools.some((t) => t.name === 'process'), 'process is listed');
  });
  after(async () => {
    await s?.close();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('keeps variables and imports, and returns the repr of a final expression', async () => {
    const first = await python(s.client, { code: 'import math\nx = 41\nprint("hello")' });
    assert.equal(first.isError, undefined, text(first));
    assert.match(text(first), /hello/);
    const second = await python(s.client, { code: 'x + 1, math.floor(2.5)' });
    assert.equal(second.structuredContent.result, '(42, 2)', text(second));
    const failed = await python(s.client, { code: '1 / 0' });
    assert.equal(failed.isError, true);
    assert.match(failed.structuredContent.error, /ZeroDivisionError/);
    const after = await python(s.client, { code: 'x' });
    assert.equal(after.structuredContent.result, '41', 'an exception keeps the state');
  });

  it('a timeout interrupts the code with KeyboardInterrupt and keeps the state', async () => {
    const r = await python(s.client, {
      code: 'import time\ny = 7\ntime.sleep(120)\ny = 8', timeout_s: 2 });
    assert.equal(r.isError, true, text(r));
    assert.match(text(r), /timed out/);
    assert.match(r.structuredContent.error, /KeyboardInterrupt/);
    const state = await python(s.client, { code: 'x, y' });
    assert.equal(state.structuredContent.result, '(41, 7)', text(state));
  });

  it('a cancellation (AbortSignal) interrupts the code and keeps the state', async () => {
    const abort = new AbortController();
    const call = python(s.client, { code: 'import time\nz = 5\ntime.sleep(40)\nz = 6',
      timeout_s: 100 }, { signal: abort.signal });
    setTimeout(() => abort.abort('test cancels'), 1500);
    await assert.rejects(call);
    // Runs after the interrupted call (calls of a session are serial): z is still 5 only
    // if the interrupt stopped the code before its last line.
    const state = await python(s.client, { code: 'x, y, z' });
    assert.equal(state.structuredContent.result, '(41, 7, 5)', text(state));
  });

  it('returns matplotlib figures as PNG images, with no code for it', async () => {
    const r = await python(s.client, { code:
      'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.title("t")' });
    assert.equal(r.isError, undefined, text(r));
    const images = r.content.filter((c) => c.type === 'image');
    assert.equal(images.length, 1, JSON.stringify(r.content.map((c) => c.type)));
    assert.equal(images[0].mimeType, 'image/png');
    checkPng(images[0].data);
    const next = await python(s.client, { code: 'len(plt.get_fignums())' });
    assert.equal(next.structuredContent.result, '0', 'figures were closed');
    assert.equal(next.content.filter((c) => c.type === 'image').length, 0);
  });

  it('restarts an interpreter whose code ignores KeyboardInterrupt, and says so', async () => {
    const r = await python(s.client, { code:
      'import time\nwhile True:\n    try:\n        time.sleep(60)\n    except KeyboardInterrupt:\n'
      + '        pass', timeout_s: 1 });
    assert.equal(r.isError, true);
    assert.match(text(r), /did not stop on KeyboardInterrupt.*killed/s);
    const fresh = await python(s.client, { code: 'x' });
    assert.match(text(fresh), /restarted/);
    assert.match(fresh.structuredContent.error, /NameError/);
    const reset = await python(s.client, { code: 'q = 3', reset: true });
    assert.match(text(reset), /reset=true/);
    assert.equal((await python(s.client, { code: 'q' })).structuredContent.result, '3');
  });

  it('refuses bad process arguments, naming the problem', async () => {
    const unknown = await processTool(s.client, { action: 'output', id: 'p999' });
    assert.equal(unknown.isError, true);
    assert.match(text(unknown), /no background process "p999".*action=list/);
    const misplaced = await processTool(s.client, { action: 'list', data: 'x' });
    assert.equal(misplaced.isError, true);
    assert.match(text(misplaced), /arguments\.data: not taken by action=list \(only by write\)/);
    const list = await processTool(s.client, { action: 'list' });
    assert.match(text(list), /\[python\] running/, 'the interpreter is a background process');
  });
});

describe('background processes over HTTP: a web server survives a reconnect', () => {
  let stateDir;
  let server;
  before(async () => {
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-bg-e2e-'));
    server = await startHttpServer('mcpcell', ['serve', '--http', '127.0.0.1:0', '--state-dir',
      stateDir, '--warm-cells', '0']);
  });
  after(async () => {
    await server?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('starts, polls, writes, reconnects, reads what it missed, signals and waits', async () => {
    const a = await connectHttp(server.url);
    await a.client.listTools();
    const script = [
      'import http.server, sys, threading',
      'srv = http.server.ThreadingHTTPServer(("127.0.0.1", 8123), '
        + 'http.server.SimpleHTTPRequestHandler)',
      'threading.Thread(target=srv.serve_forever, daemon=True).start()',
      'print("serving on 8123", flush=True)',
      'for line in sys.stdin:',
      '    print("console:", line.strip(), flush=True)',
    ].join('\n');
    const started = await a.client.callTool({ name: 'run_command', arguments: {
      command: `python3 -u -c '${script}'`, background: true } });
    assert.equal(started.isError, undefined, text(started));
    const id = started.structuredContent.process_id;
    assert.match(id, /^p\d+$/);

    // Polled with `process output` until the server is up (each read continues the last).
    let seen = '';
    for (let i = 0; i < 100 && !seen.includes('serving on 8123'); ++i) {
      const out = await processTool(a.client, { action: 'output', id });
      assert.equal(out.isError, undefined, text(out));
      seen += out.structuredContent.output;
      if (!seen.includes('serving')) await new Promise((r) => setTimeout(r, 100));
    }
    assert.match(seen, /serving on 8123/);

    const wrote = await processTool(a.client, { action: 'write', id, data: 'hello there\n' });
    assert.equal(wrote.structuredContent.bytes_written, 12, text(wrote));
    const fetched = await a.client.callTool({ name: 'run_command', arguments: { command:
      'python3 -c \'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:8123/").status)\'' } });
    assert.match(fetched.structuredContent.stdout, /^200/, text(fetched));

    // The first client goes away without ending the session; a new one joins it.
    const sessionId = a.transport.sessionId;
    await a.client.close();
    const transport = new StreamableHTTPClientTransport(new URL(server.url), { sessionId });
    const b = new Client({ name: 'e2e-reconnect', version: '1.0.0' }, { capabilities: {} });
    await b.connect(transport);
    try {
      const list = await processTool(b, { action: 'list' });
      assert.match(text(list), new RegExp(`${id} \\[command\\] running`));
      const missed = await processTool(b, { action: 'output', id, cursor: 0 });
      const all = missed.structuredContent.output;
      assert.match(all, /serving on 8123/);
      assert.match(all, /console: hello there/);
      assert.match(all, /"GET \/ HTTP\/1\.1" 200/);
      const bad = await processTool(b, { action: 'output', id, cursor: 1e9 });
      assert.equal(bad.isError, true);
      assert.match(text(bad), /arguments\.cursor: 1000000000 is past the end/);

      const signalled = await processTool(b, { action: 'signal', id, signal: 'SIGTERM' });
      assert.equal(signalled.isError, undefined, text(signalled));
      const waited = await processTool(b, { action: 'wait', id, timeout_s: 20 });
      assert.equal(waited.structuredContent.state, 'killed', text(waited));
      assert.equal(waited.structuredContent.signal, 'SIGTERM');
      const info = await b.callTool({ name: 'session_info', arguments: {} });
      assert.match(text(info), new RegExp(`background process ${id} \\[command\\]: killed by SIGTERM`));
      const again = await processTool(b, { action: 'signal', id });
      assert.equal(again.isError, true);
      assert.match(text(again), /not running/);
    } finally {
      await transport.terminateSession().catch(() => {});
      await b.close();
    }
  });
});

describe('background processes and hibernation', () => {
  it('a hibernated cell stops its processes: list and session_info say so, the output stays', async () => {
    const stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-bg-hib-e2e-'));
    const s = await connect({ binaryName: 'mcpcell',
      args: ['serve', '--state-dir', stateDir, '--idle-timeout', '2'] });
    try {
      await s.client.listTools();
      const started = await s.client.callTool({ name: 'run_command', arguments: {
        command: 'echo before-hibernation; exec sleep 1000', background: true } });
      const id = started.structuredContent.process_id;
      const info = await s.client.callTool({ name: 'session_info', arguments: {} });
      const oldDir = path.join(stateDir, 'cells', info.structuredContent.cell_id);
      assert.match(text(info), new RegExp(`background process ${id} \\[command\\]: running`));
      // No call for 2 s: the cell hibernates although the process runs (it is not activity).
      await waitFor(() => !existsSync(oldDir), { timeoutMs: 10000, intervalMs: 100,
        what: `${oldDir} to be removed` });
      const list = await processTool(s.client, { action: 'list' });
      assert.match(text(list), new RegExp(`${id} \\[command\\] stopped: the cell it ran in ended`));
      assert.equal(list.structuredContent.processes[0].state, 'stopped');
      const after = await s.client.callTool({ name: 'session_info', arguments: {} });
      assert.match(text(after), new RegExp(`background process ${id} \\[command\\]: stopped`));
      const out = await processTool(s.client, { action: 'output', id, cursor: 0 });
      assert.match(out.structuredContent.output, /before-hibernation/, 'kept with the workspace');
    } finally {
      await s.close();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
