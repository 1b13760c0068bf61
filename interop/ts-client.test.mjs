// Tests ts-client.mjs against the real @modelcontextprotocol/server-everything
// over Streamable HTTP (`node dist/index.js streamableHttp`, port from PORT,
// endpoint /mcp), so the client the gateway's interop tests rely on is known
// to work against a real server before it is pointed at the gateway. The task
// cases use server-everything's simulate-research-query (taskSupport
// "required", four 1 s stages) and run in parallel, so they cost one task's time.
//
//   interop/node_modules/node/bin/node --test interop/ts-client.test.mjs

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const EVERYTHING = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
const CLIENT = path.join(HERE, 'ts-client.mjs');

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

// run executes ts-client.mjs and resolves with its exit code and parsed stdout.
function run(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLIENT, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`ts-client did not finish in 30 s: ${err}`));
    }, 30000);
    child.on('close', (code) => {
      clearTimeout(t);
      let json;
      try {
        json = JSON.parse(out);
      } catch {
        json = undefined;
      }
      resolve({ code, json, out, err });
    });
  });
}

// scripted runs ts-client with args against a scripted Streamable HTTP server
// that offers one tool "t" (taskSupport "optional") and records every JSON-RPC
// request. It answers tools/call with a -32601 error (so the run exits 1),
// except a task-augmented call with arguments {"fail": true}: that creates
// task "s1", already completed, whose result has isError: true. It resolves
// with the run and the recorded requests by method.
async function scripted(args) {
  const requests = {};
  const now = new Date().toISOString();
  const task = { taskId: 's1', status: 'completed', ttl: 60000, createdAt: now, lastUpdatedAt: now };
  const srv = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      if (req.method !== 'POST') return res.writeHead(req.method === 'DELETE' ? 200 : 405).end();
      let msg;
      try {
        msg = JSON.parse(body);
      } catch {
        return res.writeHead(400).end();
      }
      if (msg.id === undefined) return res.writeHead(202).end();
      (requests[msg.method] ??= []).push(msg.params);
      const reply = (r) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, ...r }));
      switch (msg.method) {
        case 'initialize':
          return reply({
            result: {
              protocolVersion: msg.params.protocolVersion,
              capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
              serverInfo: { name: 'scripted', version: '0' },
            },
          });
        case 'tools/list':
          return reply({
            result: { tools: [{ name: 't', inputSchema: { type: 'object' }, execution: { taskSupport: 'optional' } }] },
          });
        case 'tools/call':
          if (!msg.params.task || !msg.params.arguments?.fail) break;
          return reply({ result: { task: { ...task, status: 'working' } } });
        case 'tasks/get':
          return reply({ result: task });
        case 'tasks/result':
          return reply({ result: { content: [{ type: 'text', text: 'boom' }], isError: true } });
      }
      return reply({ error: { code: -32601, message: `scripted: no ${msg.method}` } });
    });
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  try {
    const r = await run(['--url', `http://127.0.0.1:${srv.address().port}/mcp`, ...args]);
    assert.ok(requests.initialize, `no initialize request reached the server: ${r.err}`);
    return { r, requests };
  } finally {
    srv.closeAllConnections();
    await new Promise((resolve) => srv.close(resolve));
  }
}

