#!/usr/bin/env node
// conformance.mjs: runs the MCP conformance server suites against a URL,
// records one verdict per scenario, and compares a direct run with a run
// through the gateway. Run it with Node 22 (the conformance CLIs need it);
// interop/conformance.sh does that for you after interop/setup.sh.
//
// Suites (each is one CLI invocation):
//   legacy      @modelcontextprotocol/conformance 0.1.16, `server --suite all`
//               (every server scenario of that release, pending ones too)
//   2025-11-25  0.2.0-alpha.12, `server --requirements 2025-11-25` (initialize wire)
//   2026-07-28  0.2.0-alpha.12, `server --requirements 2026-07-28` (stateless wire)
//
// Commands:
//   run --label L --url U [--legacy-url U] [--modern-url U] [--suites a,b] [--out F]
//       Runs the suites; legacy and 2025-11-25 go to --legacy-url, 2026-07-28 to
//       --modern-url (both default to --url). Writes F (JSON) and F minus .json
//       plus .tsv, prints a table. Exit 0 when every suite produced results,
//       2 when a suite could not run at all (deadline, crash, no results).
//   show F                      prints the table of a results file
//   compare DIRECT GATEWAY [--exclusions FILE]
//       Prints both side by side and exits 1 when a scenario that passes
//       directly fails (or is missing) through the gateway, unless
//       live-traffic.txt (or FILE) excludes the scenario or every failing check.
//   direct-go [--out F]         starts the Go SDK conformance everything-server
//       twice (stateful for the legacy wire, stateless for 2026-07-28: the SDK
//       only speaks 2026-07-28 when stateless) and runs the suites directly.
//   gateway-go [--upstream stateful|stateless|matched|stdio] [--gateway-cmd CMD] [--out F]
//       starts the Go everything-server as the single upstream of a gateway
//       (prefix: on_conflict, so names stay unprefixed as the suites expect;
//       no relay key, so relaying is the default; matched: two gateways,
//       the stateful server's for the legacy suites and the stateless one's
//       for 2026-07-28, compared by ci with no scenario excluded),
//       starts `CMD serve --config F --listen 127.0.0.1:P` (default CMD:
//       `go run ./cmd/mcp-gateway`, run from the repo root), waits for /readyz,
//       runs all suites against http://127.0.0.1:P/mcp.
//       --ready-timeout-ms N (default 180000) bounds the wait for /readyz,
//       `go run` compile time included.
//   ci [gateway-go options]     direct-go, gateway-go, compare; exit 1 on a
//       regression, 2 when a suite or the gateway could not run.
//   tasks [--gateway-cmd CMD] [--task-support required|optional] [--scenarios a,b]
//         [--exclusions FILE] [--out F]
//       runs the tasks-extension scenarios of 0.2.0-alpha.12 (the `tasks-*`
//       ones `list --server` tags [extension]; they speak 2026-07-28) one
//       CLI run each, through a gateway whose single stdio upstream is the
//       legacy (2025-11-25) interop/task-fixtures.mjs, so every task goes
//       through the gateway's translation of the eras. Writes F (default
//       WORK/tasks.json) and F minus .json plus .tsv (one row per check),
//       prints every check. Exit 1 when a check fails (or a scenario does not
//       finish) unless tasks-exclusions.txt (or FILE) names the scenario or
//       the scenario:check-id, 2 when nothing could run. --scenario-timeout-ms
//       defaults to 30000 here (a scenario that polls a stuck task for its
//       10 s should fail its checks, not the CLI's deadline).
//
// Common options: --work DIR (default interop/.results), --suite-timeout-ms N
// (default 90000: the whole CLI run is killed after it), --scenario-timeout-ms N
// (default 15000, 0.2.x only: 0.1.16 has no per-scenario timeout).

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.dirname(HERE);
const NM = path.join(HERE, 'node_modules');
const NODE22 = path.join(NM, 'node', 'bin', 'node');
const CLI = {
  legacy: path.join(NM, 'conformance-legacy', 'dist', 'index.js'),
  next: path.join(NM, 'conformance-next', 'dist', 'index.js'),
};
const GO_SERVER = path.join(HERE, '.bin', 'everything-server');
const DEFAULT_EXCLUSIONS = path.join(HERE, 'live-traffic.txt');
const TASK_FIXTURES = path.join(HERE, 'task-fixtures.mjs');
const TASKS_EXCLUSIONS = path.join(HERE, 'tasks-exclusions.txt');
const NO_EXCLUSIONS = path.join(HERE, 'no-exclusions.txt');

// era says which URL a suite is pointed at: servers such as the Go SDK's
// serve the two eras from differently configured processes.
const SUITES = {
  legacy: { cli: 'legacy', era: 'legacy', args: ['--suite', 'all'], list: ['list', '--server'] },
  '2025-11-25': {
    cli: 'next',
    era: 'legacy',
    args: ['--requirements', '2025-11-25'],
    list: ['list', '--requirements', '2025-11-25'],
  },
  '2026-07-28': {
    cli: 'next',
    era: 'modern',
    args: ['--requirements', '2026-07-28'],
    list: ['list', '--requirements', '2026-07-28'],
  },
};
const SUITE_NAMES = Object.keys(SUITES);

// ---------------------------------------------------------------- utilities

function die(msg, code = 2) {
  process.stderr.write(`conformance: ${msg}\n`);
  process.exit(code);
}

function log(msg) {
  process.stderr.write(`[conformance] ${msg}\n`);
}

