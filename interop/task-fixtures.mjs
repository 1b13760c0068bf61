#!/usr/bin/env node
// task-fixtures.mjs: a legacy (2025-11-25) MCP server, written with the
// pinned TypeScript SDK, that offers the fixture tools the tasks scenarios of
// @modelcontextprotocol/conformance 0.2.x name in their "Required server
// fixtures". Those scenarios speak 2026-07-28 with the
// io.modelcontextprotocol/tasks extension; this server speaks the older
// tasks of 2025-11-25 (task-augmented tools/call, tasks/get, tasks/result,
// tasks/cancel), so the scenarios pass only if whatever sits between them
// (the gateway) translates the eras.
//
//   task-fixtures.mjs [--task-support required|optional]   stdio (the default)
//   task-fixtures.mjs --http 127.0.0.1:PORT [...]           Streamable HTTP at /mcp, one session per client
//
// Tools (the task tools are registered with registerToolTask, as
// server-everything's simulate-research-query is, with the task store and
// message queue it uses):
//   greet {name}                 plain tool: "Hello, {name}!"
//   slow_compute {seconds,label} task: sleeps seconds (0: at once), then "{label}: done after {seconds}s";
//                                a task cancelled meanwhile stays cancelled
//   failing_job {}               task: after ~1 s a tool result with isError (not a JSON-RPC error)
//   protocol_error_job {}        task: fails; its tasks/result is a JSON-RPC error (-32603)
//   confirm_delete {filename}    task: asks the host (elicitation/create) to confirm, then says what it did
//   multi_input {}               task: two elicitations at once, completes when both are answered
//   test_tool_with_task {}       plain tool: asks the host for user_name (elicitation), then greets it.
//                                (The mrtr-composition scenario wants the call to become a task on its
//                                last MRTR round; a legacy server has no MRTR, so this is as close as
//                                one gets: the elicitation, and a result that names the answer.)
//
// Elicitation inside a task is sent with relatedTask: the SDK queues it in
// the task message queue and delivers it on tasks/result (2025-11-25
// "Input Required Status"), so a legacy host gets it by calling tasks/result.
//
// --task-support (default required) is the execution.taskSupport of the
// task tools. The SDK runs an "optional" tool called without params.task as
// a plain call (it makes the task and waits on it itself); a "required" one
// refuses such a call.

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks';
import { ElicitResultSchema, McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const TASK_TTL_MS = 10 * 60 * 1000;
const POLL_MS = 200;

// ErrorTaskStore is the SDK's in-memory store, plus tasks that failed with a
// JSON-RPC error: their tasks/result throws that error (the SDK's
// tasks/result handler returns what getTaskResult gives, and turns a throw
// into the JSON-RPC error), as 2025-11-25 "Result Retrieval" says a task
// whose request ended in an error answers.
class ErrorTaskStore extends InMemoryTaskStore {
  constructor() {
    super();
    this.errors = new Map();
  }

  async fail(taskId, error) {
    this.errors.set(taskId, error);
    await this.updateTaskStatus(taskId, 'failed', error.message);
  }

  async getTaskResult(taskId, sessionId) {
    const stored = this.lookup(taskId, sessionId);
    if (stored && this.errors.has(taskId)) throw this.errors.get(taskId);
    return super.getTaskResult(taskId, sessionId);
  }
}

const text = (s, extra = {}) => ({ content: [{ type: 'text', text: s }], ...extra });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function parseArgs(argv) {
  const out = { taskSupport: 'required', http: '' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--task-support') out.taskSupport = argv[++i];
    else if (a === '--http') out.http = argv[++i];
    else throw new Error(`unknown argument ${a}`);
  }
  if (!['required', 'optional'].includes(out.taskSupport)) throw new Error(`--task-support wants required or optional, not ${out.taskSupport}`);
  if (out.http !== '' && !/^[^:]*:\d+$/.test(out.http ?? '')) throw new Error(`--http wants HOST:PORT, not ${out.http}`);
  return out;
}

// isLive reports whether the task may still take a result: a task cancelled
// (or expired) meanwhile keeps its status.
async function isLive(store, taskId) {
  const t = await store.getTask(taskId);
  return t !== null && !['completed', 'failed', 'cancelled'].includes(t.status);
}

// settle stores a task's result unless the task already ended.
async function settle(store, taskId, status, result) {
  if (await isLive(store, taskId)) await store.storeTaskResult(taskId, status, result);
}

// taskTool registers a task tool whose work runs in the background: run gets
// (args, taskId, store, sendRequest) and returns the result to store (or
// stores it itself and returns undefined). Work that throws (an
// elicitation the host refused, say) fails the task with that error, which
// its tasks/result then returns.
function taskTool(server, taskStore, name, config, taskSupport, run) {
  server.experimental.tasks.registerToolTask(
    name,
    { ...config, execution: { taskSupport } },
    {
      createTask: async (args, extra) => {
        const store = extra.taskStore;
        const task = await store.createTask({ ttl: extra.taskRequestedTtl ?? TASK_TTL_MS, pollInterval: POLL_MS });
        const taskId = task.taskId;
        run(args, taskId, store, extra.sendRequest)
          .then((result) => (result ? settle(store, taskId, 'completed', result) : undefined))
          .catch(async (err) => {
            const e = err instanceof McpError ? err : new McpError(ErrorCode.InternalError, String(err?.message ?? err));
            if (await isLive(store, taskId)) await taskStore.fail(taskId, e);
          })
          .catch((err) => process.stderr.write(`task-fixtures: ${name} ${taskId}: ${err?.message ?? err}\n`));
        return { task };
      },
      getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
    },
  );
}

// elicit asks the host for input on behalf of a task: queued with the task,
// delivered on tasks/result.
async function elicit(store, taskId, sendRequest, message, requestedSchema) {
  await store.updateTaskStatus(taskId, 'input_required', message);
  return sendRequest({ method: 'elicitation/create', params: { message, requestedSchema } }, ElicitResultSchema, {
    relatedTask: { taskId },
  });
}

// workFor waits ms, returning early (false) when the task ends
// meanwhile (cancelled), so a cancelled task's timer does not hold it.
async function workFor(store, taskId, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (!(await isLive(store, taskId))) return false;
    await sleep(Math.min(100, end - Date.now()));
  }
  return isLive(store, taskId);
}

