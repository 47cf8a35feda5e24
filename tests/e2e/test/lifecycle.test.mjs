// Lifecycle over stdio with the official SDK client: version negotiation at every revision
// mcpcell supports, capabilities, server info, ping, logging level.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { connect, kLatestVersion, kSupportedVersions, types } from '../lib/harness.mjs';

describe('initialize', () => {
  for (const version of kSupportedVersions) {
    it(`negotiates ${version} when the client asks for it`, async () => {
      const session = await connect({ protocolVersion: version });
      try {
        assert.equal(session.negotiatedVersion, version);
        // The session is usable after the handshake at this version.
        const tools = await session.client.listTools();
        assert.ok(tools.tools.some((t) => t.name === 'test_simple_text'));
      } finally {
        await session.close();
      }
    });
  }

  it('answers an unknown version with the latest it supports', async () => {
    const session = await connect({ protocolVersion: '1999-01-01' });
    try {
      assert.equal(session.negotiatedVersion, kLatestVersion);
    } finally {
      await session.close();
    }
  });

  it('reports server info and the capabilities the fixtures need', async () => {
    const session = await connect();
    try {
      const info = session.client.getServerVersion();
      assert.equal(typeof info.name, 'string');
      assert.ok(info.name.length > 0);
      assert.equal(typeof info.version, 'string');
      const caps = session.client.getServerCapabilities();
      assert.ok(caps.tools, 'tools capability');
      assert.ok(caps.resources, 'resources capability');
      assert.equal(caps.resources.subscribe, true, 'resources.subscribe');
      assert.ok(caps.prompts, 'prompts capability');
      assert.ok(caps.logging, 'logging capability');
      assert.ok(caps.completions, 'completions capability');
    } finally {
      await session.close();
    }
  });

  it('answers ping and logging/setLevel with an empty result', async () => {
    const session = await connect();
    try {
      assert.deepEqual(await session.client.ping(), {});
      assert.deepEqual(await session.client.setLoggingLevel('info'), {});
    } finally {
      await session.close();
    }
  });

  it('rejects an unknown logging level with invalid params', async () => {
    const session = await connect();
    try {
      await assert.rejects(
        session.client.request(
          { method: 'logging/setLevel', params: { level: 'loudest' } },
          types.EmptyResultSchema,
        ),
        (err) => err.code === -32602,
      );
    } finally {
      await session.close();
    }
  });
});