function parseFlags(argv, spec) {
  const out = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) {
      out._.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = (eq > 0 ? a.slice(2, eq) : a.slice(2)).replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (!(name in spec)) die(`unknown option ${a}`);
    if (spec[name] === 'bool') {
      out[name] = true;
      continue;
    }
    let v;
    if (eq > 0) v = a.slice(eq + 1);
    else if (i + 1 < argv.length) v = argv[++i];
    else die(`${a} needs a value`);
    out[name] = spec[name] === 'int' ? Number.parseInt(v, 10) : v;
    if (spec[name] === 'int' && !Number.isFinite(out[name])) die(`${a} wants a number`);
  }
  return out;
}

function nodeBin() {
  return fs.existsSync(NODE22) ? NODE22 : process.execPath;
}

function requireInstalled() {
  for (const f of [CLI.legacy, CLI.next]) {
    if (!fs.existsSync(f)) die(`${f} is missing: run interop/setup.sh first`);
  }
  const major = Number.parseInt(spawnSync(nodeBin(), ['-p', 'process.versions.node'], { encoding: 'utf8' }).stdout, 10);
  if (!(major >= 22)) die(`the conformance CLIs need Node >= 22 (found ${major}); run interop/setup.sh`);
}

function cliVersion(which) {
  return JSON.parse(fs.readFileSync(path.join(path.dirname(path.dirname(CLI[which])), 'package.json'), 'utf8')).version;
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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A Proc is a child started in its own process group, so that stopping it
// also stops what it started (`go run` leaves the real binary as a child).
class Proc {
  constructor(name, cmd, args, { cwd, env, logFile, stdin } = {}) {
    this.name = name;
    this.out = '';
    this.exited = false;
    this.exitCode = null;
    const logFd = logFile ? fs.openSync(logFile, 'w') : null;
    this.child = spawn(cmd, args, {
      cwd,
      env: env ?? process.env,
      detached: true,
      stdio: [stdin ?? 'ignore', 'pipe', 'pipe'],
    });
    const onData = (d) => {
      this.out += d;
      if (this.out.length > 4_000_000) this.out = this.out.slice(-2_000_000);
      if (logFd !== null) fs.writeSync(logFd, d);
    };
    this.child.stdout.on('data', onData);
    this.child.stderr.on('data', onData);
    this.done = new Promise((resolve) => {
      this.child.on('error', (err) => {
        this.out += `\nspawn error: ${err.message}\n`;
        this.exited = true;
        resolve(-1);
      });
      this.child.on('close', (code, signal) => {
        this.exited = true;
        this.exitCode = code ?? (signal ? `signal ${signal}` : null);
        if (logFd !== null) fs.closeSync(logFd);
        resolve(this.exitCode);
      });
    });
  }

  signal(sig) {
    if (this.exited || !this.child.pid) return;
    try {
      process.kill(-this.child.pid, sig);
    } catch {
      try {
        this.child.kill(sig);
      } catch {
        // already gone
      }
    }
  }

  async stop(graceMs = 3000) {
    if (this.exited) return this.exitCode;
    this.signal('SIGTERM');
    const t = await Promise.race([this.done.then(() => 'exited'), sleep(graceMs).then(() => 'timeout')]);
    if (t === 'timeout') {
      this.signal('SIGKILL');
      await Promise.race([this.done, sleep(2000)]);
    }
    return this.exitCode;
  }
}

// Every Proc we start is registered here and stopped on exit or signal.
const running = new Set();
function startProc(...a) {
  const p = new Proc(...a);
  running.add(p);
  p.done.then(() => running.delete(p));
  return p;
}
async function stopAll() {
  await Promise.all([...running].map((p) => p.stop()));
}

// waitHTTP polls url until ok(status) or the deadline; a child that exits
// first ends the wait with its output, so a crash is reported, not timed out.
async function waitHTTP(url, { ok, timeoutMs, proc }) {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer yet';
  while (Date.now() < deadline) {
    if (proc && proc.exited) {
      throw new Error(`${proc.name} exited (${proc.exitCode}) before ${url} was ready:\n${proc.out.slice(-3000)}`);
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer().catch(() => {});
      if (ok(res.status)) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = err.cause?.code ?? err.message;
    }
    await sleep(200);
  }
  throw new Error(`${url} not ready after ${timeoutMs} ms (last: ${last})`);
}

// ------------------------------------------------------------- suite runner

// expectedScenarios asks the CLI which server scenarios a suite runs, and
// which of them are run without being scored (and why).
function expectedScenarios(suite) {
  const s = SUITES[suite];
  const r = spawnSync(nodeBin(), [CLI[s.cli], ...s.list], { encoding: 'utf8', timeout: 60000 });
  if (r.status !== 0) throw new Error(`${s.list.join(' ')} failed: ${r.stderr || r.stdout}`);
  const parsed = parseList(r.stdout);
  if (parsed.names.length === 0) throw new Error(`${s.list.join(' ')} listed no server scenarios:\n${r.stdout}`);
  return parsed;
}

// parseList reads the output of `conformance list --server` (0.1.x) or
// `conformance list --requirements R` (0.2.x): the server scenarios, plus the
// server scenarios a requirement set runs without scoring, with the reason.
export function parseList(stdout) {
  const names = [];
  const notScored = {};
  let section = '';
  let reason = '';
  for (const line of stdout.split('\n')) {
    if (/^Server scenarios/.test(line)) section = 'server';
    else if (/^Client scenarios/.test(line)) section = 'client';
    else if (/^Run and reported, but never scored/.test(line)) section = 'notscored';
    else if (section === 'notscored' && /^ {2}(\S+) \(\d+\):/.test(line)) reason = line.match(/^ {2}(\S+) \(/)[1];
    else {
      const m = line.match(/^\s+- (\S+)(?: \[([^\]]+)\])?/);
      if (!m) continue;
      if (section === 'server') names.push(m[1]);
      else if (section === 'notscored' && m[2] === 'server') {
        names.push(m[1]);
        notScored[m[1]] = reason;
      }
    }
  }
  return { names: [...new Set(names)], notScored };
}

const RESULT_DIR_RE = /^server-(.+)-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z)$/;

