// What flows from the server to the client during a tool call: logging and progress
// notifications, sampling and elicitation requests answered by the client's handlers, and
// cancellation from the client's side.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { connect, sleep, types, waitFor } from '../lib/harness.mjs';

describe('notifications during a call', () => {
  it('test_tool_with_logging sends three info messages while it runs', async () => {
    const logs = [];
    const session = await connect({
      setup: (client) =>
        client.setNotificationHandler(types.LoggingMessageNotificationSchema, (n) => {
          logs.push(n.params);
        }),
    });
    try {
      await session.client.setLoggingLevel('debug');
      const result = await session.client.callTool({ name: 'test_tool_with_logging', arguments: {} });
      assert.notEqual(result.isError, true);
      assert.equal(result.content[0].type, 'text');
      // Notifications sent before the response are delivered before it (one ordered stream).
      assert.deepEqual(
        logs.map((l) => [l.level, l.data]),
        [
          ['info', 'Tool execution started'],
          ['info', 'Tool processing data'],
          ['info', 'Tool execution completed'],
        ],
      );
    } finally {
      await session.close();
    }
  });

  it('logging/setLevel filters messages below the level', async () => {
    const logs = [];
    const session = await connect({
      setup: (client) =>
        client.setNotificationHandler(types.LoggingMessageNotificationSchema, (n) => {
          logs.push(n.params);
        }),
    });
    try {
      await session.client.setLoggingLevel('warning');
      await session.client.callTool({ name: 'test_tool_with_logging', arguments: {} });
      await sleep(100);
      assert.deepEqual(logs, [], 'info messages must not pass a warning threshold');
    } finally {
      await session.close();
    }
  });

  it('test_tool_with_progress reports 0, 50, 100 of 100 against the request token', async () => {
    const session = await connect();
    try {
      const updates = [];
      const result = await session.client.callTool(
        { name: 'test_tool_with_progress', arguments: {} },
        undefined,
        { onprogress: (p) => updates.push(p) },
      );
      assert.notEqual(result.isError, true);
      // On the wire: three notifications, all for the token the SDK put in the request.
      const call = session.wire.findIndex((m) => m.result?.content);
      const progress = session.wire.filter((m) => m.method === 'notifications/progress');
      assert.deepEqual(
        progress.map((m) => [m.params.progress, m.params.total]),
        [
          [0, 100],
          [50, 100],
          [100, 100],
        ],
      );
      assert.equal(new Set(progress.map((m) => m.params.progressToken)).size, 1, 'one token');
      assert.equal(String(progress[0].params.progressToken), String(session.wire[call].id));
      assert.ok(
        session.wire.lastIndexOf(progress[2]) < call,
        'every progress notification precedes the response',
      );
      // Through the SDK's onprogress: the ones it dispatched before the response, in order
      // (see `wire` in lib/harness.mjs for why the last may be missed under load).
      assert.ok(updates.length >= 2, `onprogress saw ${updates.length} updates`);
      assert.deepEqual(
        updates.map((u) => u.progress),
        [0, 50, 100].slice(0, updates.length),
      );
    } finally {
      await session.close();
    }
  });

  it('test_tool_with_progress sends nothing without a progress token', async () => {
    const progress = [];
    const session = await connect({
      setup: (client) =>
        client.setNotificationHandler(types.ProgressNotificationSchema, (n) => progress.push(n)),
    });
    try {
      const result = await session.client.callTool({ name: 'test_tool_with_progress', arguments: {} });
      assert.notEqual(result.isError, true);
      await sleep(100);
      assert.deepEqual(progress, []);
    } finally {
      await session.close();
    }
  });
});

