#!/usr/bin/env node
// passthrough-gateway.mjs: a stand-in for mcp-gateway, used only to test the
// harness itself (conformance.mjs gateway-go / ci) before the real gateway
// exists. It takes the gateway's command line (`serve --config F --listen
// ADDR`), reads the first upstream `url:` from F, and relays /mcp to it byte
// for byte (SSE streams included). /readyz answers 200 once the upstream
// answers HTTP at all.
//
// It deliberately rewrites Host to the upstream's address, as a naive reverse
// proxy does, which defeats the upstream's DNS-rebinding check: the harness
// must report dns-rebinding-protection as a regression against it.
//
//   interop/conformance.sh ci --gateway-cmd "node interop/testdata/passthrough-gateway.mjs"

import fs from 'node:fs';
import http from 'node:http';

const argv = process.argv.slice(2);
const flag = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
if (argv[0] !== 'serve' || !flag('--config') || !flag('--listen')) {
  process.stderr.write('usage: passthrough-gateway.mjs serve --config FILE --listen HOST:PORT\n');
  process.exit(2);
}
const m = fs.readFileSync(flag('--config'), 'utf8').match(/^\s*url:\s*"?([^"\s]+)"?\s*$/m);
if (!m) {
  process.stderr.write('passthrough-gateway: config has no upstream url (stdio upstreams are not supported)\n');
  process.exit(2);
}
const upstream = new URL(m[1]);
const [host, port] = flag('--listen').split(/:(?=\d+$)/);

async function upstreamAnswers() {
  try {
    await fetch(upstream, { signal: AbortSignal.timeout(1000) });
    return true;
  } catch {
    return false;
  }
}

const server = http.createServer(async (req, res) => {
  if (req.url === '/readyz' || req.url === '/healthz') {
    const ok = req.url === '/healthz' || (await upstreamAnswers());
    res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ upstream: upstream.href, ready: ok }));
    return;
  }
  if (!req.url.startsWith('/mcp')) {
    res.writeHead(404);
    res.end();
    return;
  }
  const headers = { ...req.headers, host: upstream.host };
  const up = http.request(
    { host: upstream.hostname, port: upstream.port, path: upstream.pathname, method: req.method, headers },
    (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    },
  );
  up.on('error', (err) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`upstream error: ${err.message}`);
  });
  req.pipe(up);
  res.on('close', () => up.destroy());
});
server.listen(Number(port), host, () => process.stderr.write(`passthrough-gateway: ${host}:${port}/mcp -> ${upstream.href}\n`));
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}