// summarizeChecks turns one scenario's checks.json into a verdict. As in the
// CLI's own server summary, a scenario fails when any check is FAILURE;
// WARNING, INFO and SKIPPED do not fail it.
export function summarizeChecks(checks) {
  const counts = {};
  for (const c of checks) counts[c.status] = (counts[c.status] ?? 0) + 1;
  const failing = checks.filter((c) => c.status === 'FAILURE');
  // One entry per distinct failing check id: ids repeat within a scenario.
  const failedChecks = [...new Set(failing.map((c) => c.id))];
  const reasons = [];
  for (const c of failing) {
    const r = `${c.id}: ${c.errorMessage ?? c.description ?? 'failed'}`.replace(/\s+/g, ' ');
    if (!reasons.includes(r)) reasons.push(r);
  }
  let reason = reasons.join('; ');
  if (reason.length > 600) reason = reason.slice(0, 597) + '...';
  if (!reason && checks.length === 0) reason = 'no checks emitted';
  return { counts, failedChecks, reason, status: failing.length > 0 ? 'fail' : 'pass' };
}

// readResultsDir reads the CLI's -o folder: one server-<scenario>-<timestamp>/
// folder per scenario, each with checks.json.
export function readResultsDir(resultsDir) {
  const found = {};
  if (!fs.existsSync(resultsDir)) return found;
  for (const d of fs.readdirSync(resultsDir).sort()) {
    const m = d.match(RESULT_DIR_RE);
    if (!m) continue;
    const f = path.join(resultsDir, d, 'checks.json');
    if (!fs.existsSync(f)) {
      found[m[1]] = { status: 'error', counts: {}, failedChecks: [], reason: 'no checks.json: the scenario did not finish', incomplete: true };
      continue;
    }
    let checks;
    try {
      checks = JSON.parse(fs.readFileSync(f, 'utf8'));
      if (!Array.isArray(checks)) throw new Error('not a JSON array');
    } catch (err) {
      found[m[1]] = { status: 'error', counts: {}, failedChecks: [], reason: `unreadable ${f}: ${err.message}` };
      continue;
    }
    found[m[1]] = summarizeChecks(checks);
  }
  return found;
}

async function runSuite(suite, url, { workDir, suiteTimeoutMs, scenarioTimeoutMs }) {
  const s = SUITES[suite];
  const dir = path.join(workDir, suite);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const resultsDir = path.join(dir, 'results');
  const { names, notScored } = expectedScenarios(suite);
  const args = [CLI[s.cli], 'server', '--url', url, ...s.args, '-o', resultsDir];
  if (s.cli === 'next') args.push('--timeout', String(scenarioTimeoutMs));
  const started = Date.now();
  // cwd is the suite's own folder: the CLI writes results/ under its cwd.
  const p = startProc(`conformance ${suite}`, nodeBin(), args, { cwd: dir, logFile: path.join(dir, 'output.txt') });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    p.stop();
  }, suiteTimeoutMs);
  const exitCode = await p.done;
  clearTimeout(timer);
  const durationMs = Date.now() - started;

  const found = readResultsDir(resultsDir);
  const startedNames = [...p.out.matchAll(/=== Running scenario: (\S+) ===/g)].map((m) => m[1]);
  // A scenario that throws gets a results folder without checks.json and a
  // "Failed to run scenario X: <error>" line: that line is the better reason.
  const crashed = Object.fromEntries(
    [...p.out.matchAll(/^Failed to run scenario (\S+): (.*)$/gm)].map((m) => [m[1], `scenario crashed: ${m[2]}`]),
  );
  for (const [n, why] of Object.entries(crashed)) {
    if (!found[n] || found[n].status === 'error') found[n] = { status: 'error', counts: {}, failedChecks: [], reason: why };
  }
  for (const r of Object.values(found)) {
    if (r.incomplete && timedOut) r.reason = 'started but killed at the suite deadline';
    delete r.incomplete;
  }
  const scenarios = {};
  for (const n of [...names, ...startedNames, ...Object.keys(found)]) {
    if (scenarios[n]) continue;
    let r = found[n];
    if (!r) {
      const why = startedNames.includes(n)
        ? timedOut
          ? 'started but killed at the suite deadline'
          : 'started but wrote no results'
        : timedOut
          ? 'not run: suite deadline exceeded'
          : `not run (CLI exit ${exitCode})`;
      r = { status: 'error', counts: {}, failedChecks: [], reason: why };
    }
    scenarios[n] = { ...r, scored: !(n in notScored), ...(n in notScored ? { notScored: notScored[n] } : {}) };
  }
  const ranAny = Object.keys(found).length > 0;
  return {
    tool: `@modelcontextprotocol/conformance@${cliVersion(s.cli)}`,
    command: ['node', path.relative(HERE, CLI[s.cli]), ...args.slice(1).map((a) => (a === resultsDir ? path.relative(HERE, a) : a))].join(' '),
    url,
    exitCode,
    timedOut,
    durationMs,
    ok: ranAny && !timedOut,
    outputTail: ranAny && !timedOut ? undefined : p.out.slice(-2000),
    scenarios,
  };
}