describe('sampling', () => {
  it('test_sampling asks the client for a completion and returns its text', async () => {
    const seen = [];
    const session = await connect({
      capabilities: { sampling: {} },
      setup: (client) =>
        client.setRequestHandler(types.CreateMessageRequestSchema, async (request) => {
          seen.push(request.params);
          return {
            role: 'assistant',
            content: { type: 'text', text: 'A reply from the e2e client' },
            model: 'e2e-model',
            stopReason: 'endTurn',
          };
        }),
    });
    try {
      const result = await session.client.callTool({
        name: 'test_sampling',
        arguments: { prompt: 'Say something' },
      });
      assert.equal(seen.length, 1, 'the server sent exactly one sampling/createMessage');
      assert.deepEqual(seen[0].messages, [
        { role: 'user', content: { type: 'text', text: 'Say something' } },
      ]);
      assert.equal(seen[0].maxTokens, 100);
      assert.notEqual(result.isError, true);
      assert.equal(result.content[0].text, 'LLM response: A reply from the e2e client');
    } finally {
      await session.close();
    }
  });

  it('test_sampling is an error when the client lacks the sampling capability', async () => {
    const session = await connect({ capabilities: {} });
    try {
      const result = await session.client.callTool({
        name: 'test_sampling',
        arguments: { prompt: 'Say something' },
      });
      assert.equal(result.isError, true);
      assert.match(result.content[0].text, /sampling/);
    } finally {
      await session.close();
    }
  });

  it('an error from the client handler comes back as a tool error', async () => {
    const session = await connect({
      capabilities: { sampling: {} },
      setup: (client) =>
        client.setRequestHandler(types.CreateMessageRequestSchema, async () => {
          throw new types.McpError(-32603, 'the user refused sampling');
        }),
    });
    try {
      const result = await session.client.callTool({
        name: 'test_sampling',
        arguments: { prompt: 'Say something' },
      });
      assert.equal(result.isError, true);
      assert.match(result.content[0].text, /the user refused sampling/);
    } finally {
      await session.close();
    }
  });
});

describe('elicitation', () => {
  function elicitingSession(answer) {
    const seen = [];
    const sessionPromise = connect({
      capabilities: { elicitation: {} },
      setup: (client) =>
        client.setRequestHandler(types.ElicitRequestSchema, async (request) => {
          seen.push(request.params);
          return answer;
        }),
    });
    return { seen, sessionPromise };
  }

  it('test_elicitation sends the message and schema and returns the accepted content', async () => {
    const { seen, sessionPromise } = elicitingSession({
      action: 'accept',
      content: { username: 'ada', email: 'ada@example.com' },
    });
    const session = await sessionPromise;
    try {
      const result = await session.client.callTool({
        name: 'test_elicitation',
        arguments: { message: 'Who are you?' },
      });
      assert.equal(seen.length, 1);
      assert.equal(seen[0].message, 'Who are you?');
      const schema = seen[0].requestedSchema;
      assert.equal(schema.type, 'object');
      assert.equal(schema.properties.username.type, 'string');
      assert.equal(schema.properties.email.type, 'string');
      assert.deepEqual([...schema.required].sort(), ['email', 'username']);
      assert.notEqual(result.isError, true);
      const text = result.content[0].text;
      assert.match(text, /^User response: /);
      assert.match(text, /accept/);
      assert.match(text, /ada@example\.com/);
    } finally {
      await session.close();
    }
  });

  it('test_elicitation reports a declined elicitation', async () => {
    const { sessionPromise } = elicitingSession({ action: 'decline' });
    const session = await sessionPromise;
    try {
      const result = await session.client.callTool({
        name: 'test_elicitation',
        arguments: { message: 'Who are you?' },
      });
      assert.match(result.content[0].text, /decline/);
    } finally {
      await session.close();
    }
  });

  it('test_elicitation is an error when the client lacks the elicitation capability', async () => {
    const session = await connect({ capabilities: {} });
    try {
      const result = await session.client.callTool({
        name: 'test_elicitation',
        arguments: { message: 'Who are you?' },
      });
      assert.equal(result.isError, true);
      assert.match(result.content[0].text, /elicitation/);
    } finally {
      await session.close();
    }
  });

  it('test_elicitation_sep1034_defaults sends a default for every primitive type', async () => {
    const { seen, sessionPromise } = elicitingSession({
      action: 'accept',
      content: { name: 'Jane', age: 25, score: 88.5, status: 'inactive', verified: false },
    });
    const session = await sessionPromise;
    try {
      const result = await session.client.callTool({
        name: 'test_elicitation_sep1034_defaults',
        arguments: {},
      });
      const props = seen[0].requestedSchema.properties;
      assert.deepEqual(props.name, { ...props.name, type: 'string', default: 'John Doe' });
      assert.deepEqual(props.age, { ...props.age, type: 'integer', default: 30 });
      assert.deepEqual(props.score, { ...props.score, type: 'number', default: 95.5 });
      assert.equal(props.status.type, 'string');
      assert.deepEqual(props.status.enum, ['active', 'inactive', 'pending']);
      assert.equal(props.status.default, 'active');
      assert.deepEqual(props.verified, { ...props.verified, type: 'boolean', default: true });
      assert.match(result.content[0].text, /^Elicitation completed: action=accept, content=/);
      assert.match(result.content[0].text, /"Jane"/);
    } finally {
      await session.close();
    }
  });

  it('test_elicitation_sep1330_enums sends all five enum shapes', async () => {
    const { seen, sessionPromise } = elicitingSession({
      action: 'accept',
      content: {
        untitledSingle: 'option1',
        titledSingle: 'value1',
        legacyEnum: 'opt1',
        untitledMulti: ['option1', 'option2'],
        titledMulti: ['value1', 'value2'],
      },
    });
    const session = await sessionPromise;
    try {
      const result = await session.client.callTool({
        name: 'test_elicitation_sep1330_enums',
        arguments: {},
      });
      const p = seen[0].requestedSchema.properties;
      assert.equal(p.untitledSingle.type, 'string');
      assert.deepEqual(p.untitledSingle.enum, ['option1', 'option2', 'option3']);
      assert.equal(p.untitledSingle.oneOf, undefined);
      assert.equal(p.untitledSingle.enumNames, undefined);

      assert.equal(p.titledSingle.type, 'string');
      assert.equal(p.titledSingle.enum, undefined);
      assert.ok(p.titledSingle.oneOf.length >= 2);
      for (const o of p.titledSingle.oneOf) {
        assert.equal(typeof o.const, 'string');
        assert.equal(typeof o.title, 'string');
      }

      assert.equal(p.legacyEnum.type, 'string');
      assert.deepEqual(p.legacyEnum.enum, ['opt1', 'opt2', 'opt3']);
      assert.equal(p.legacyEnum.enumNames.length, p.legacyEnum.enum.length);

      assert.equal(p.untitledMulti.type, 'array');
      assert.equal(p.untitledMulti.items.type, 'string');
      assert.deepEqual(p.untitledMulti.items.enum, ['option1', 'option2', 'option3']);
      assert.equal(p.untitledMulti.items.anyOf, undefined);

      assert.equal(p.titledMulti.type, 'array');
      assert.equal(p.titledMulti.items.enum, undefined);
      assert.ok(p.titledMulti.items.anyOf.length >= 2);
      for (const o of p.titledMulti.items.anyOf) {
        assert.equal(typeof o.const, 'string');
        assert.equal(typeof o.title, 'string');
      }
      assert.match(result.content[0].text, /^Elicitation completed: action=accept, content=/);
      assert.match(result.content[0].text, /"titledMulti":\["value1","value2"\]/);
    } finally {
      await session.close();
    }
  });
});

