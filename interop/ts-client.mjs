#!/usr/bin/env node
// ts-client.mjs: a real TypeScript-SDK MCP host for interop tests.
//
// It connects to one Streamable HTTP endpoint with @modelcontextprotocol/sdk's
// Client and StreamableHTTPClientTransport (the SDK pinned in package.json,
// which speaks the legacy revisions up to 2025-11-25 with initialize and
// Mcp-Session-Id), lists every tool (following nextCursor), optionally calls
// one tool, and prints one JSON object on stdout.
//
// Usage:
//   node interop/ts-client.mjs --url http://127.0.0.1:8080/mcp \
//        [--tool NAME] [--args '{"k":"v"}'] [--header 'Name: value']... \
//        [--timeout-ms 30000] [--allow-tool-error] [--list-all] [--skip-list-check]
//
// stdout (one JSON object, also on failure when the failure is after connect):
//   {"ok":true,"url":...,"protocolVersion":"2025-11-25","sessionId":"...",
//    "serverInfo":{...},"capabilities":{...},"tools":["echo",...],
//    "prompts":[...],"resources":[...],          // only with --list-all
//    "call":{"name":"echo","arguments":{...},"result":{...}}}
//
// Exit codes: 0 success; 1 usage, connection, protocol or JSON-RPC error
// (including the named tool missing from tools/list, unless --skip-list-check
// asks to call it anyway, e.g. to see a gateway's -32602 for a hidden tool; a
// JSON-RPC error is reported as "error": {"message", "code", "data"}); 2 the
// call returned a result with isError: true and --allow-tool-error was not
// given.
// Diagnostics go to stderr, so stdout stays machine-readable.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

function usage(msg) {
  if (msg) process.stderr.write(`ts-client: ${msg}\n`);
  process.stderr.write(
    'usage: ts-client.mjs --url URL [--tool NAME] [--args JSON] [--header "Name: value"]... ' +
      '[--timeout-ms N] [--allow-tool-error] [--list-all] [--skip-list-check]\n',
  );
  process.exit(1);
}

function parseArgs(argv) {
  const opts = { headers: {}, timeoutMs: 30000, allowToolError: false, listAll: false, skipListCheck: false, args: {} };
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
      case '-h':
      case '--help':
        usage();
        break;
      default:
        usage(`unknown argument ${JSON.stringify(a)}`);
    }
  }
  if (!opts.url) usage('--url is required');
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

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const summary = { ok: false, url: opts.url };
  const client = new Client({ name: 'mcp-gateway-interop-ts-client', version: '1.0.0' }, { capabilities: {} });
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

    const tools = await listAll((p, o) => client.listTools(p, o), 'tools', reqOpts);
    summary.tools = tools.map((t) => t.name);

    if (opts.listAll) {
      const caps = summary.capabilities ?? {};
      summary.prompts = caps.prompts ? (await listAll((p, o) => client.listPrompts(p, o), 'prompts', reqOpts)).map((p) => p.name) : [];
      summary.resources = caps.resources
        ? (await listAll((p, o) => client.listResources(p, o), 'resources', reqOpts)).map((r) => r.uri)
        : [];
    }

    exitCode = 0;
    if (opts.tool !== undefined) {
      if (!opts.skipListCheck && !summary.tools.includes(opts.tool)) {
        throw new Error(`tool ${JSON.stringify(opts.tool)} is not in tools/list (${summary.tools.length} tools)`);
      }
      const result = await client.callTool({ name: opts.tool, arguments: opts.args }, undefined, reqOpts);
      summary.call = { name: opts.tool, arguments: opts.args, result };
      if (result.isError && !opts.allowToolError) {
        process.stderr.write(`ts-client: tool ${opts.tool} returned isError: true\n`);
        exitCode = 2;
      }
    }
    summary.ok = exitCode === 0;
  } catch (err) {
    exitCode = 1;
    summary.ok = false;
    summary.error = {
      message: err instanceof Error ? err.message : String(err),
      ...(err && typeof err === 'object' && 'code' in err ? { code: err.code } : {}),
      ...(err && typeof err === 'object' && 'data' in err && err.data !== undefined ? { data: err.data } : {}),
    };
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