async function runAll({ label, urls, suites, workDir, out, suiteTimeoutMs, scenarioTimeoutMs }) {
  const base = path.join(workDir, label);
  fs.mkdirSync(base, { recursive: true });
  const result = {
    label,
    createdAt: new Date().toISOString(),
    node: spawnSync(nodeBin(), ['--version'], { encoding: 'utf8' }).stdout.trim(),
    suites: {},
  };
  for (const suite of suites) {
    const url = urls[SUITES[suite].era];
    log(`${label}: ${suite} against ${url}`);
    const r = await runSuite(suite, url, { workDir: base, suiteTimeoutMs, scenarioTimeoutMs });
    const vals = Object.values(r.scenarios);
    log(
      `${label}: ${suite} done in ${(r.durationMs / 1000).toFixed(1)} s: ` +
        `${vals.filter((v) => v.status === 'pass').length} pass, ${vals.filter((v) => v.status !== 'pass').length} not` +
        (r.timedOut ? ' (suite deadline hit)' : ''),
    );
    result.suites[suite] = r;
  }
  writeResults(result, out);
  printTable(result);
  const broken = Object.entries(result.suites).filter(([, r]) => !r.ok);
  for (const [suite, r] of broken) log(`${label}: suite ${suite} did not run properly:\n${r.outputTail}`);
  return { result, exitCode: broken.length > 0 ? 2 : 0 };
}

function writeResults(result, out) {
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify(result, null, 2) + '\n');
  const rows = [['suite', 'scenario', 'status', 'scored', 'reason'].join('\t')];
  for (const [suite, r] of Object.entries(result.suites)) {
    for (const [name, sc] of Object.entries(r.scenarios)) {
      rows.push([suite, name, sc.status, sc.scored ? 'yes' : `no (${sc.notScored})`, (sc.reason ?? '').replace(/[\t\n]/g, ' ')].join('\t'));
    }
  }
  const tsv = out.replace(/\.json$/, '') + '.tsv';
  fs.writeFileSync(tsv, rows.join('\n') + '\n');
  log(`wrote ${out} and ${tsv}`);
}

// ------------------------------------------------------------------ tables

function pad(s, n) {
  s = String(s);
  return s.length >= n ? s : s + ' '.repeat(n - s.length);
}

function cell(sc) {
  if (!sc) return '-';
  const v = { pass: 'pass', fail: 'FAIL', error: 'ERROR' }[sc.status] ?? sc.status;
  return sc.scored === false ? `${v} (ns)` : v;
}

function scenarioOrder(...results) {
  const order = [];
  const seen = new Set();
  for (const res of results) {
    for (const suite of SUITE_NAMES) {
      for (const n of Object.keys(res?.suites?.[suite]?.scenarios ?? {})) {
        if (!seen.has(n)) {
          seen.add(n);
          order.push(n);
        }
      }
    }
  }
  return order;
}

function printTable(result) {
  const suites = SUITE_NAMES.filter((s) => result.suites[s]);
  const names = scenarioOrder(result);
  const w = Math.max(8, ...names.map((n) => n.length)) + 2;
  const out = [];
  out.push(`\n${result.label}  (ns = run but not scored by that requirement set)`);
  out.push(pad('scenario', w) + suites.map((s) => pad(s, 14)).join(''));
  for (const n of names) out.push(pad(n, w) + suites.map((s) => pad(cell(result.suites[s].scenarios[n]), 14)).join(''));
  const totals = suites.map((s) => {
    const v = Object.values(result.suites[s].scenarios);
    return pad(`${v.filter((x) => x.status === 'pass').length}/${v.length}`, 14);
  });
  out.push(pad('passing', w) + totals.join(''));
  out.push(pad('seconds', w) + suites.map((s) => pad((result.suites[s].durationMs / 1000).toFixed(1), 14)).join(''));
  const reasons = [];
  for (const s of suites) {
    for (const [n, sc] of Object.entries(result.suites[s].scenarios)) {
      if (sc.status !== 'pass') reasons.push(`  ${s} ${n}: ${sc.reason}`);
    }
  }
  if (reasons.length) out.push('\nnot passing:', ...reasons);
  process.stdout.write(out.join('\n') + '\n');
}

// ---------------------------------------------------------------- compare

// The exclusion file lists "live traffic" scenarios: a scenario that passes
// directly but fails through the gateway is a regression unless it is named
// here (whole scenario), or every failing check is named as scenario:check-id.
export function loadExclusions(file) {
  const scenarios = new Map();
  const checks = new Map();
  for (const raw of fs.readFileSync(file, 'utf8').split('\n')) {
    const line = raw.replace(/^\s+|\s+$/g, '');
    if (!line || line.startsWith('#')) continue;
    const m = line.match(/^(\S+)\s+(.+)$/);
    if (!m) throw new Error(`${file}: a line needs a name and a reason: ${JSON.stringify(raw)}`);
    const [name, reason] = [m[1], m[2]];
    const colon = name.indexOf(':');
    if (colon > 0) checks.set(name, reason);
    else scenarios.set(name, reason);
  }
  return { scenarios, checks };
}

