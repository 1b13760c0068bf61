#!/usr/bin/env node
// ts-client.mjs: a real TypeScript-SDK MCP host for interop tests.
//
// It connects to one Streamable HTTP endpoint with @modelcontextprotocol/sdk's
// Client and StreamableHTTPClientTransport (the SDK pinned in package.json,
// which speaks the legacy revisions up to 2025-11-25 with initialize and
// Mcp-Session-Id), lists every tool (following nextCursor), optionally calls
// one tool, and prints one JSON object on stdout. With the task options it is a
// task requestor (2025-11-25 basic/utilities/tasks.mdx) through the SDK's
// client.experimental.tasks.
//
// Usage:
//   node interop/ts-client.mjs --url http://127.0.0.1:8080/mcp \
//        [--tool NAME] [--args '{"k":"v"}'] [--header 'Name: value']... \
//        [--timeout-ms 30000] [--allow-tool-error] [--list-all] [--skip-list-check] \
//        [--task [--task-ttl-ms 60000] [--cancel-after-created]] [--list-tasks]
//   node interop/ts-client.mjs --url URL --get-task TASK_ID [--header ...]...
//
//   --task                 call --tool task-augmented (params.task = {ttl}) with
//                          callToolStream, which polls tasks/get until the task
//                          is terminal and then fetches tasks/result; --timeout-ms
//                          bounds each request and also the whole task.
//   --task-ttl-ms N        the ttl asked for (default 60000; the server may
//                          grant another, see call.task.created.ttl).
//   --cancel-after-created once the task is created, tasks/cancel it, then
//                          tasks/get it; exit 0 if tasks/cancel succeeded, however
//                          the stream then ends (the SDK reports a cancelled task
//                          as an error message).
//   --list-tasks           after the call (or alone), tasks/list (all pages).
//   --get-task ID          connect and tasks/get ID only: no tools/list, no call.
// Any of the last three declares the client capability tasks: {list, cancel}
// (backed by the SDK's in-memory task store, so the client really answers
// tasks/list and tasks/cancel, for its own empty set of tasks); otherwise the
// client declares no capabilities, as before.
//
// stdout (one JSON object, also on failure when the failure is after connect):
//   {"ok":true,"url":...,"protocolVersion":"2025-11-25","sessionId":"...",
//    "serverInfo":{...},"capabilities":{...},"tools":["echo",...],
//    "prompts":[...],"resources":[...],          // only with --list-all
//    "call":{"name":"echo","arguments":{...},
//            "task":{                            // only with --task
//              "taskId":"...",
//              "events":["taskCreated","taskStatus",...,"result"|"error"],
//              "statuses":["working",...,"completed"], // created, then each tasks/get
//              "created":{taskId,status,ttl,createdAt,...},
//              "cancel":{"result":{...},"afterGet":{...}}, // --cancel-after-created;
//                       // {"error":{...}} if tasks/cancel failed, and
//                       // "afterGetError" instead of "afterGet" if tasks/get did
//              "result":{...} | "error":{"message","code","data"}},
//            "result":{...}},                    // the tool result, as without --task
//    "tasks":[{"taskId","status"},...],          // only with --list-tasks
//    "getTask":{"result":{...}} | {"error":{"message","code","data"}}} // --get-task
//
// Exit codes: 0 success; 1 usage, connection, protocol or JSON-RPC error
// (including the named tool missing from tools/list, unless --skip-list-check
// asks to call it anyway, e.g. to see a gateway's -32602 for a hidden tool; a
// JSON-RPC error is reported as "error": {"message", "code", "data"}; with
// --task, a stream that ends in an error, unless --cancel-after-created's
// tasks/cancel succeeded; with --get-task, a tasks/get error); 2 the call
// returned a result with isError: true and --allow-tool-error was not given.
// Diagnostics go to stderr, so stdout stays machine-readable.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';

function usage(msg) {
  if (msg) process.stderr.write(`ts-client: ${msg}\n`);
  process.stderr.write(
    'usage: ts-client.mjs --url URL [--tool NAME] [--args JSON] [--header "Name: value"]... ' +
      '[--timeout-ms N] [--allow-tool-error] [--list-all] [--skip-list-check] ' +
      '[--task [--task-ttl-ms N] [--cancel-after-created]] [--list-tasks] | [--get-task ID]\n',
  );
  process.exit(1);
}

