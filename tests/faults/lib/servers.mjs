// Starting `mcpcell serve --http` for the fault and load tests: a config of tenants (each a
// bearer token and, optionally, its own policy file), SDK sessions per tenant, and small
// helpers to read tool results.

import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

import { connectHttp, startHttpServer } from '../../e2e/test/http_util.mjs';

export { connectHttp, startHttpServer };

const sha = (t) => createHash('sha256').update(t).digest('hex');
export const tokenOf = (tenant) => `token-of-${tenant}-0123456789abcdef`;

// Writes <dir>/http.toml for `tenants` ([{name, policy?, maxSessions?}]) and each tenant's
// policy text to <dir>/<name>.toml. Returns the config's path.
export function writeHttpConfig(dir, tenants) {
  let toml = '';
  for (const t of tenants) {
    toml += `[[tenant]]\nname = "${t.name}"\ntoken_sha256 = ["${sha(tokenOf(t.name))}"]\n`;
    if (t.maxSessions) toml += `max_sessions = ${t.maxSessions}\n`;
    if (t.policy) {
      const file = path.join(dir, `${t.name}.toml`);
      writeFileSync(file, t.policy);
      toml += `policy = "${file}"\n`;
    }
    toml += '\n';
  }
  const config = path.join(dir, 'http.toml');
  writeFileSync(config, toml);
  return config;
}

// A policy like the shipped default whose /workspace is the host directory `dir`.
export function persistentPolicy(name, dir) {
  return `name = "${name}"\n\n[filesystem]\nworkspace = "persistent"\nworkspace_dir = "${dir}"\n`;
}

export function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// Calls a tool and fails with its text when the result is an error.
export async function callOk(client, name, args, options) {
  const r = await client.callTool({ name, arguments: args }, undefined, options);
  if (r.isError) throw new Error(`${name} ${JSON.stringify(args).slice(0, 200)}: ${text(r)}`);
  return r;
}

export async function cellIdOf(client) {
  return (await callOk(client, 'session_info', {})).structuredContent.cell_id;
}