// compare lines up two results files (same suites, same scenario names) and
// returns the report text, one verdict per suite and scenario, and the exit
// code: 1 when something passes directly and fails through the gateway
// without an exclusion.
export function compare(direct, gateway, ex, exclusionsLabel = 'live-traffic.txt') {
  const names = scenarioOrder(direct, gateway);
  const suites = SUITE_NAMES.filter((s) => direct.suites[s] || gateway.suites[s]);
  const known = new Set(names);
  const notes = [];
  for (const n of [...ex.scenarios.keys(), ...[...ex.checks.keys()].map((k) => k.split(':')[0])]) {
    if (!known.has(n)) notes.push(`note: exclusion ${n} names no scenario in these results`);
  }
  const w = Math.max(8, ...names.map((n) => n.length)) + 2;
  const out = [];
  out.push(`\n${pad('', w)}${suites.map((s) => pad(s, 24)).join('')}`);
  out.push(pad('scenario', w) + suites.map(() => pad(`${direct.label} | ${gateway.label}`, 24)).join('') + 'verdict');
  const regressions = [];
  const excused = [];
  const verdictList = [];
  const counts = { ok: 0, regression: 0, excluded: 0, improved: 0, 'both fail': 0, 'gateway only': 0 };
  for (const n of names) {
    const verdicts = [];
    const cells = [];
    for (const s of suites) {
      const d = direct.suites[s]?.scenarios?.[n];
      const g = gateway.suites[s]?.scenarios?.[n];
      cells.push(pad(`${cell(d)} | ${cell(g)}`, 24));
      if (!d && !g) continue;
      let v;
      if (!d) v = 'gateway only';
      else if (d.status === 'pass' && g?.status === 'pass') v = 'ok';
      else if (d.status === 'pass') {
        const why = g ? g.reason : `${gateway.label} has no result for it`;
        if (ex.scenarios.has(n)) {
          v = 'excluded';
          excused.push(`  ${s} ${n}: ${ex.scenarios.get(n)} [${gateway.label}: ${why}]`);
        } else if (g?.status === 'fail' && g.failedChecks.length > 0 && g.failedChecks.every((c) => ex.checks.has(`${n}:${c}`))) {
          v = 'excluded';
          excused.push(`  ${s} ${n}: only excluded checks fail: ${g.failedChecks.map((c) => `${c} (${ex.checks.get(`${n}:${c}`)})`).join(', ')}`);
        } else {
          v = 'regression';
          regressions.push(`  ${s} ${n}: ${why}`);
        }
      } else if (g?.status === 'pass') v = 'improved';
      else v = 'both fail';
      counts[v]++;
      verdicts.push(v);
      verdictList.push({ suite: s, scenario: n, verdict: v });
    }
    const worst = ['regression', 'excluded', 'both fail', 'improved', 'gateway only', 'ok'].find((v) => verdicts.includes(v)) ?? '';
    out.push(pad(n, w) + cells.join('') + (worst === 'regression' ? 'REGRESSION' : worst));
  }
  out.push(
    `\n${Object.entries(counts)
      .map(([k, v]) => `${v} ${k}`)
      .join(', ')} (counted per suite and scenario)`,
  );
  if (excused.length) out.push(`\nexcluded as live traffic (see ${exclusionsLabel}):`, ...excused);
  if (regressions.length) out.push(`\nREGRESSIONS: pass ${direct.label}, fail ${gateway.label}:`, ...regressions);
  else out.push(`\nno regressions: everything that passes ${direct.label} passes ${gateway.label} (or is excluded)`);
  if (notes.length) out.push('', ...notes);
  return { code: regressions.length > 0 ? 1 : 0, text: out.join('\n') + '\n', verdicts: verdictList };
}

function compareFiles(direct, gateway, exclusionsFile) {
  let ex;
  try {
    ex = loadExclusions(exclusionsFile);
  } catch (err) {
    die(err.message);
  }
  const r = compare(direct, gateway, ex, path.relative(process.cwd(), exclusionsFile) || exclusionsFile);
  process.stdout.write(r.text);
  return r.code;
}

// --------------------------------------------------------------- Go servers

function requireGoServer() {
  if (!fs.existsSync(GO_SERVER)) die(`${GO_SERVER} is missing: run interop/setup.sh first`);
}

async function startGoHTTP(name, stateless, workDir) {
  const port = await freePort();
  const args = [`-http=127.0.0.1:${port}`, `-stateless=${stateless}`];
  const p = startProc(name, GO_SERVER, args, { logFile: path.join(workDir, `${name}.log`) });
  const url = `http://127.0.0.1:${port}/mcp`;
  // The SDK handler answers a bare GET with 4xx: any HTTP answer means ready.
  await waitHTTP(url, { ok: () => true, timeoutMs: 15000, proc: p });
  log(`${name}: ${GO_SERVER} ${args.join(' ')} at ${url}`);
  return { proc: p, url };
}

async function directGo(opts) {
  requireGoServer();
  fs.mkdirSync(opts.workDir, { recursive: true });
  const stateful = await startGoHTTP('go-stateful', false, opts.workDir);
  const stateless = await startGoHTTP('go-stateless', true, opts.workDir);
  try {
    return await runAll({ ...opts, label: opts.label ?? 'direct', urls: { legacy: stateful.url, modern: stateless.url } });
  } finally {
    await stateful.proc.stop();
    await stateless.proc.stop();
  }
}

function yamlString(s) {
  return JSON.stringify(s); // a JSON string is a valid YAML double-quoted scalar
}

// startGatewayFor starts the Go everything-server in upstreamMode as the
// single upstream of a gateway, configured as a user would (no relay key:
// the default relays sampling, elicitation and roots from an HTTP
// upstream), and returns its MCP URL once /readyz says ready.
async function startGatewayFor(opts, dir, upstreamMode) {
  fs.mkdirSync(dir, { recursive: true });
  let upstreamYaml;
  let upstream;
  if (upstreamMode === 'stdio') {
    upstreamYaml = `    command: ${yamlString(GO_SERVER)}\n    args: []\n`;
  } else if (upstreamMode === 'stateful' || upstreamMode === 'stateless') {
    upstream = await startGoHTTP(`go-${upstreamMode}-upstream`, upstreamMode === 'stateless', dir);
    upstreamYaml = `    url: ${yamlString(upstream.url)}\n    transport: streamable-http\n`;
  } else {
    die(`--upstream wants stateful, stateless, matched or stdio, not ${upstreamMode}`);
  }
  const gw = await startGateway(opts, dir, {
    comment: 'gateway-go: one upstream, names unprefixed',
    name: 'everything',
    upstreamYaml,
    what: `upstream ${upstreamMode}`,
  });
  return {
    url: gw.url,
    stop: async () => {
      await gw.stop();
      if (upstream) await upstream.proc.stop();
    },
  };
}