function parseArgs(argv) {
  const opts = {
    headers: {},
    timeoutMs: 30000,
    allowToolError: false,
    listAll: false,
    skipListCheck: false,
    args: {},
    task: false,
    taskTtlMs: undefined,
    cancelAfterCreated: false,
    listTasks: false,
    getTask: undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--url':
        opts.url = next();
        break;
      case '--tool':
        opts.tool = next();
        break;
      case '--args': {
        const raw = next();
        try {
          opts.args = JSON.parse(raw);
        } catch (e) {
          usage(`--args is not JSON: ${e.message}`);
        }
        if (opts.args === null || typeof opts.args !== 'object' || Array.isArray(opts.args)) {
          usage('--args must be a JSON object');
        }
        break;
      }
      case '--header': {
        const h = next();
        const colon = h.indexOf(':');
        if (colon <= 0) usage(`--header wants "Name: value", got ${JSON.stringify(h)}`);
        // Header names keep their case: the gateway contract says case matters for names.
        opts.headers[h.slice(0, colon).trim()] = h.slice(colon + 1).trim();
        break;
      }
      case '--timeout-ms':
        opts.timeoutMs = Number(next());
        if (!Number.isFinite(opts.timeoutMs) || opts.timeoutMs <= 0) usage('--timeout-ms must be a positive number');
        break;
      case '--allow-tool-error':
        opts.allowToolError = true;
        break;
      case '--list-all':
        opts.listAll = true;
        break;
      case '--skip-list-check':
        opts.skipListCheck = true;
        break;
      case '--task':
        opts.task = true;
        break;
      case '--task-ttl-ms':
        opts.taskTtlMs = Number(next());
        if (!Number.isSafeInteger(opts.taskTtlMs) || opts.taskTtlMs <= 0) {
          usage('--task-ttl-ms must be a positive integer');
        }
        break;
      case '--cancel-after-created':
        opts.cancelAfterCreated = true;
        break;
      case '--list-tasks':
        opts.listTasks = true;
        break;
      case '--get-task':
        opts.getTask = next();
        if (opts.getTask === '') usage('--get-task needs a task id');
        break;
      case '-h':
      case '--help':
        usage();
        break;
      default:
        usage(`unknown argument ${JSON.stringify(a)}`);
    }
  }
  if (!opts.url) usage('--url is required');
  if (opts.task && opts.tool === undefined) usage('--task needs --tool');
  if (!opts.task && opts.taskTtlMs !== undefined) usage('--task-ttl-ms needs --task');
  if (!opts.task && opts.cancelAfterCreated) usage('--cancel-after-created needs --task');
  if (opts.getTask !== undefined && (opts.tool !== undefined || opts.listTasks || opts.listAll)) {
    usage('--get-task stands alone: no --tool, --list-tasks or --list-all');
  }
  opts.taskTtlMs ??= 60000;
  return opts;
}

// listAll pages through a list method until nextCursor runs out, so a
// gateway that paginates its catalog is read in full.
async function listAll(fetchPage, key, reqOpts) {
  const items = [];
  let cursor;
  for (let page = 0; page < 1000; page++) {
    const res = await fetchPage(cursor ? { cursor } : undefined, reqOpts);
    items.push(...(res[key] ?? []));
    if (!res.nextCursor) return items;
    cursor = res.nextCursor;
  }
  throw new Error(`${key}: more than 1000 pages, giving up`);
}

// rpcError is the JSON shape of an error: a JSON-RPC error (McpError) keeps
// its code and data.
function rpcError(err) {
  return {
    message: err instanceof Error ? err.message : String(err),
    ...(err && typeof err === 'object' && 'code' in err ? { code: err.code } : {}),
    ...(err && typeof err === 'object' && 'data' in err && err.data !== undefined ? { data: err.data } : {}),
  };
}

// recordedError turns a recorded rpcError back into an Error carrying its code
// and data, so the summary's top-level "error" has them too.
function recordedError(message, { code, data }) {
  return Object.assign(new Error(message), code !== undefined ? { code } : {}, data !== undefined ? { data } : {});
}

// cancelAndGet sends tasks/cancel for taskId and then tasks/get, recording
// both; it never throws, so the stream that follows is still recorded.
async function cancelAndGet(client, taskId, reqOpts) {
  const cancel = {};
  try {
    cancel.result = await client.experimental.tasks.cancelTask(taskId, reqOpts);
  } catch (err) {
    cancel.error = rpcError(err);
  }
  try {
    cancel.afterGet = await client.experimental.tasks.getTask(taskId, reqOpts);
  } catch (err) {
    cancel.afterGetError = rpcError(err);
  }
  return cancel;
}

