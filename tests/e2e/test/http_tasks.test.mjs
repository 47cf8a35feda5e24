// Tasks for long runs (MCP 2026-07-28, the io.modelcontextprotocol/tasks extension, issue 30)
// against `mcpcell serve --http`: run_command called by a client that declared the extension
// answers with a task once the program outlives the task threshold; the program keeps
// running after that request's connection is gone; tasks/get on new connections brings its
// status and, at the end, its result; tasks/cancel kills the program's whole process group;
// another tenant's task id is not found; a client without the extension gets the result
// itself, as before. Raw JSON-RPC over fetch, so that each request is its own connection and
// the wire shapes are the ones the spec names.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { startHttpServer, tenantsConfig } from './http_util.mjs';

const kAlice = 'alice-token-tasks-e2e-000001';
const kBob = 'bob-token-tasks-e2e-00000002';
const kVersion = '2026-07-28';
const kTasks = 'io.modelcontextprotocol/tasks';

let nextId = 1;

// One new-era request on a connection of its own; returns the JSON-RPC response (from a
// JSON body or the last message of an SSE stream).
async function call(url, token, method, params, { tasks = true, name, sandbox } = {}) {
  const capabilities = tasks ? { extensions: { [kTasks]: {} } } : {};
  const body = {
    jsonrpc: '2.0', id: nextId++, method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': kVersion,
        'io.modelcontextprotocol/clientCapabilities': capabilities,
        'io.modelcontextprotocol/clientInfo': { name: 'e2e-tasks', version: '1.0.0' },
      },
    },
  };
  const headers = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    Authorization: `Bearer ${token}`,
    'MCP-Protocol-Version': kVersion,
    'Mcp-Method': method,
    Connection: 'close',
  };
  if (name) headers['Mcp-Name'] = name;
  if (sandbox) headers['Mcp-Param-Sandbox'] = sandbox;
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  const text = await res.text();
  if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const messages = text.split('\n').filter((l) => l.startsWith('data:'))
      .map((l) => JSON.parse(l.slice(5)));
    const answer = messages.find((m) => m.id === body.id);
    assert.ok(answer, `no answer in the stream: ${text}`);
    return answer;
  }
  // An error answer comes with the HTTP status the spec gives it (e.g. 400 for -32602).
  const answer = JSON.parse(text);
  assert.equal(res.status, answer.error ? res.status : 200, text);
  return { ...answer, status: res.status };
}

const toolCall = (url, token, sandbox, tool, args, opts = {}) =>
  call(url, token, 'tools/call', { name: tool, arguments: { sandbox, ...args } },
    { name: tool, sandbox, ...opts });

