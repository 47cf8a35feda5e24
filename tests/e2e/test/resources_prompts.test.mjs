// Resources (static, binary, template, subscribe/updated), prompts and completion.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { connect, sleep, types, waitFor } from '../lib/harness.mjs';

describe('resources', () => {
  let session;
  const updates = [];
  before(async () => {
    session = await connect({
      setup: (client) =>
        client.setNotificationHandler(types.ResourceUpdatedNotificationSchema, (n) => {
          updates.push(n.params.uri);
        }),
    });
  });
  after(async () => {
    await session?.close();
  });

  it('lists the direct resources with uri, name and description', async () => {
    const { resources } = await session.client.listResources();
    const uris = resources.map((r) => r.uri);
    for (const uri of ['test://static-text', 'test://static-binary', 'test://watched-resource']) {
      assert.ok(uris.includes(uri), `missing resource ${uri}`);
    }
    for (const r of resources) {
      assert.equal(typeof r.name, 'string', `${r.uri}: name`);
      assert.equal(typeof r.description, 'string', `${r.uri}: description`);
    }
    assert.ok(!uris.some((u) => u.includes('{')), 'templates are not listed as resources');
  });

  it('lists the template', async () => {
    const { resourceTemplates } = await session.client.listResourceTemplates();
    const template = resourceTemplates.find((t) => t.uriTemplate === 'test://template/{id}/data');
    assert.ok(template, 'test://template/{id}/data is listed');
    assert.equal(template.mimeType, 'application/json');
  });

  it('reads test://static-text', async () => {
    const result = await session.client.readResource({ uri: 'test://static-text' });
    assert.deepEqual(result.contents, [
      {
        uri: 'test://static-text',
        mimeType: 'text/plain',
        text: 'This is the content of the static text resource.',
      },
    ]);
  });

  it('reads test://static-binary as a base64 PNG blob', async () => {
    const result = await session.client.readResource({ uri: 'test://static-binary' });
    assert.equal(result.contents.length, 1);
    const [content] = result.contents;
    assert.equal(content.uri, 'test://static-binary');
    assert.equal(content.mimeType, 'image/png');
    assert.equal(content.text, undefined);
    const bytes = Buffer.from(content.blob, 'base64');
    assert.equal(bytes.subarray(1, 4).toString('latin1'), 'PNG');
  });

  it('reads test://template/{id}/data with the id substituted', async () => {
    for (const id of ['123', 'abc']) {
      const uri = `test://template/${id}/data`;
      const result = await session.client.readResource({ uri });
      assert.equal(result.contents.length, 1);
      assert.equal(result.contents[0].uri, uri);
      assert.equal(result.contents[0].mimeType, 'application/json');
      assert.deepEqual(JSON.parse(result.contents[0].text), {
        id,
        templateTest: true,
        data: `Data for ID: ${id}`,
      });
    }
  });

  it('an unknown resource is a JSON-RPC error naming it', async () => {
    await assert.rejects(session.client.readResource({ uri: 'test://nothing-here' }), (err) => {
      assert.ok([-32002, -32602].includes(err.code), `unexpected code ${err.code}`);
      assert.match(err.message, /test:\/\/nothing-here/);
      return true;
    });
  });

  it('sends resources/updated to a subscriber, and stops after unsubscribe', async () => {
    assert.deepEqual(await session.client.subscribeResource({ uri: 'test://watched-resource' }), {});
    await session.client.callTool({
      name: 'update_watched_resource',
      arguments: { text: 'first update' },
    });
    await waitFor(() => updates.includes('test://watched-resource'), {
      what: 'notifications/resources/updated for test://watched-resource',
    });
    const read = await session.client.readResource({ uri: 'test://watched-resource' });
    assert.equal(read.contents[0].text, 'first update');

    assert.deepEqual(
      await session.client.unsubscribeResource({ uri: 'test://watched-resource' }),
      {},
    );
    const before = updates.length;
    await session.client.callTool({
      name: 'update_watched_resource',
      arguments: { text: 'second update' },
    });
    await sleep(200);
    assert.equal(updates.length, before, 'no update after unsubscribe');
    const reread = await session.client.readResource({ uri: 'test://watched-resource' });
    assert.equal(reread.contents[0].text, 'second update');
  });
});

