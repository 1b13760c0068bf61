// Tests task-fixtures.mjs directly, as a legacy (2025-11-25) host would use
// it, with the pinned TypeScript SDK client over stdio: the fixtures must
// behave as the conformance tasks scenarios expect before the gateway is
// judged by them (interop/conformance.mjs tasks).
//
//   interop/node_modules/node/bin/node --test interop/task-fixtures.test.mjs

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const FIXTURES = path.join(HERE, 'task-fixtures.mjs');

// connect starts the fixtures with args over stdio (or connects to url);
// onElicit answers elicitations.
async function connect(args = [], onElicit = async () => ({ action: 'decline' }), url = '') {
  const client = new Client(
    { name: 'task-fixtures-test', version: '1.0.0' },
    { capabilities: { elicitation: {}, tasks: { requests: { elicitation: { create: {} } } } } },
  );
  client.setRequestHandler(ElicitRequestSchema, (req) => onElicit(req.params));
  const transport = url
    ? new StreamableHTTPClientTransport(new URL(url))
    : new StdioClientTransport({ command: process.execPath, args: [FIXTURES, ...args], stderr: 'pipe' });
  await client.connect(transport);
  return client;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// startTask makes a task of a tools/call and returns its id.
async function startTask(client, name, args) {
  const r = await client.request({ method: 'tools/call', params: { name, arguments: args, task: { ttl: 60000 } } }, CreateTaskResultSchema);
  assert.equal(typeof r.task.taskId, 'string');
  return r.task.taskId;
}

// waitStatus polls tasks/get until the task has one of statuses (the
// fixtures suggest a 200 ms poll interval).
async function waitStatus(client, taskId, statuses) {
  for (;;) {
    const t = await client.experimental.tasks.getTask(taskId);
    if (statuses.includes(t.status)) return t;
    assert.ok(!['completed', 'failed', 'cancelled'].includes(t.status), `task ended ${t.status}, want ${statuses}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const textOf = (r) => r.content?.[0]?.text;

describe('task-fixtures.mjs over stdio', { timeout: 60000 }, () => {
  let client;
  let elicit = async () => ({ action: 'decline' });
  before(async () => {
    client = await connect([], (params) => elicit(params));
  });
  after(async () => {
    await client?.close();
  });

  it('lists the fixtures, task tools with taskSupport required', async () => {
    const { tools } = await client.listTools();
    const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport]));
    assert.deepEqual(support, {
      greet: 'forbidden',
      slow_compute: 'required',
      failing_job: 'required',
      protocol_error_job: 'required',
      confirm_delete: 'required',
      multi_input: 'required',
      test_tool_with_task: 'forbidden',
    });
    assert.ok(client.getServerCapabilities().tasks?.requests?.tools?.call);
  });

  it('greet says hello', async () => {
    assert.equal(textOf(await client.callTool({ name: 'greet', arguments: { name: 'World' } })), 'Hello, World!');
  });

  it('slow_compute completes with its label', async () => {
    const id = await startTask(client, 'slow_compute', { seconds: 0, label: 'instant' });
    const r = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    assert.equal(textOf(r), 'instant: done after 0s');
    assert.equal((await client.experimental.tasks.getTask(id)).status, 'completed');
  });

  it('slow_compute cancelled while running stays cancelled', async () => {
    const id = await startTask(client, 'slow_compute', { seconds: 60, label: 'long' });
    await client.experimental.tasks.cancelTask(id);
    assert.equal((await client.experimental.tasks.getTask(id)).status, 'cancelled');
    // Its work noticed the cancellation and stored nothing over it.
    await assert.rejects(client.experimental.tasks.getTaskResult(id, CallToolResultSchema));
    assert.equal((await client.experimental.tasks.getTask(id)).status, 'cancelled');
  });

  it('failing_job fails with a tool result that has isError', async () => {
    const id = await startTask(client, 'failing_job', {});
    const r = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    assert.equal(r.isError, true);
    assert.match(textOf(r), /failed/);
    assert.equal((await client.experimental.tasks.getTask(id)).status, 'failed');
  });

  it('protocol_error_job fails, and its tasks/result is a JSON-RPC error', async () => {
    const id = await startTask(client, 'protocol_error_job', {});
    const err = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema).then(
      () => assert.fail('tasks/result returned a result'),
      (e) => e,
    );
    assert.ok(err instanceof McpError, String(err));
    assert.equal(err.code, -32603);
    assert.match(err.message, /protocol_error_job: simulated internal failure/);
    assert.equal((await client.experimental.tasks.getTask(id)).status, 'failed');
  });

  it('confirm_delete asks on tasks/result and reports the answer', async () => {
    const asked = [];
    elicit = async (p) => {
      asked.push([p.message, p._meta?.['io.modelcontextprotocol/related-task']?.taskId]);
      return { action: 'accept', content: { confirm: true } };
    };
    const id = await startTask(client, 'confirm_delete', { filename: 'a.txt' });
    assert.equal((await waitStatus(client, id, ['input_required'])).status, 'input_required');
    const r = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    assert.equal(textOf(r), 'Deleted a.txt');
    // Tied to the task (relatedTask): queued for tasks/result, not sent on its own.
    assert.deepEqual(asked, [['Delete a.txt?', id]]);
  });

  it('confirm_delete keeps the file when declined', async () => {
    elicit = async () => ({ action: 'decline' });
    const id = await startTask(client, 'confirm_delete', { filename: 'b.txt' });
    assert.equal(textOf(await client.experimental.tasks.getTaskResult(id, CallToolResultSchema)), 'Kept b.txt (decline)');
  });

  it('confirm_delete fails with the error of an elicitation the host refused', async () => {
    elicit = async () => {
      throw new Error('no one to ask');
    };
    const id = await startTask(client, 'confirm_delete', { filename: 'c.txt' });
    const err = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema).then(
      () => assert.fail('tasks/result returned a result'),
      (e) => e,
    );
    assert.ok(err instanceof McpError, String(err));
    assert.match(err.message, /no one to ask/);
    assert.equal((await client.experimental.tasks.getTask(id)).status, 'failed');
  });

  it('multi_input has two elicitations pending at once', async () => {
    // Neither is answered until both have arrived: with one at a time the
    // test would hang rather than pass.
    let release;
    const both = new Promise((r) => (release = r));
    const asked = [];
    elicit = async (p) => {
      asked.push(p.message);
      if (asked.length === 2) release();
      await both;
      return { action: 'accept', content: { name: p.message === 'First question' ? 'one' : 'two' } };
    };
    const id = await startTask(client, 'multi_input', {});
    const r = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    assert.equal(textOf(r), 'answers: accept one, accept two');
    assert.deepEqual(asked.sort(), ['First question', 'Second question']);
  });

  it('test_tool_with_task asks for a name in a plain call and greets it', async () => {
    elicit = async () => ({ action: 'accept', content: { name: 'Alice' } });
    assert.equal(textOf(await client.callTool({ name: 'test_tool_with_task', arguments: {} })), 'Hello, Alice!');
  });
});

describe('task-fixtures.mjs --task-support optional', { timeout: 30000 }, () => {
  it('lists optional task tools and runs one as a plain call', async () => {
    const client = await connect(['--task-support', 'optional']);
    try {
      const { tools } = await client.listTools();
      assert.equal(tools.find((t) => t.name === 'slow_compute').execution.taskSupport, 'optional');
      const r = await client.callTool({ name: 'slow_compute', arguments: { seconds: 0, label: 'plain' } });
      assert.equal(textOf(r), 'plain: done after 0s');
    } finally {
      await client.close();
    }
  });
});

describe('task-fixtures.mjs --http', { timeout: 30000 }, () => {
  let child;
  let url;
  before(async () => {
    const addr = `127.0.0.1:${await freePort()}`;
    child = spawn(process.execPath, [FIXTURES, '--http', addr], { stdio: ['ignore', 'ignore', 'pipe'] });
    // It says where it listens once it does.
    await new Promise((resolve, reject) => {
      let err = '';
      child.stderr.on('data', (d) => {
        err += d;
        if (err.includes(`http://${addr}/mcp`)) resolve();
      });
      child.on('exit', (code) => reject(new Error(`task-fixtures --http exited ${code}: ${err}`)));
    });
    url = `http://${addr}/mcp`;
  });
  after(async () => {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
  });

  it('serves a session per client: a plain call, and a task that elicits', async () => {
    const client = await connect([], async () => ({ action: 'accept', content: { confirm: true } }), url);
    try {
      assert.equal(textOf(await client.callTool({ name: 'greet', arguments: { name: 'HTTP' } })), 'Hello, HTTP!');
      const id = await startTask(client, 'confirm_delete', { filename: 'h.txt' });
      assert.equal(textOf(await client.experimental.tasks.getTaskResult(id, CallToolResultSchema)), 'Deleted h.txt');
    } finally {
      await client.close();
    }
  });
});