describe('ts-client against a scripted server', { concurrency: true }, () => {
  it('declares no capabilities without a task option', async () => {
    const { r, requests } = await scripted(['--tool', 't']);
    assert.deepEqual(requests.initialize[0].capabilities, {});
    assert.equal(requests['tools/call'][0].task, undefined, 'a plain call is not task-augmented');
    assert.equal(r.code, 1);
  });
  for (const args of [['--tool', 't', '--task'], ['--list-tasks'], ['--get-task', 'x']]) {
    it(`declares tasks with ${args.join(' ')}`, async () => {
      const { requests } = await scripted(args);
      assert.deepEqual(requests.initialize[0].capabilities, { tasks: { list: {}, cancel: {} } });
    });
  }
  it('--task sends params.task.ttl (default 60000, or --task-ttl-ms) and reports a refused call', async () => {
    for (const [extra, ttl] of [[[], 60000], [['--task-ttl-ms', '1234'], 1234]]) {
      const { r, requests } = await scripted(['--tool', 't', '--args', '{"k":"v"}', '--task', ...extra]);
      assert.deepEqual(requests['tools/call'][0], { name: 't', arguments: { k: 'v' }, task: { ttl } });
      assert.equal(r.code, 1);
      assert.equal(r.json.ok, false);
      assert.deepEqual(r.json.call.task.events, ['error']);
      assert.equal(r.json.call.task.error.code, -32601);
      assert.equal(r.json.error.code, -32601);
    }
  });
  it('--task exits 2 for an isError result, 0 with --allow-tool-error', async () => {
    const args = ['--tool', 't', '--args', '{"fail":true}', '--task'];
    const strict = (await scripted(args)).r;
    assert.equal(strict.code, 2, strict.err);
    assert.deepEqual(strict.json.call.task.statuses, ['working', 'completed']);
    assert.deepEqual(strict.json.call.task.events, ['taskCreated', 'taskStatus', 'result']);
    assert.equal(strict.json.call.result.isError, true);
    const lenient = (await scripted([...args, '--allow-tool-error'])).r;
    assert.equal(lenient.code, 0, lenient.err);
    assert.equal(lenient.json.ok, true);
  });
  it('--cancel-after-created exits 1 when tasks/cancel fails', async () => {
    const { r } = await scripted(['--tool', 't', '--args', '{"fail":true}', '--task', '--cancel-after-created']);
    assert.equal(r.code, 1, r.err);
    assert.equal(r.json.call.task.cancel.error.code, -32601);
    assert.equal(r.json.call.task.cancel.afterGet.status, 'completed');
    assert.match(r.json.error.message, /^tasks\/cancel: /);
    assert.equal(r.json.error.code, -32601);
  });
});

describe('ts-client usage errors', { concurrency: true }, () => {
  for (const [args, want] of [
    [['--task'], /--task needs --tool/],
    [['--tool', 'echo', '--cancel-after-created'], /--cancel-after-created needs --task/],
    [['--tool', 'echo', '--task-ttl-ms', '5'], /--task-ttl-ms needs --task/],
    [['--tool', 'echo', '--task', '--task-ttl-ms', '0'], /--task-ttl-ms must be a positive integer/],
    [['--get-task', 'x', '--tool', 'echo'], /--get-task stands alone/],
  ]) {
    it(args.join(' '), async () => {
      // Usage is checked before connecting, so no server is needed.
      const r = await run(['--url', 'http://127.0.0.1:9/mcp', ...args]);
      assert.equal(r.code, 1);
      assert.match(r.err, want);
      assert.equal(r.out, '', 'a usage error prints no summary');
    });
  }
});