// callTask runs the task-augmented call and records every message the SDK's
// stream yields, in order, into call.task. It returns the exit code, or throws
// (after recording) when the call failed.
async function callTask(client, opts, call, reqOpts) {
  const task = { taskId: null, events: [], statuses: [] };
  call.task = task;
  // The stream polls until the task is terminal; the signal bounds the whole
  // run, so a task stuck in "working" cannot hang the test that runs us.
  const streamOpts = { ...reqOpts, task: { ttl: opts.taskTtlMs }, signal: AbortSignal.timeout(opts.timeoutMs) };
  const params = { name: opts.tool, arguments: opts.args };
  const stream = client.experimental.tasks.callToolStream(params, undefined, streamOpts);
  for await (const msg of stream) {
    task.events.push(msg.type);
    switch (msg.type) {
      case 'taskCreated':
        task.taskId = msg.task.taskId;
        task.created = msg.task;
        task.statuses.push(msg.task.status);
        // The generator is paused while we are here, so the cancel and the
        // tasks/get after it happen before the stream polls again.
        if (opts.cancelAfterCreated) task.cancel = await cancelAndGet(client, task.taskId, reqOpts);
        break;
      case 'taskStatus':
        task.statuses.push(msg.task.status);
        break;
      case 'result':
        task.result = msg.result;
        call.result = msg.result;
        break;
      case 'error':
        task.error = rpcError(msg.error);
        break;
      default:
        // A message type this SDK version does not document: keep it visible.
        task.events[task.events.length - 1] = `unknown:${String(msg.type)}`;
    }
  }
  if (opts.cancelAfterCreated) {
    if (!task.cancel) throw new Error('--cancel-after-created: the stream never reported a created task');
    if (task.cancel.error) throw recordedError(`tasks/cancel: ${task.cancel.error.message}`, task.cancel.error);
    return 0;
  }
  if (task.error) throw recordedError(task.error.message, task.error);
  if (!task.result) throw new Error('task stream ended without a result or an error');
  if (task.result.isError && !opts.allowToolError) {
    process.stderr.write(`ts-client: tool ${opts.tool} returned isError: true\n`);
    return 2;
  }
  return 0;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const summary = { ok: false, url: opts.url };
  // The tasks capability is declared only when a task option asks for it, so
  // the plain mode initializes exactly as before. Declaring list and cancel is
  // true only with a task store: with one, the SDK answers tasks/* requests
  // sent to the client (for its own tasks, of which it has none).
  const wantsTasks = opts.task || opts.listTasks || opts.getTask !== undefined;
  const client = new Client(
    { name: 'mcp-gateway-interop-ts-client', version: '1.0.0' },
    wantsTasks ? { capabilities: { tasks: { list: {}, cancel: {} } }, taskStore: new InMemoryTaskStore() } : { capabilities: {} },
  );
  const transport = new StreamableHTTPClientTransport(new URL(opts.url), {
    requestInit: { headers: opts.headers },
  });
  const reqOpts = { timeout: opts.timeoutMs };
  let exitCode = 1;
  try {
    await client.connect(transport, reqOpts);
    summary.protocolVersion = transport.protocolVersion ?? null;
    summary.sessionId = transport.sessionId ?? null;
    summary.serverInfo = client.getServerVersion() ?? null;
    summary.capabilities = client.getServerCapabilities() ?? null;

    if (opts.getTask !== undefined) {
      try {
        summary.getTask = { result: await client.experimental.tasks.getTask(opts.getTask, reqOpts) };
      } catch (err) {
        summary.getTask = { error: rpcError(err) };
        throw err;
      }
    } else {
      const tools = await listAll((p, o) => client.listTools(p, o), 'tools', reqOpts);
      summary.tools = tools.map((t) => t.name);

      if (opts.listAll) {
        const caps = summary.capabilities ?? {};
        summary.prompts = caps.prompts ? (await listAll((p, o) => client.listPrompts(p, o), 'prompts', reqOpts)).map((p) => p.name) : [];
        summary.resources = caps.resources
          ? (await listAll((p, o) => client.listResources(p, o), 'resources', reqOpts)).map((r) => r.uri)
          : [];
      }
    }

    exitCode = 0;
    if (opts.tool !== undefined) {
      if (!opts.skipListCheck && !summary.tools.includes(opts.tool)) {
        throw new Error(`tool ${JSON.stringify(opts.tool)} is not in tools/list (${summary.tools.length} tools)`);
      }
      if (opts.task) {
        summary.call = { name: opts.tool, arguments: opts.args };
        exitCode = await callTask(client, opts, summary.call, reqOpts);
      } else {
        const result = await client.callTool({ name: opts.tool, arguments: opts.args }, undefined, reqOpts);
        summary.call = { name: opts.tool, arguments: opts.args, result };
        if (result.isError && !opts.allowToolError) {
          process.stderr.write(`ts-client: tool ${opts.tool} returned isError: true\n`);
          exitCode = 2;
        }
      }
    }
    if (opts.listTasks) {
      const tasks = await listAll((p, o) => client.experimental.tasks.listTasks(p?.cursor, o), 'tasks', reqOpts);
      summary.tasks = tasks.map((t) => ({ taskId: t.taskId, status: t.status }));
    }
    summary.ok = exitCode === 0;
  } catch (err) {
    exitCode = 1;
    summary.ok = false;
    summary.error = rpcError(err);
    process.stderr.write(`ts-client: ${summary.error.message}\n`);
  } finally {
    // Ending the session politely (DELETE) is part of what we test; a server
    // that refuses it must not turn a good run into a failure.
    try {
      if (transport.sessionId) await transport.terminateSession();
    } catch (err) {
      process.stderr.write(`ts-client: terminating session: ${err instanceof Error ? err.message : err}\n`);
    }
    try {
      await client.close();
    } catch {
      // already closed
    }
  }
  process.stdout.write(JSON.stringify(summary) + '\n');
  process.exit(exitCode);
}

await main();