// startGateway writes dir/gateway.yaml with one upstream (prefix:
// on_conflict, so its names stay unprefixed as the suites expect), starts
// `CMD serve` on a free port and returns its MCP URL once /readyz says ready.
async function startGateway(opts, dir, { comment, name, upstreamYaml, what }) {
  fs.mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const listen = `127.0.0.1:${port}`;
  const config = path.join(dir, 'gateway.yaml');
  fs.writeFileSync(
    config,
    [
      `# written by interop/conformance.mjs ${comment}`,
      `listen: ${listen}`,
      `endpoint: /mcp`,
      `prefix: on_conflict`,
      `upstreams:`,
      `  - name: ${name}`,
      upstreamYaml + `    required: true`,
      `    session: per-client`,
      `auth:`,
      `  mode: none`,
      `telemetry:`,
      `  log_level: debug`,
      '',
    ].join('\n'),
  );
  const cmd = (opts.gatewayCmd ?? 'go run ./cmd/mcp-gateway').split(/\s+/).filter(Boolean);
  const args = [...cmd.slice(1), 'serve', '--config', config, '--listen', listen];
  log(`gateway: ${cmd[0]} ${args.join(' ')} (cwd ${REPO}), ${what}`);
  const gw = startProc('gateway', cmd[0], args, { cwd: REPO, logFile: path.join(dir, 'gateway.log') });
  const stop = async () => {
    await gw.stop();
    log(`gateway log: ${path.join(dir, 'gateway.log')}`);
  };
  try {
    await waitHTTP(`http://${listen}/readyz`, { ok: (s) => s === 200, timeoutMs: opts.readyTimeoutMs, proc: gw });
  } catch (err) {
    await stop();
    throw err;
  }
  return { url: `http://${listen}/mcp`, stop };
}

// gatewayGo runs the suites through gateways. With --upstream matched, the
// legacy suites go through a gateway over the stateful server and the
// 2026-07-28 suite through one over the stateless server, as the direct
// run does: no host meets an upstream of the other era, so its results
// must equal the direct ones with nothing excluded.
async function gatewayGo(opts) {
  requireGoServer();
  const dir = path.join(opts.workDir, opts.label ?? 'gateway');
  const upstreamMode = opts.upstream ?? 'stateful';
  const modes = upstreamMode === 'matched' ? { legacy: 'stateful', modern: 'stateless' } : { legacy: upstreamMode };
  const gateways = {};
  try {
    for (const [era, mode] of Object.entries(modes)) {
      gateways[era] = await startGatewayFor(opts, upstreamMode === 'matched' ? path.join(dir, era) : dir, mode);
    }
    const legacy = gateways.legacy.url;
    const modern = (gateways.modern ?? gateways.legacy).url;
    return await runAll({ ...opts, label: opts.label ?? 'gateway', urls: { legacy, modern } });
  } finally {
    for (const g of Object.values(gateways)) await g.stop();
  }
}

// ------------------------------------------------------------ tasks scenarios

// parseExtensionList reads `conformance list --server` (0.2.x) for the
// tasks-extension scenarios: the tasks-* lines tagged [extension].
export function parseExtensionList(stdout) {
  const names = [];
  for (const line of stdout.split('\n')) {
    const m = line.match(/^\s+- (tasks-\S+) \[extension\]\s*$/);
    if (m && !names.includes(m[1])) names.push(m[1]);
  }
  return names;
}

function tasksScenarios() {
  const r = spawnSync(nodeBin(), [CLI.next, 'list', '--server'], { encoding: 'utf8', timeout: 60000 });
  if (r.status !== 0) throw new Error(`list --server failed: ${r.stderr || r.stdout}`);
  const names = parseExtensionList(r.stdout);
  if (names.length === 0) throw new Error(`list --server listed no tasks-* [extension] scenarios:\n${r.stdout}`);
  return names;
}

// readScenarioChecks reads the one result folder a `--scenario S` run
// writes under resultsDir: its checks, or null when it wrote none.
export function readScenarioChecks(resultsDir, scenario) {
  if (!fs.existsSync(resultsDir)) return null;
  const dirs = fs
    .readdirSync(resultsDir)
    .filter((d) => RESULT_DIR_RE.test(d) && d.match(RESULT_DIR_RE)[1] === scenario)
    .sort();
  if (dirs.length === 0) return null;
  const f = path.join(resultsDir, dirs[dirs.length - 1], 'checks.json');
  if (!fs.existsSync(f)) return null;
  const checks = JSON.parse(fs.readFileSync(f, 'utf8'));
  if (!Array.isArray(checks)) throw new Error(`${f}: not a JSON array`);
  return checks;
}

// judgeTasks gives each scenario's checks a verdict against the exclusions:
// a FAILURE check is "fail" unless the scenario or scenario:check-id is
// excluded ("excluded"); a scenario that wrote no checks is one failing
// check, "scenario-did-not-finish". Exclusions that excuse nothing are
// reported as stale. code is 1 when anything fails unexcused.
export function judgeTasks(scenarios, ex) {
  const failures = [];
  const excused = [];
  const used = new Set();
  for (const [name, sc] of Object.entries(scenarios)) {
    const checks = sc.checks ?? [{ id: 'scenario-did-not-finish', status: 'FAILURE', errorMessage: sc.reason ?? 'no checks.json' }];
    for (const c of checks) {
      if (c.status !== 'FAILURE') continue;
      const line = `  ${name} ${c.id}: ${(c.errorMessage ?? c.description ?? 'failed').replace(/\s+/g, ' ')}`;
      const why = ex.scenarios.get(name) ?? ex.checks.get(`${name}:${c.id}`);
      if (why === undefined) {
        failures.push(line);
        continue;
      }
      used.add(ex.scenarios.has(name) ? name : `${name}:${c.id}`);
      excused.push(`${line} [excluded: ${why}]`);
    }
  }
  const stale = [...ex.scenarios.keys(), ...ex.checks.keys()].filter((k) => !used.has(k));
  return { code: failures.length > 0 ? 1 : 0, failures, excused, stale };
}

