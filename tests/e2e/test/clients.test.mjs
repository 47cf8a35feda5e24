// The client set-ups in examples/clients: each parses, names `mcpcell serve`, and the
// exact command it names starts, answers initialize and tools/list over stdio and runs a
// command in a cell (with the built binary standing in for the installed `mcpcell`). The
// default state dir is redirected by MCPCELL_STATE_DIR, not by an argument, so the command
// runs as written and still writes nothing outside a temp dir.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
      // The example's own environment, if it has one, then the state dir redirected.
      const s = await connect({ binaryName: entry.command, args: entry.args,
        env: { ...entry.env, MCPCELL_STATE_DIR: stateDir } });
      try {
        const { tools } = await s.client.listTools();
        assert.ok(tools.some((t) => t.name === 'run_command'), `${file}: no run_command tool`);
        assert.equal(s.client.getServerVersion().name, 'mcpcell');
        const r = await s.client.callTool({ name: 'run_command', arguments: { command: 'echo from-the-cell' } });
        assert.equal(r.isError ?? false, false, `${file}: ${r.content.map((c) => c.text).join('\n')}`);
        assert.equal(r.structuredContent.stdout, 'from-the-cell\n', file);
        // The cell is under the temp dir: the server took its state dir from the environment.
        const info = await s.client.callTool({ name: 'session_info', arguments: {} });
        const cellDir = path.join(stateDir, 'cells', info.structuredContent.cell_id);
        assert.ok(existsSync(cellDir), `${file}: the session's cell is not in ${stateDir}/cells`);
      } finally {
        await s.close();
        rmSync(stateDir, { recursive: true, force: true });
      }
    });
  }
});
