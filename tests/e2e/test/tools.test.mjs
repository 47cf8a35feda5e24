// tools/list and tools/call for every conformance fixture whose result does not depend on the
// client answering a server request (those live in server_requests.test.mjs).

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { connect, types } from '../lib/harness.mjs';

const kFixtureTools = [
  'test_simple_text',
  'test_image_content',
  'test_audio_content',
  'test_embedded_resource',
  'test_multiple_content_types',
  'test_tool_with_logging',
  'test_tool_with_progress',
  'test_error_handling',
  'test_sampling',
  'test_elicitation',
  'test_elicitation_sep1034_defaults',
  'test_elicitation_sep1330_enums',
];

// The conformance suite's json-schema-2020-12 scenario needs $schema, $defs and $ref kept in
// an inputSchema; mcp::Server refuses such schemas today (CheckFlatSchema), so the fixture
// is not served. These tests still run and report as TODO (not as passing) until it is.
const kJsonSchema2020Todo =
  'mcp/ CheckFlatSchema refuses $defs/$ref, so json_schema_2020_12_tool is not registered';

function assertPng(base64) {
  const bytes = Buffer.from(base64, 'base64');
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.equal(bytes.subarray(12, 16).toString('latin1'), 'IHDR');
}

function assertWav(base64) {
  const bytes = Buffer.from(base64, 'base64');
  assert.equal(bytes.subarray(0, 4).toString('latin1'), 'RIFF');
  assert.equal(bytes.subarray(8, 12).toString('latin1'), 'WAVE');
}

describe('tools', () => {
  let session;
  before(async () => {
    session = await connect();
  });
  after(async () => {
    await session?.close();
  });

  it('lists every fixture with a name, description and object input schema', async () => {
    const { tools } = await session.client.listTools();
    const names = tools.map((t) => t.name);
    for (const name of kFixtureTools) assert.ok(names.includes(name), `missing tool ${name}`);
    for (const tool of tools) {
      assert.equal(typeof tool.description, 'string', `${tool.name}: description`);
      assert.ok(tool.description.length > 0, `${tool.name}: empty description`);
      assert.equal(tool.inputSchema.type, 'object', `${tool.name}: inputSchema.type`);
    }
    assert.equal(new Set(names).size, names.length, 'tool names are unique');
  });

  it('keeps JSON Schema 2020-12 keywords in an input schema', { todo: kJsonSchema2020Todo }, async () => {
    const { tools } = await session.client.listTools();
    const tool = tools.find((t) => t.name === 'json_schema_2020_12_tool');
    assert.ok(tool, 'json_schema_2020_12_tool is listed');
    assert.equal(tool.inputSchema.$schema, 'https://json-schema.org/draft/2020-12/schema');
    assert.deepEqual(Object.keys(tool.inputSchema.$defs), ['address']);
    assert.equal(tool.inputSchema.properties.address.$ref, '#/$defs/address');
    assert.equal(tool.inputSchema.additionalProperties, false);
  });

  it('test_simple_text returns the fixed text', async () => {
    const result = await session.client.callTool({ name: 'test_simple_text' });
    assert.notEqual(result.isError, true);
    assert.deepEqual(result.content, [
      { type: 'text', text: 'This is a simple text response for testing.' },
    ]);
  });

  it('test_image_content returns a PNG image', async () => {
    const result = await session.client.callTool({ name: 'test_image_content', arguments: {} });
    assert.equal(result.content.length, 1);
    const [image] = result.content;
    assert.equal(image.type, 'image');
    assert.equal(image.mimeType, 'image/png');
    assertPng(image.data);
  });

  it('test_audio_content returns WAV audio', async () => {
    const result = await session.client.callTool({ name: 'test_audio_content', arguments: {} });
    assert.equal(result.content.length, 1);
    const [audio] = result.content;
    assert.equal(audio.type, 'audio');
    assert.equal(audio.mimeType, 'audio/wav');
    assertWav(audio.data);
  });

  it('test_embedded_resource returns an embedded text resource', async () => {
    const result = await session.client.callTool({ name: 'test_embedded_resource', arguments: {} });
    assert.deepEqual(result.content, [
      {
        type: 'resource',
        resource: {
          uri: 'test://embedded-resource',
          mimeType: 'text/plain',
          text: 'This is an embedded resource content.',
        },
      },
    ]);
  });

  it('test_multiple_content_types returns text, image and resource in order', async () => {
    const result = await session.client.callTool({
      name: 'test_multiple_content_types',
      arguments: {},
    });
    assert.deepEqual(
      result.content.map((c) => c.type),
      ['text', 'image', 'resource'],
    );
    assert.equal(result.content[0].text, 'Multiple content types test:');
    assert.equal(result.content[1].mimeType, 'image/png');
    assertPng(result.content[1].data);
    const { resource } = result.content[2];
    assert.equal(resource.uri, 'test://mixed-content-resource');
    assert.equal(resource.mimeType, 'application/json');
    assert.deepEqual(JSON.parse(resource.text), { test: 'data', value: 123 });
  });

  it('test_error_handling returns isError with a readable message', async () => {
    const result = await session.client.callTool({ name: 'test_error_handling', arguments: {} });
    assert.equal(result.isError, true);
    assert.equal(result.content[0].type, 'text');
    assert.equal(result.content[0].text, 'This tool intentionally returns an error for testing');
  });

  it('json_schema_2020_12_tool accepts arguments matching its schema', { todo: kJsonSchema2020Todo }, async () => {
    const result = await session.client.callTool({
      name: 'json_schema_2020_12_tool',
      arguments: { name: 'Ada', address: { street: '1 Main St', city: 'London' } },
    });
    assert.notEqual(result.isError, true);
    assert.match(result.content[0].text, /Ada/);
    assert.match(result.content[0].text, /London/);
  });

  it('an unknown tool is a JSON-RPC error, not a tool result', async () => {
    await assert.rejects(
      session.client.callTool({ name: 'no_such_tool', arguments: {} }),
      (err) => {
        assert.ok(err instanceof types.McpError, `expected McpError, got ${err}`);
        assert.ok([-32602, -32601].includes(err.code), `unexpected code ${err.code}`);
        assert.match(err.message, /no_such_tool/);
        return true;
      },
    );
  });

  it('arguments of the wrong type are rejected and name the field', async () => {
    let outcome;
    try {
      outcome = await session.client.callTool({
        name: 'test_elicitation',
        arguments: { message: 42 },
      });
    } catch (err) {
      outcome = err;
    }
    if (outcome instanceof Error) {
      assert.equal(outcome.code, -32602);
      assert.match(outcome.message, /message/);
    } else {
      assert.equal(outcome.isError, true, 'a bad argument must not succeed');
      assert.match(outcome.content[0].text, /message/);
    }
  });

  it('the session still serves after errors', async () => {
    const result = await session.client.callTool({ name: 'test_simple_text' });
    assert.equal(result.content[0].text, 'This is a simple text response for testing.');
  });
});
