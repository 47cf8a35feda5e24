// Shared harness for the end-to-end tests: finds the built binaries, loads the official MCP
// TypeScript SDK (failing with a clear message when `npm ci` has not been run), and starts a
// server over stdio, either behind the SDK's Client or as a raw child process that the test
// drives byte by byte.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const e2eDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// Checked before the SDK is imported, so a missing install names its fix instead of failing
// with "Cannot find package".
const sdkPackage = path.join(e2eDir, 'node_modules', '@modelcontextprotocol', 'sdk', 'package.json');
if (!existsSync(sdkPackage)) {
  throw new Error(
    `tests/e2e/node_modules is missing (no ${sdkPackage}). ` +
      `Run \`npm ci\` in ${e2eDir} (scripts/test.sh does this) and run the tests again.`,
  );
}

const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
export const types = await import('@modelcontextprotocol/sdk/types.js');
export { Client };

// The protocol revisions mcpcell speaks, oldest first; the last one is what a server answers
// when a client asks for a version it does not know.
export const kSupportedVersions = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
export const kLatestVersion = kSupportedVersions[kSupportedVersions.length - 1];

// Directory holding the built executables: $MCPCELL_BIN_DIR (set by ctest) or build/bin.
export function binDir() {
  return process.env.MCPCELL_BIN_DIR ?? path.resolve(e2eDir, '..', '..', 'build', 'bin');
}

export function binary(name) {
  const file = path.join(binDir(), name);
  if (!existsSync(file)) {
    throw new Error(
      `${file} does not exist: build it first (cmake --build <build dir> --target ${name}) ` +
        `or point MCPCELL_BIN_DIR at the directory that holds it.`,
    );
  }
  return file;
}

export const kConformanceServer = 'mcpcell-conformance-server';

// A StdioClientTransport that can ask for a given protocol version in `initialize` (the SDK
// client always sends its latest) and records the version the server negotiated (the SDK
// client reports it through setProtocolVersion once the handshake is done).
class VersionedStdioTransport extends StdioClientTransport {
  constructor(params, requestedVersion) {
    super(params);
    this.requestedVersion = requestedVersion;
    this.negotiatedVersion = undefined;
    this.stderrText = '';
    this.wire = [];
    this.stderr?.on('data', (chunk) => {
      this.stderrText += chunk.toString();
    });
  }

  async send(message, options) {
    if (this.requestedVersion !== undefined && message.method === 'initialize') {
      message = {
        ...message,
        params: { ...message.params, protocolVersion: this.requestedVersion },
      };
    }
    return super.send(message, options);
  }

  setProtocolVersion(version) {
    this.negotiatedVersion = version;
  }

  // Records every message from the server as it came off the wire, before the SDK
  // dispatches it. The SDK runs notification handlers a microtask after the message is read
  // but response handlers at once, so a progress notification read in the same chunk as its
  // request's response reaches a handler that is already gone; tests that must see every
  // notification read `wire`.
  get onmessage() {
    return this.dispatch;
  }

  set onmessage(fn) {
    this.dispatch =
      fn &&
      ((message, extra) => {
        this.wire.push(message);
        fn(message, extra);
      });
  }
}

// Starts `binaryName` over stdio and connects an SDK client to it.
//   capabilities: the client's capabilities (sampling, elicitation, ...)
//   protocolVersion: the version the client asks for in initialize (default: SDK's latest)
//   args: extra server arguments
//   env: the server's environment (default: the SDK's, a few safe variables only)
// Returns { client, transport, negotiatedVersion, wire, stderr(), close() }; `wire` holds every
// message the server sent, in order.
export async function connect({
  binaryName = kConformanceServer,
  args = ['--stdio'],
  capabilities = {},
  protocolVersion,
  setup,
  env,
} = {}) {
  const transport = new VersionedStdioTransport(
    { command: binary(binaryName), args, stderr: 'pipe', ...(env ? { env } : {}) },
    protocolVersion,
  );
  const client = new Client({ name: 'mcpcell-e2e', version: '0.0.0' }, { capabilities });
  // Handlers that the server may call during the handshake must exist before connect.
  if (setup) setup(client);
  await client.connect(transport);
  return {
    client,
    transport,
    negotiatedVersion: transport.negotiatedVersion,
    wire: transport.wire,
    stderr: () => transport.stderrText,
    close: () => client.close(),
  };
}

// Polls `probe` (async, returns truthy when done) until it succeeds or `timeoutMs` passes.
export async function waitFor(probe, { timeoutMs = 5000, intervalMs = 25, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A server process driven over raw stdio: the test writes bytes and reads newline-delimited
// JSON messages, so it can send what no SDK would (garbage, oversized lines, bad envelopes).
export class RawStdioServer {
  constructor(args = ['--stdio'], binaryName = kConformanceServer) {
    this.child = spawn(binary(binaryName), args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.messages = [];
    this.nonJsonLines = [];
    this.stderrText = '';
    this.exited = new Promise((resolve) => {
      // 'close', not 'exit': it fires once stdout and stderr are drained too.
      this.child.on('close', (code, signal) => resolve({ code, signal }));
    });
    let buffered = '';
    this.child.stdout.on('data', (chunk) => {
      buffered += chunk.toString();
      let newline;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        if (line.trim() === '') continue;
        try {
          this.messages.push(JSON.parse(line));
        } catch {
          this.nonJsonLines.push(line);
        }
      }
    });
    this.child.stderr.on('data', (chunk) => {
      this.stderrText += chunk.toString();
    });
  }

  write(text) {
    this.child.stdin.write(text);
  }

  send(message) {
    this.write(JSON.stringify(message) + '\n');
  }

  // Waits for the first message matching `predicate` that arrived after index `from`.
  async next(predicate, { from = 0, timeoutMs = 5000, what = 'a message' } = {}) {
    return waitFor(() => this.messages.slice(from).find(predicate), { timeoutMs, what });
  }

  responseTo(id, options = {}) {
    return this.next((m) => m.id === id && ('result' in m || 'error' in m), {
      what: `the response to id ${JSON.stringify(id)}`,
      ...options,
    });
  }

  async close() {
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    const status = await this.exited;
    clearTimeout(timer);
    return status;
  }
}