async function runTasks(opts) {
  const dir = path.join(opts.workDir, opts.label);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const names = opts.scenarios ?? tasksScenarios();
  const fixtureArgs = [TASK_FIXTURES, '--task-support', opts.taskSupport];
  const gw = await startGateway(opts, dir, {
    comment: 'tasks: the legacy task fixtures as the one stdio upstream, names unprefixed',
    name: 'fixtures',
    upstreamYaml: `    command: ${yamlString(nodeBin())}\n    args: ${JSON.stringify(fixtureArgs)}\n`,
    what: `upstream ${path.relative(REPO, TASK_FIXTURES)} --task-support ${opts.taskSupport}`,
  });
  const resultsDir = path.join(dir, 'results');
  const result = {
    label: opts.label,
    tool: `@modelcontextprotocol/conformance@${cliVersion('next')}`,
    createdAt: new Date().toISOString(),
    upstream: `node ${path.relative(REPO, TASK_FIXTURES)} --task-support ${opts.taskSupport}`,
    url: gw.url,
    scenarios: {},
  };
  const started = Date.now();
  try {
    for (const name of names) {
      const args = [CLI.next, 'server', '--url', gw.url, '--scenario', name, '--timeout', String(opts.scenarioTimeoutMs), '-o', resultsDir];
      const t0 = Date.now();
      const p = startProc(`conformance ${name}`, nodeBin(), args, { cwd: dir, logFile: path.join(dir, `${name}.txt`) });
      // The CLI kills a scenario at --timeout; this is for a CLI that hangs.
      const timer = setTimeout(() => p.stop(), opts.scenarioTimeoutMs + 30000);
      const exitCode = await p.done;
      clearTimeout(timer);
      let checks = null;
      let reason;
      try {
        checks = readScenarioChecks(resultsDir, name);
      } catch (err) {
        reason = err.message;
      }
      if (!checks) {
        const crash = p.out.match(/^Failed to run scenario \S+: (.*)$/m);
        reason ??= crash ? `scenario crashed: ${crash[1]}` : `no checks.json (CLI exit ${exitCode})`;
      }
      const counts = {};
      for (const c of checks ?? []) counts[c.status] = (counts[c.status] ?? 0) + 1;
      result.scenarios[name] = {
        durationMs: Date.now() - t0,
        exitCode,
        counts,
        ...(reason ? { reason } : {}),
        checks: checks?.map((c) => ({ id: c.id, status: c.status, ...(c.errorMessage ? { errorMessage: c.errorMessage } : {}) })) ?? null,
      };
      log(`tasks: ${name} in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', ') || reason}`);
    }
  } finally {
    await gw.stop();
  }
  result.durationMs = Date.now() - started;
  writeTasksResults(result, opts.out);
  let ex;
  try {
    ex = loadExclusions(opts.exclusions);
  } catch (err) {
    die(err.message);
  }
  const j = judgeTasks(result.scenarios, ex);
  printTasks(result, j, path.relative(process.cwd(), opts.exclusions) || opts.exclusions);
  const ranAny = Object.values(result.scenarios).some((s) => s.checks);
  return ranAny ? j.code : 2;
}

function writeTasksResults(result, out) {
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify(result, null, 2) + '\n');
  const rows = [['scenario', 'check', 'status', 'message'].join('\t')];
  for (const [name, sc] of Object.entries(result.scenarios)) {
    if (!sc.checks) rows.push([name, '-', 'ERROR', sc.reason].join('\t'));
    for (const c of sc.checks ?? []) rows.push([name, c.id, c.status, (c.errorMessage ?? '').replace(/[\t\n]/g, ' ')].join('\t'));
  }
  const tsv = out.replace(/\.json$/, '') + '.tsv';
  fs.writeFileSync(tsv, rows.join('\n') + '\n');
  log(`wrote ${out} and ${tsv}`);
}

function printTasks(result, j, exclusionsLabel) {
  const out = [`\n${result.label}: ${result.tool} tasks scenarios through the gateway, upstream ${result.upstream}`];
  const w = Math.max(8, ...Object.values(result.scenarios).flatMap((s) => (s.checks ?? []).map((c) => c.id.length))) + 2;
  for (const [name, sc] of Object.entries(result.scenarios)) {
    out.push(`${name} (${(sc.durationMs / 1000).toFixed(1)} s)`);
    if (!sc.checks) out.push(`  ${pad('-', w)}ERROR    ${sc.reason}`);
    for (const c of sc.checks ?? []) {
      out.push(`  ${pad(c.id, w)}${pad(c.status, 9)}${c.status === 'SUCCESS' ? '' : (c.errorMessage ?? '').replace(/\s+/g, ' ')}`);
    }
  }
  out.push(`${(result.durationMs / 1000).toFixed(1)} s in all`);
  if (j.excused.length) out.push(`\nexcused by ${exclusionsLabel}:`, ...j.excused);
  if (j.stale.length) out.push(`\nnote: ${exclusionsLabel} excuses nothing for: ${j.stale.join(', ')} (remove it?)`);
  if (j.failures.length) out.push(`\nFAILING through the gateway:`, ...j.failures);
  else out.push(`\nno unexcused failures`);
  process.stdout.write(out.join('\n') + '\n');
}

