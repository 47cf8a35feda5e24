// The client set-ups in examples/clients: each parses, names `mcpcell serve`, and the
// command it names starts and answers initialize and tools/list over stdio (with the
// built binary standing in for the installed `mcpcell`).

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

import { connect } from '../lib/harness.mjs';

const clientsDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..',
  'examples', 'clients');

function serverEntries() {
  const entries = [];
  const json = (file) => JSON.parse(readFileSync(path.join(clientsDir, file), 'utf8'));
  entries.push(['claude_desktop_config.json', json('claude_desktop_config.json').mcpServers.mcpcell]);
  entries.push(['cursor/mcp.json', json('cursor/mcp.json').mcpServers.mcpcell]);
  const vscode = json('vscode/mcp.json').servers.mcpcell;
  assert.equal(vscode.type, 'stdio');
  entries.push(['vscode/mcp.json', vscode]);
  // `claude mcp add [--scope S] NAME -- COMMAND ARGS...`
  const line = readFileSync(path.join(clientsDir, 'claude_code.sh'), 'utf8')
    .split('\n').find((l) => l.startsWith('claude mcp add'));
  assert.ok(line, 'claude_code.sh has no `claude mcp add` line');
  const words = line.split(/\s+/).filter(Boolean);
  const dashdash = words.indexOf('--');
  assert.ok(dashdash > 0, 'the claude mcp add line needs `--` before the command');
  entries.push(['claude_code.sh', { command: words[dashdash + 1], args: words.slice(dashdash + 2) }]);
  return entries;
}

describe('examples/clients', () => {
  for (const [file, entry] of serverEntries()) {
    it(`${file} starts a working mcpcell server`, async () => {
      assert.equal(entry.command, 'mcpcell', `${file}: the command should be mcpcell`);
      assert.deepEqual(entry.args.slice(0, 1), ['serve'], `${file}: the args should start with serve`);
      const stateDir = mkdtempSync(path.join(tmpdir(), 'mcpcell-client-'));
      const s = await connect({ binaryName: entry.command, args: [...entry.args, '--state-dir', stateDir] });
      try {
        const { tools } = await s.client.listTools();
        assert.ok(tools.some((t) => t.name === 'run_command'), `${file}: no run_command tool`);
        assert.equal(s.client.getServerVersion().name, 'mcpcell');
      } finally {
        await s.close();
        rmSync(stateDir, { recursive: true, force: true });
      }
    });
  }
});