describe('prompts', () => {
  let session;
  before(async () => {
    session = await connect();
  });
  after(async () => {
    await session?.close();
  });

  it('lists the four fixture prompts with descriptions and arguments', async () => {
    const { prompts } = await session.client.listPrompts();
    const byName = Object.fromEntries(prompts.map((p) => [p.name, p]));
    for (const name of [
      'test_simple_prompt',
      'test_prompt_with_arguments',
      'test_prompt_with_embedded_resource',
      'test_prompt_with_image',
    ]) {
      assert.ok(byName[name], `missing prompt ${name}`);
      assert.equal(typeof byName[name].description, 'string');
    }
    const args = byName.test_prompt_with_arguments.arguments;
    assert.deepEqual(
      args.map((a) => [a.name, a.required]),
      [
        ['arg1', true],
        ['arg2', true],
      ],
    );
    assert.deepEqual(
      byName.test_prompt_with_embedded_resource.arguments.map((a) => a.name),
      ['resourceUri'],
    );
  });

  it('gets test_simple_prompt', async () => {
    const result = await session.client.getPrompt({ name: 'test_simple_prompt' });
    assert.deepEqual(result.messages, [
      { role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } },
    ]);
  });

  it('gets test_prompt_with_arguments with both arguments substituted', async () => {
    const result = await session.client.getPrompt({
      name: 'test_prompt_with_arguments',
      arguments: { arg1: 'hello', arg2: 'world' },
    });
    assert.deepEqual(result.messages, [
      {
        role: 'user',
        content: { type: 'text', text: "Prompt with arguments: arg1='hello', arg2='world'" },
      },
    ]);
  });

  it('refuses test_prompt_with_arguments without a required argument', async () => {
    await assert.rejects(
      session.client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'x' } }),
      (err) => {
        assert.equal(err.code, -32602);
        assert.match(err.message, /arg2/);
        return true;
      },
    );
  });

  it('gets test_prompt_with_embedded_resource with the requested uri', async () => {
    const result = await session.client.getPrompt({
      name: 'test_prompt_with_embedded_resource',
      arguments: { resourceUri: 'test://example-resource' },
    });
    assert.equal(result.messages.length, 2);
    assert.deepEqual(result.messages[0], {
      role: 'user',
      content: {
        type: 'resource',
        resource: {
          uri: 'test://example-resource',
          mimeType: 'text/plain',
          text: 'Embedded resource content for testing.',
        },
      },
    });
    assert.deepEqual(result.messages[1], {
      role: 'user',
      content: { type: 'text', text: 'Please process the embedded resource above.' },
    });
  });

  it('gets test_prompt_with_image', async () => {
    const result = await session.client.getPrompt({ name: 'test_prompt_with_image' });
    assert.equal(result.messages.length, 2);
    const [image, text] = result.messages;
    assert.equal(image.role, 'user');
    assert.equal(image.content.type, 'image');
    assert.equal(image.content.mimeType, 'image/png');
    assert.equal(Buffer.from(image.content.data, 'base64').subarray(1, 4).toString(), 'PNG');
    assert.deepEqual(text.content, { type: 'text', text: 'Please analyze the image above.' });
  });

  it('an unknown prompt is invalid params', async () => {
    await assert.rejects(session.client.getPrompt({ name: 'no_such_prompt' }), (err) => {
      assert.equal(err.code, -32602);
      return true;
    });
  });
});

describe('completion', () => {
  let session;
  before(async () => {
    session = await connect();
  });
  after(async () => {
    await session?.close();
  });

  it('completes a prompt argument by prefix', async () => {
    const result = await session.client.complete({
      ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' },
      argument: { name: 'arg1', value: 'te' },
    });
    assert.ok(Array.isArray(result.completion.values));
    assert.ok(result.completion.values.length > 0, 'some values for prefix "te"');
    for (const v of result.completion.values) assert.ok(v.startsWith('te'), v);
    const none = await session.client.complete({
      ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' },
      argument: { name: 'arg1', value: 'zzz' },
    });
    assert.deepEqual(none.completion.values, []);
  });

  it('completes a resource template variable', async () => {
    const result = await session.client.complete({
      ref: { type: 'ref/resource', uri: 'test://template/{id}/data' },
      argument: { name: 'id', value: '1' },
    });
    assert.ok(result.completion.values.length > 0);
    for (const v of result.completion.values) assert.ok(v.startsWith('1'), v);
  });
});