describe('cancellation', () => {
  async function cancelledCount(client) {
    const result = await client.callTool({ name: 'cancellation_report', arguments: {} });
    return result.structuredContent?.cancelled ?? JSON.parse(result.content[0].text).cancelled;
  }

  it('an aborted call reaches the handler, which stops; the session keeps serving', async () => {
    const session = await connect();
    try {
      assert.equal(await cancelledCount(session.client), 0);
      const controller = new AbortController();
      let progressSeen = false;
      const started = Date.now();
      const call = session.client.callTool(
        { name: 'slow_tool', arguments: { seconds: 30 } },
        undefined,
        {
          signal: controller.signal,
          onprogress: () => {
            // The handler is running: cancel it now.
            if (!progressSeen) controller.abort('the e2e test cancels');
            progressSeen = true;
          },
        },
      );
      await assert.rejects(call, (err) => {
        assert.match(String(err), /the e2e test cancels|abort/i);
        return true;
      });
      assert.ok(progressSeen, 'slow_tool reported progress before the cancel');
      // The server-side handler saw the cancel and stopped long before its 30 s.
      await waitFor(async () => (await cancelledCount(session.client)) === 1, {
        what: 'cancellation_report to count the cancelled slow_tool call',
      });
      assert.ok(Date.now() - started < 10000, 'cancel took effect well before slow_tool ends');
      const after = await session.client.callTool({ name: 'test_simple_text' });
      assert.equal(after.content[0].text, 'This is a simple text response for testing.');
    } finally {
      await session.close();
    }
  });

  it('slow_tool finishes normally when nobody cancels it', async () => {
    const session = await connect();
    try {
      const result = await session.client.callTool({
        name: 'slow_tool',
        arguments: { seconds: 0.2 },
      });
      assert.notEqual(result.isError, true);
      assert.equal(await cancelledCount(session.client), 0);
    } finally {
      await session.close();
    }
  });
});