// ------------------------------------------------------------------- main

const COMMON = {
  label: 'str',
  work: 'str',
  out: 'str',
  suites: 'str',
  suiteTimeoutMs: 'int',
  scenarioTimeoutMs: 'int',
  exclusions: 'str',
};

function commonOpts(f, defaultLabel) {
  const workDir = path.resolve(f.work ?? path.join(HERE, '.results'));
  const label = f.label ?? defaultLabel;
  const suites = f.suites ? f.suites.split(',') : SUITE_NAMES;
  for (const s of suites) if (!SUITES[s]) die(`unknown suite ${s} (have ${SUITE_NAMES.join(', ')})`);
  return {
    workDir,
    label,
    suites,
    out: path.resolve(f.out ?? path.join(workDir, `${label}.json`)),
    suiteTimeoutMs: f.suiteTimeoutMs ?? 90000,
    scenarioTimeoutMs: f.scenarioTimeoutMs ?? 15000,
  };
}

function readResults(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    die(`cannot read results ${file}: ${err.message}`);
  }
}

async function main() {
  const [cmd, ...rest] = process.argv.slice(2);
  switch (cmd) {
    case 'run': {
      const f = parseFlags(rest, { ...COMMON, url: 'str', legacyUrl: 'str', modernUrl: 'str' });
      if (!f.url && !(f.legacyUrl && f.modernUrl)) die('run needs --url (or both --legacy-url and --modern-url)');
      requireInstalled();
      const o = commonOpts(f, 'target');
      const { exitCode } = await runAll({ ...o, urls: { legacy: f.legacyUrl ?? f.url, modern: f.modernUrl ?? f.url } });
      return exitCode;
    }
    case 'show': {
      const f = parseFlags(rest, {});
      if (f._.length !== 1) die('show FILE');
      printTable(readResults(f._[0]));
      return 0;
    }
    case 'compare': {
      const f = parseFlags(rest, { exclusions: 'str' });
      if (f._.length !== 2) die('compare DIRECT.json GATEWAY.json [--exclusions FILE]');
      return compareFiles(readResults(f._[0]), readResults(f._[1]), f.exclusions ?? DEFAULT_EXCLUSIONS);
    }
    case 'direct-go': {
      const f = parseFlags(rest, COMMON);
      requireInstalled();
      return (await directGo(commonOpts(f, 'direct'))).exitCode;
    }
    case 'gateway-go': {
      const f = parseFlags(rest, { ...COMMON, upstream: 'str', gatewayCmd: 'str', readyTimeoutMs: 'int' });
      requireInstalled();
      const o = commonOpts(f, 'gateway');
      return (await gatewayGo({ ...o, upstream: f.upstream, gatewayCmd: f.gatewayCmd, readyTimeoutMs: f.readyTimeoutMs ?? 180000 })).exitCode;
    }
    case 'ci': {
      const f = parseFlags(rest, { ...COMMON, upstream: 'str', gatewayCmd: 'str', readyTimeoutMs: 'int' });
      requireInstalled();
      const started = Date.now();
      const d = await directGo(commonOpts({ ...f, label: 'direct', out: undefined }, 'direct'));
      const gOpts = commonOpts({ ...f, label: 'gateway', out: undefined }, 'gateway');
      const g = await gatewayGo({ ...gOpts, upstream: f.upstream, gatewayCmd: f.gatewayCmd, readyTimeoutMs: f.readyTimeoutMs ?? 180000 });
      // Matched eras cross nothing: no scenario is excused.
      const exclusions = f.exclusions ?? (f.upstream === 'matched' ? NO_EXCLUSIONS : DEFAULT_EXCLUSIONS);
      const c = compareFiles(d.result, g.result, exclusions);
      log(`ci: ${((Date.now() - started) / 1000).toFixed(1)} s in all`);
      return d.exitCode || g.exitCode || c;
    }
    case 'tasks': {
      const f = parseFlags(rest, { ...COMMON, gatewayCmd: 'str', readyTimeoutMs: 'int', taskSupport: 'str', scenarios: 'str' });
      requireInstalled();
      const o = commonOpts({ ...f, scenarioTimeoutMs: f.scenarioTimeoutMs ?? 30000 }, 'tasks');
      const taskSupport = f.taskSupport ?? 'required';
      if (!['required', 'optional'].includes(taskSupport)) die(`--task-support wants required or optional, not ${taskSupport}`);
      return runTasks({
        ...o,
        gatewayCmd: f.gatewayCmd,
        readyTimeoutMs: f.readyTimeoutMs ?? 180000,
        taskSupport,
        scenarios: f.scenarios ? f.scenarios.split(',').filter(Boolean) : undefined,
        exclusions: path.resolve(f.exclusions ?? TASKS_EXCLUSIONS),
      });
    }
    default:
      die('usage: conformance.mjs run|show|compare|direct-go|gateway-go|ci|tasks [options] (see the header of this file)');
  }
}

// Run only as a program: conformance.test.mjs imports the functions above.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, async () => {
      await stopAll();
      process.exit(130);
    });
  }
  let code = 2;
  try {
    code = await main();
  } catch (err) {
    // The message says what went wrong (a child's output included); the stack
    // only helps when debugging this script.
    process.stderr.write(`conformance: ${err instanceof Error ? (process.env.CONFORMANCE_DEBUG ? err.stack : err.message) : err}\n`);
  } finally {
    await stopAll();
  }
  process.exit(code);
}
