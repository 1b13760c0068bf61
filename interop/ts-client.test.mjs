// Tests ts-client.mjs against the real @modelcontextprotocol/server-everything
// over Streamable HTTP (`node dist/index.js streamableHttp`, port from PORT,
// endpoint /mcp), so the client the gateway's interop tests rely on is known
// to work against a real server before it is pointed at the gateway.
//
//   interop/node_modules/node/bin/node --test interop/ts-client.test.mjs

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
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

  it('exits 1 when nothing listens', async () => {
    const port = await freePort();
    const r = await run(['--url', `http://127.0.0.1:${port}/mcp`]);
    assert.equal(r.code, 1);
    assert.equal(r.json.ok, false);
  });
});