export function createServer({ taskSupport = 'required' } = {}) {
  const taskStore = new ErrorTaskStore();
  const server = new McpServer(
    { name: 'task-fixtures', version: '1.0.0' },
    {
      capabilities: {
        tools: {},
        tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
      },
      taskStore,
      taskMessageQueue: new InMemoryTaskMessageQueue(),
    },
  );

  server.registerTool(
    'greet',
    { description: 'Says hello (a plain tool, never a task).', inputSchema: { name: z.string().describe('Who to greet') } },
    async ({ name }) => text(`Hello, ${name}!`),
  );

  taskTool(
    server,
    taskStore,
    'slow_compute',
    {
      description: 'Sleeps for the given seconds as a task, then reports done; cancellable meanwhile.',
      inputSchema: { seconds: z.number().min(0).max(600).describe('How long to work'), label: z.string().optional() },
    },
    taskSupport,
    async ({ seconds, label }, taskId, store) => {
      await store.updateTaskStatus(taskId, 'working', `computing ${label ?? ''} for ${seconds}s`.replace('  ', ' '));
      if (!(await workFor(store, taskId, seconds * 1000))) return undefined;
      return text(`${label ?? 'slow_compute'}: done after ${seconds}s`);
    },
  );

  taskTool(
    server,
    taskStore,
    'failing_job',
    { description: 'A task that ends, after about a second, in a tool error (isError).', inputSchema: {} },
    taskSupport,
    async (_args, taskId, store) => {
      if (!(await workFor(store, taskId, 1000))) return undefined;
      // 2025-11-25 "Task Status": a tool result with isError ends the task as failed.
      await settle(store, taskId, 'failed', text('failing_job: the job failed (a tool execution error)', { isError: true }));
      return undefined;
    },
  );

  taskTool(
    server,
    taskStore,
    'protocol_error_job',
    { description: 'A task that fails with a JSON-RPC error (as a server crash would).', inputSchema: {} },
    taskSupport,
    async (_args, taskId, store) => {
      await sleep(100);
      // The handler's store is a per-request view of taskStore: the error
      // goes to taskStore itself.
      if (await isLive(store, taskId)) {
        await taskStore.fail(taskId, new McpError(ErrorCode.InternalError, 'protocol_error_job: simulated internal failure'));
      }
      return undefined;
    },
  );

  taskTool(
    server,
    taskStore,
    'confirm_delete',
    {
      description: 'Asks the user to confirm deleting a file (elicitation during the task), then reports.',
      inputSchema: { filename: z.string().describe('The file to delete') },
    },
    taskSupport,
    async ({ filename }, taskId, store, sendRequest) => {
      const r = await elicit(store, taskId, sendRequest, `Delete ${filename}?`, {
        type: 'object',
        properties: { confirm: { type: 'boolean', title: 'Confirm', description: `Delete ${filename}` } },
        required: ['confirm'],
      });
      if (!(await isLive(store, taskId))) return undefined;
      await store.updateTaskStatus(taskId, 'working', 'answer received');
      const yes = r.action === 'accept' && r.content?.confirm === true;
      return text(yes ? `Deleted ${filename}` : `Kept ${filename} (${r.action})`);
    },
  );

  taskTool(
    server,
    taskStore,
    'multi_input',
    { description: 'Asks two questions at once (two elicitations in parallel), then reports both answers.', inputSchema: {} },
    taskSupport,
    async (_args, taskId, store, sendRequest) => {
      const schema = {
        type: 'object',
        properties: { name: { type: 'string' }, confirm: { type: 'boolean' } },
      };
      await store.updateTaskStatus(taskId, 'input_required', 'two questions');
      const ask = (message) =>
        sendRequest({ method: 'elicitation/create', params: { message, requestedSchema: schema } }, ElicitResultSchema, { relatedTask: { taskId } });
      const answers = await Promise.all([ask('First question'), ask('Second question')]);
      if (!(await isLive(store, taskId))) return undefined;
      await store.updateTaskStatus(taskId, 'working', 'answers received');
      return text(`answers: ${answers.map((a) => `${a.action}${a.content?.name ? ` ${a.content.name}` : ''}`).join(', ')}`);
    },
  );

  server.registerTool(
    'test_tool_with_task',
    { description: 'Asks for user_name (elicitation), then greets that user.', inputSchema: {} },
    async (_args, extra) => {
      const r = await extra.sendRequest(
        {
          method: 'elicitation/create',
          params: {
            message: 'What is your name?',
            requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
          },
        },
        ElicitResultSchema,
      );
      return r.action === 'accept' ? text(`Hello, ${r.content?.name}!`) : text(`No name given (${r.action})`, { isError: true });
    },
  );

  return { server, taskStore };
}