describe('ts-client against server-everything (Streamable HTTP)', () => {
  let server;
  let url;

  before(async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}/mcp`;
    server = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
      env: { ...process.env, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    // It prints "listening on port N" on stderr once the socket is bound.
    await new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`server-everything did not start: ${log}`)), 30000);
      const onData = (d) => {
        log += d;
        if (/listening on port/.test(log)) {
          clearTimeout(t);
          resolve();
        }
      };
      server.stdout.on('data', onData);
      server.stderr.on('data', onData);
      server.once('exit', (code) => {
        clearTimeout(t);
        reject(new Error(`server-everything exited ${code}: ${log}`));
      });
    });
  });

  after(async () => {
    if (server && server.exitCode === null) {
      const closed = new Promise((r) => server.once('close', r));
      server.kill('SIGKILL');
      await closed;
    }
  });

  it('lists tools and calls echo', async () => {
    const r = await run(['--url', url, '--tool', 'echo', '--args', '{"message":"hello gateway"}', '--list-all']);
    assert.equal(r.code, 0, r.err);
    assert.equal(r.json.ok, true);
    assert.equal(r.json.protocolVersion, '2025-11-25');
    assert.ok(r.json.sessionId, 'a legacy server issues Mcp-Session-Id');
    assert.equal(r.json.serverInfo.name, 'mcp-servers/everything');
    for (const t of ['echo', 'get-sum', 'get-tiny-image']) assert.ok(r.json.tools.includes(t), `tools/list lacks ${t}`);
    assert.ok(r.json.prompts.includes('simple-prompt'));
    assert.ok(r.json.resources.length > 0);
    assert.deepEqual(r.json.call, {
      name: 'echo',
      arguments: { message: 'hello gateway' },
      result: { content: [{ type: 'text', text: 'Echo: hello gateway' }] },
    });
  });

  it('passes structured arguments through', async () => {
    const r = await run(['--url', url, '--tool', 'get-sum', '--args', '{"a":2,"b":40}']);
    assert.equal(r.code, 0, r.err);
    assert.match(JSON.stringify(r.json.call.result.content), /42/);
  });

  it('exits 1 for a tool that is not listed', async () => {
    const r = await run(['--url', url, '--tool', 'no-such-tool']);
    assert.equal(r.code, 1);
    assert.equal(r.json.ok, false);
    assert.match(r.json.error.message, /not in tools\/list/);
  });

  it('exits 2 for an isError result, 0 with --allow-tool-error', async () => {
    // server-everything (TS SDK 1.x) reports an unknown tool as a result with
    // isError: true, not as a JSON-RPC error.
    const args = ['--url', url, '--tool', 'no-such-tool', '--skip-list-check'];
    const strict = await run(args);
    assert.equal(strict.code, 2);
    assert.equal(strict.json.call.result.isError, true);
    const lenient = await run([...args, '--allow-tool-error']);
    assert.equal(lenient.code, 0);
    assert.equal(lenient.json.ok, true);
  });

  describe('tasks', { concurrency: true }, () => {
    const research = ['--tool', 'simulate-research-query', '--args', '{"topic":"interop"}'];

    it('--task runs the call as a task to completion; --list-tasks lists it', async () => {
      const r = await run(['--url', url, ...research, '--task', '--task-ttl-ms', '120000', '--list-tasks']);
      assert.equal(r.code, 0, r.err);
      assert.equal(r.json.ok, true);
      const task = r.json.call.task;
      assert.ok(task.taskId, 'the created task has an id');
      assert.equal(task.created.taskId, task.taskId);
      assert.equal(task.created.status, 'working');
      assert.equal(task.events[0], 'taskCreated');
      assert.equal(task.events.at(-1), 'result');
      assert.ok(task.events.includes('taskStatus'), `tasks/get was never polled: ${task.events}`);
      assert.equal(task.statuses.length, task.events.length - 1, 'one status per created/status message');
      assert.equal(task.statuses[0], 'working');
      assert.equal(task.statuses.at(-1), 'completed');
      assert.equal(task.error, undefined);
      assert.match(r.json.call.result.content[0].text, /Research Report: interop/);
      assert.deepEqual(task.result, r.json.call.result);
      assert.deepEqual(r.json.tasks, [{ taskId: task.taskId, status: 'completed' }]);
    });

    it('--cancel-after-created cancels the task and exits 0', async () => {
      const r = await run(['--url', url, ...research, '--task', '--cancel-after-created', '--list-tasks']);
      assert.equal(r.code, 0, r.err);
      assert.equal(r.json.ok, true);
      const task = r.json.call.task;
      assert.equal(task.cancel.error, undefined);
      assert.equal(task.cancel.result.taskId, task.taskId);
      assert.equal(task.cancel.result.status, 'cancelled');
      assert.equal(task.cancel.afterGet.status, 'cancelled');
      // The SDK's stream reports a cancelled task as an error message.
      assert.deepEqual(task.statuses, ['working', 'cancelled']);
      assert.equal(task.events.at(-1), 'error');
      assert.match(task.error.message, /cancelled/);
      assert.equal(r.json.call.result, undefined);
      assert.deepEqual(r.json.tasks, [{ taskId: task.taskId, status: 'cancelled' }]);
    });

    it('--get-task of an unknown id is a -32602 error and exits 1', async () => {
      const r = await run(['--url', url, '--get-task', 'no-such-task']);
      assert.equal(r.code, 1);
      assert.equal(r.json.ok, false);
      assert.equal(r.json.getTask.error.code, -32602);
      assert.match(r.json.getTask.error.message, /not found/i);
      assert.equal(r.json.getTask.result, undefined);
      assert.equal(r.json.tools, undefined, '--get-task does not list tools');
    });

    it('--get-task of a task in another session is not found', async () => {
      // server-everything keeps one task store per session; the gateway test
      // plays the same part with another identity.
      const created = await run(['--url', url, ...research, '--task', '--cancel-after-created']);
      assert.equal(created.code, 0, created.err);
      const r = await run(['--url', url, '--get-task', created.json.call.task.taskId]);
      assert.equal(r.code, 1);
      assert.equal(r.json.getTask.error.code, -32602);
    });

    it('without --task a task-required tool is refused', async () => {
      const r = await run(['--url', url, ...research]);
      assert.equal(r.code, 1);
      assert.match(r.json.error.message, /requires task-based execution/);
    });
  });

  it('exits 1 when nothing listens', async () => {
    const port = await freePort();
    const r = await run(['--url', `http://127.0.0.1:${port}/mcp`]);
    assert.equal(r.code, 1);
    assert.equal(r.json.ok, false);
  });
});
