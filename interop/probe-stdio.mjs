#!/usr/bin/env node
// probe-stdio.mjs: asks a stdio MCP server which era it speaks, by hand.
//
// It starts the command, sends a 2026-07-28 `server/discover` (the spec's
// stdio backward-compatibility probe) and then, in a second process, a legacy
// `initialize` + `notifications/initialized` + `tools/list`, and prints one
// JSON object with the raw answers. Two processes, because a server that
// accepted `server/discover` may refuse a later `initialize` on the same
// connection (the Go SDK does).
//
//   node interop/probe-stdio.mjs [--timeout-ms 5000] -- CMD [ARGS...]
//   node interop/probe-stdio.mjs -- node interop/node_modules/@modelcontextprotocol/server-memory/dist/index.js
//
// "discover" is the JSON-RPC response to server/discover, or "timeout" when
// nothing came back in time. "era" is "modern" when discover returned a result
// whose supportedVersions includes 2026-07-28, else "legacy" when initialize
// succeeded, else "unknown". Exit 0 unless the command cannot be started.

import { spawn } from 'node:child_process';

const MODERN = '2026-07-28';
const argv = process.argv.slice(2);
let timeoutMs = 5000;
const dash = argv.indexOf('--');
if (dash < 0 || dash === argv.length - 1) {
  process.stderr.write('usage: probe-stdio.mjs [--timeout-ms N] -- CMD [ARGS...]\n');
  process.exit(2);
}
for (let i = 0; i < dash; i++) {
  if (argv[i] === '--timeout-ms') timeoutMs = Number(argv[++i]);
}
const [cmd, ...args] = argv.slice(dash + 1);

// session runs one server process and sends messages in order, waiting for
// the answer to each request (matched by id); stray output is kept.
async function session(messages) {
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const started = new Promise((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  await started;
  let buf = '';
  let stderr = '';
  const other = [];
  const waiting = new Map();
  child.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line) continue;
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        other.push({ notJSON: line.slice(0, 500) });
        continue;
      }
      if (msg.id !== undefined && waiting.has(msg.id) && !msg.method) waiting.get(msg.id)(msg);
      else other.push(msg.method ? { method: msg.method, ...(msg.id !== undefined ? { id: msg.id } : {}) } : msg);
    }
  });
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  const answers = [];
  for (const m of messages) {
    child.stdin.write(JSON.stringify(m) + '\n');
    if (m.id === undefined) continue;
    answers.push(
      await new Promise((resolve) => {
        const t = setTimeout(() => {
          waiting.delete(m.id);
          resolve('timeout');
        }, timeoutMs);
        waiting.set(m.id, (msg) => {
          clearTimeout(t);
          waiting.delete(m.id);
          resolve(msg);
        });
      }),
    );
  }
  child.stdin.end();
  child.kill('SIGTERM');
  await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once('close', r)));
  return { answers, other, stderr: stderr.slice(0, 2000) };
}

const meta = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientInfo': { name: 'mcp-gateway-probe', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

try {
  const modern = await session([{ jsonrpc: '2.0', id: 'discover-1', method: 'server/discover', params: { _meta: meta } }]);
  const legacy = await session([
    {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'mcp-gateway-probe', version: '1.0.0' } },
    },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} },
  ]);
  const discover = modern.answers[0];
  const init = legacy.answers[0];
  const tools = legacy.answers[1];
  const supported = discover?.result?.supportedVersions ?? [];
  const era = supported.includes(MODERN) ? 'modern' : init?.result ? 'legacy' : 'unknown';
  const out = {
    command: [cmd, ...args],
    era,
    discover,
    initialize: init?.result ? { protocolVersion: init.result.protocolVersion, serverInfo: init.result.serverInfo, capabilities: init.result.capabilities } : init,
    tools: tools?.result ? tools.result.tools.map((t) => t.name) : tools,
    unsolicited: [...modern.other, ...legacy.other],
    stderr: (modern.stderr + legacy.stderr).trim(),
  };
  process.stdout.write(JSON.stringify(out, null, 2) + '\n');
} catch (err) {
  process.stderr.write(`probe-stdio: cannot start ${cmd}: ${err.message}\n`);
  process.exit(1);
}