async function serveHTTP(addr, opts) {
  const [host, port] = [addr.slice(0, addr.lastIndexOf(':')), Number(addr.slice(addr.lastIndexOf(':') + 1))];
  const sessions = new Map();
  const srv = http.createServer(async (req, res) => {
    if (!req.url.startsWith('/mcp')) {
      res.writeHead(404).end();
      return;
    }
    const sid = req.headers['mcp-session-id'];
    let entry = sid ? sessions.get(sid) : undefined;
    if (!entry) {
      if (sid || req.method !== 'POST') {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }));
        return;
      }
      const { server, taskStore } = createServer(opts);
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => crypto.randomUUID(),
        onsessioninitialized: (id) => sessions.set(id, entry),
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
        taskStore.cleanup();
      };
      entry = { server, transport };
      await server.connect(transport);
    }
    await entry.transport.handleRequest(req, res);
  });
  await new Promise((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(port, host, resolve);
  });
  process.stderr.write(`task-fixtures: http://${addr}/mcp\n`);
  const stop = () => {
    for (const { transport } of sessions.values()) transport.close().catch(() => {});
    srv.close(() => process.exit(0));
    srv.closeAllConnections();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.http) return serveHTTP(opts.http, opts);
  const { server, taskStore } = createServer(opts);
  const transport = new StdioServerTransport();
  transport.onclose = () => {
    taskStore.cleanup();
    process.exit(0);
  };
  process.stdin.on('end', () => process.exit(0));
  await server.connect(transport);
}

// Run only as a program: task-fixtures.test.mjs may import createServer.
if (process.argv[1] && fs.realpathSync(path.resolve(process.argv[1])) === fs.realpathSync(fileURLToPath(import.meta.url))) {
  main().catch((err) => {
    process.stderr.write(`task-fixtures: ${err?.message ?? err}\n`);
    process.exit(2);
  });
}