function text(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// Polls tasks/get (each time on a new connection) until the task leaves "working".
async function settle(url, token, taskId) {
  const deadline = Date.now() + 60000;
  for (;;) {
    const got = await call(url, token, 'tasks/get', { taskId }, { name: taskId });
    assert.ok(got.result, JSON.stringify(got));
    if (got.result.status !== 'working' || Date.now() > deadline) return got.result;
    await new Promise((r) => setTimeout(r, Math.min(got.result.pollIntervalMs ?? 200, 500)));
  }
}

describe('mcpcell over HTTP: run_command as a task (2026-07-28 Tasks extension)', () => {
  let dir;
  let stateDir;
  let server;
  let url;
  let handle;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mcpcell-tasks-e2e-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-tasks-state-'));
    const config = path.join(dir, 'http.toml');
    writeFileSync(config, tenantsConfig([{ name: 'alice', token: kAlice },
      { name: 'bob', token: kBob }]));
    server = await startHttpServer('mcpcell', ['serve', '--http', '127.0.0.1:0', '--http-config',
      config, '--state-dir', stateDir, '--warm-cells', '0']);
    url = server.url;
    const made = await call(url, kAlice, 'tools/call', { name: 'sandbox_create', arguments: {} },
      { name: 'sandbox_create' });
    assert.ok(made.result && !made.result.isError, JSON.stringify(made));
    handle = made.result.structuredContent.sandbox;
  });
  after(async () => {
    const code = await server?.stop();
    assert.equal(code, 0, `server exit code; stderr:\n${server?.stderr()}`);
    rmSync(dir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('lists run_command and run_code as task-capable', async () => {
    const listed = await call(url, kAlice, 'tools/list', {});
    for (const name of ['run_command', 'run_code']) {
      const tool = listed.result.tools.find((t) => t.name === name);
      assert.equal(tool.execution?.taskSupport, 'optional', JSON.stringify(tool));
    }
  });

  it('answers a long run with a task whose result outlives the request', async () => {
    const started = await toolCall(url, kAlice, handle, 'run_command',
      { command: 'sleep 3; echo finished-after-the-request > /workspace/task.txt; echo done' });
    assert.equal(started.result?.resultType, 'task', JSON.stringify(started));
    const taskId = started.result.taskId;
    assert.match(taskId, /\S{16,}/);
    // The request that started it is answered and its connection closed; the program runs on.
    const mid = await call(url, kAlice, 'tasks/get', { taskId }, { name: taskId });
    assert.equal(mid.result.status, 'working', JSON.stringify(mid));
    const end = await settle(url, kAlice, taskId);
    assert.equal(end.status, 'completed', JSON.stringify(end));
    assert.equal(end.result.isError ?? false, false, JSON.stringify(end));
    assert.equal(end.result.structuredContent.exit_code, 0);
    assert.match(end.result.structuredContent.stdout, /done/);
    // Its files are in the sandbox, and the result can be fetched again until its TTL.
    const cat = await toolCall(url, kAlice, handle, 'run_command',
      { command: 'cat /workspace/task.txt' });
    assert.match(text(cat.result), /finished-after-the-request/);
    const again = await call(url, kAlice, 'tasks/get', { taskId }, { name: taskId });
    assert.equal(again.result.status, 'completed');

    // Another tenant's client: not found, like an id that never existed.
    const stolen = await call(url, kBob, 'tasks/get', { taskId }, { name: taskId });
    const unknown = await call(url, kBob, 'tasks/get', { taskId: 'no-such-task-id-0000000000' },
      { name: 'no-such-task-id-0000000000' });
    assert.ok(stolen.error, JSON.stringify(stolen));
    assert.equal(stolen.error.code, unknown.error.code);
    assert.equal(stolen.status, unknown.status);
    assert.equal(stolen.error.message.replace(taskId, 'ID'),
      unknown.error.message.replace('no-such-task-id-0000000000', 'ID'));
  });

  it('kills the whole process group on tasks/cancel', async () => {
    const started = await toolCall(url, kAlice, handle, 'run_command',
      { command: 'sleep 1000 & sleep 1000 & echo spawned; wait', timeout_s: 600 });
    assert.equal(started.result?.resultType, 'task', JSON.stringify(started));
    const taskId = started.result.taskId;
    const count = 'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < $f 2>/dev/null; echo; done' +
      ' | grep -c "^sleep 1000 "';
    const before = await toolCall(url, kAlice, handle, 'run_command', { command: count });
    assert.equal(before.result.structuredContent.stdout.trim(), '2', JSON.stringify(before));
    const cancelled = await call(url, kAlice, 'tasks/cancel', { taskId }, { name: taskId });
    assert.ok(!cancelled.error, JSON.stringify(cancelled));
    const end = await settle(url, kAlice, taskId);
    assert.equal(end.status, 'cancelled', JSON.stringify(end));
    const afterCancel = await toolCall(url, kAlice, handle, 'run_command', { command: count });
    assert.equal(afterCancel.result.structuredContent.stdout.trim(), '0');
  });

  it('gives a client without the extension the result itself', async () => {
    const ran = await toolCall(url, kAlice, handle, 'run_command',
      { command: 'sleep 2; echo plain' }, { tasks: false });
    assert.notEqual(ran.result?.resultType, 'task', JSON.stringify(ran));
    assert.match(text(ran.result), /plain/);
  });
});
