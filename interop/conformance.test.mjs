// Tests for the parts of conformance.mjs that decide verdicts: reading the
// CLIs' output, turning checks into a scenario verdict, the exclusion file,
// and the direct-vs-gateway comparison that gates CI.
//
//   interop/node_modules/node/bin/node --test interop/conformance.test.mjs

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import { compare, judgeTasks, loadExclusions, parseExtensionList, parseList, readResultsDir, readScenarioChecks, summarizeChecks } from './conformance.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));

describe('parseList', () => {
  it('reads 0.1.x `list --server`', () => {
    const out = [
      'Server scenarios (test against a server):',
      '  - server-initialize [2025-06-18,2025-11-25]',
      '  - ping [2025-06-18,2025-11-25]',
      '',
    ].join('\n');
    assert.deepEqual(parseList(out), { names: ['server-initialize', 'ping'], notScored: {} });
  });

  it('reads 0.2.x `list --requirements`, server side only, with not-scored reasons', () => {
    const out = [
      'Required for 2026-07-28 (69 scenarios, frozen; run at the 2026-07-28 wire):',
      '',
      'Server scenarios (test against a server):',
      '  - server-stateless',
      '  - tools-list',
      '',
      'Client scenarios (test against a client):',
      '  - tools_call',
      '',
      'Run and reported, but never scored:',
      '  extension (2):',
      '    - auth/dpop [client]',
      '    - tasks-lifecycle [server]',
      '  pending (1):',
      '    - http-header-validation [server]',
      '',
    ].join('\n');
    assert.deepEqual(parseList(out), {
      names: ['server-stateless', 'tools-list', 'tasks-lifecycle', 'http-header-validation'],
      notScored: { 'tasks-lifecycle': 'extension', 'http-header-validation': 'pending' },
    });
  });
});

describe('summarizeChecks', () => {
  const cases = [
    {
      name: 'all success passes',
      checks: [{ id: 'a', status: 'SUCCESS' }, { id: 'w', status: 'INFO' }],
      want: { status: 'pass', failedChecks: [], reason: '' },
    },
    {
      name: 'warnings and skips do not fail, as in the CLI',
      checks: [{ id: 'a', status: 'WARNING' }, { id: 'b', status: 'SKIPPED' }],
      want: { status: 'pass', failedChecks: [], reason: '' },
    },
    {
      name: 'a failure fails, repeated ids listed once',
      checks: [
        { id: 'x', status: 'FAILURE', errorMessage: 'boom' },
        { id: 'x', status: 'FAILURE', errorMessage: 'boom' },
        { id: 'y', status: 'FAILURE', description: 'no message' },
        { id: 'z', status: 'SUCCESS' },
      ],
      want: { status: 'fail', failedChecks: ['x', 'y'], reason: 'x: boom; y: no message' },
    },
    {
      name: 'no checks at all passes, and says so',
      checks: [],
      want: { status: 'pass', failedChecks: [], reason: 'no checks emitted' },
    },
  ];
  for (const tc of cases) {
    it(tc.name, () => {
      const got = summarizeChecks(tc.checks);
      assert.deepEqual({ status: got.status, failedChecks: got.failedChecks, reason: got.reason }, tc.want);
    });
  }
});

describe('readResultsDir', () => {
  it('maps result folders to scenarios and reports unreadable ones', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'conformance-test-'));
    try {
      const put = (name, body) => {
        fs.mkdirSync(path.join(dir, name));
        fs.writeFileSync(path.join(dir, name, 'checks.json'), body);
      };
      put('server-tools-call-simple-text-2026-11-30T08-13-16-851Z', JSON.stringify([{ id: 'a', status: 'SUCCESS' }]));
      put('server-server-initialize-2026-11-30T08-13-16-900Z', JSON.stringify([{ id: 'i', status: 'FAILURE', errorMessage: 'nope' }]));
      put('server-ping-2026-11-30T08-13-17-000Z', '{not json');
      fs.mkdirSync(path.join(dir, 'not-a-result'));
      fs.mkdirSync(path.join(dir, 'server-tools-list-2026-11-30T08-13-18-000Z'));
      const got = readResultsDir(dir);
      assert.deepEqual(Object.keys(got).sort(), ['ping', 'server-initialize', 'tools-call-simple-text', 'tools-list']);
      assert.equal(got['tools-list'].status, 'error');
      assert.match(got['tools-list'].reason, /did not finish/);
      assert.equal(got['tools-call-simple-text'].status, 'pass');
      assert.equal(got['server-initialize'].status, 'fail');
      assert.equal(got['server-initialize'].reason, 'i: nope');
      assert.equal(got.ping.status, 'error');
      assert.match(got.ping.reason, /unreadable/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('gives nothing for a missing folder', () => {
    assert.deepEqual(readResultsDir(path.join(os.tmpdir(), 'does-not-exist-conformance')), {});
  });
});

describe('loadExclusions', () => {
  it('rejects a line without a reason', () => {
    const f = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'conformance-test-')), 'x.txt');
    fs.writeFileSync(f, '# comment\ntools-call-with-progress\n');
    assert.throws(() => loadExclusions(f), /needs a name and a reason/);
  });

  it('names only scenarios the pinned CLIs know', () => {
    const ex = loadExclusions(path.join(HERE, 'live-traffic.txt'));
    assert.ok(ex.scenarios.size > 0);
    const known = new Set();
    const node = path.join(HERE, 'node_modules', 'node', 'bin', 'node');
    for (const [cli, args] of [
      ['conformance-legacy', ['list', '--server']],
      ['conformance-next', ['list', '--server']],
    ]) {
      const r = spawnSync(node, [path.join(HERE, 'node_modules', cli, 'dist', 'index.js'), ...args], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      for (const n of parseList(r.stdout).names) known.add(n);
    }
    const unknown = [...ex.scenarios.keys(), ...[...ex.checks.keys()].map((k) => k.split(':')[0])].filter((n) => !known.has(n));
    assert.deepEqual(unknown, []);
  });
});

describe('compare', () => {
  const sc = (status, failedChecks = []) => ({ status, failedChecks, reason: failedChecks.join('; '), scored: true, counts: {} });
  const results = (label, suites) => ({
    label,
    suites: Object.fromEntries(Object.entries(suites).map(([s, scenarios]) => [s, { scenarios, durationMs: 1 }])),
  });
  const ex = {
    scenarios: new Map([['tools-call-with-progress', 'progress']]),
    checks: new Map([['server-stateless:sub-ack', 'subscriptions']]),
  };
  const cases = [
    { name: 'both pass', d: sc('pass'), g: sc('pass'), want: 'ok', code: 0 },
    { name: 'gateway fails', d: sc('pass'), g: sc('fail', ['x']), want: 'regression', code: 1 },
    { name: 'gateway errors', d: sc('pass'), g: sc('error'), want: 'regression', code: 1 },
    { name: 'gateway has no result', d: sc('pass'), g: undefined, want: 'regression', code: 1 },
    { name: 'excluded scenario', scenario: 'tools-call-with-progress', d: sc('pass'), g: sc('fail', ['x']), want: 'excluded', code: 0 },
    { name: 'excluded scenario missing', scenario: 'tools-call-with-progress', d: sc('pass'), g: undefined, want: 'excluded', code: 0 },
    { name: 'only excluded checks fail', scenario: 'server-stateless', d: sc('pass'), g: sc('fail', ['sub-ack']), want: 'excluded', code: 0 },
    {
      name: 'an excluded and another check fail',
      scenario: 'server-stateless',
      d: sc('pass'),
      g: sc('fail', ['sub-ack', 'discover']),
      want: 'regression',
      code: 1,
    },
    { name: 'check exclusions do not excuse an error', scenario: 'server-stateless', d: sc('pass'), g: sc('error'), want: 'regression', code: 1 },
    { name: 'fails directly too', d: sc('fail', ['x']), g: sc('fail', ['x']), want: 'both fail', code: 0 },
    { name: 'passes only through the gateway', d: sc('fail', ['x']), g: sc('pass'), want: 'improved', code: 0 },
    { name: 'only in gateway results', d: undefined, g: sc('pass'), want: 'gateway only', code: 0 },
  ];
  for (const tc of cases) {
    it(tc.name, () => {
      const n = tc.scenario ?? 'tools-list';
      const direct = results('direct', { '2026-07-28': tc.d ? { [n]: tc.d } : {} });
      const gateway = results('gateway', { '2026-07-28': tc.g ? { [n]: tc.g } : {} });
      const got = compare(direct, gateway, ex);
      assert.deepEqual(got.verdicts, [{ suite: '2026-07-28', scenario: n, verdict: tc.want }]);
      assert.equal(got.code, tc.code);
    });
  }

  it('a suite missing from the gateway results regresses all its passing scenarios', () => {
    const direct = results('direct', { legacy: { ping: sc('pass'), 'tools-list': sc('fail', ['x']) } });
    const got = compare(direct, results('gateway', {}), ex);
    assert.equal(got.code, 1);
    assert.deepEqual(
      got.verdicts.map((v) => v.verdict),
      ['regression', 'both fail'],
    );
  });

  it('compares each suite on its own', () => {
    const direct = results('direct', { legacy: { ping: sc('pass') }, '2025-11-25': { ping: sc('pass') } });
    const gateway = results('gateway', { legacy: { ping: sc('pass') }, '2025-11-25': { ping: sc('fail', ['p']) } });
    const got = compare(direct, gateway, ex);
    assert.deepEqual(got.verdicts, [
      { suite: 'legacy', scenario: 'ping', verdict: 'ok' },
      { suite: '2025-11-25', scenario: 'ping', verdict: 'regression' },
    ]);
    assert.match(got.text, /REGRESSIONS/);
  });
});

describe('tasks scenarios', () => {
  it('parseExtensionList picks the tasks-* [extension] server scenarios', () => {
    const out = [
      'Server scenarios (test against a server):',
      '  - server-initialize [2025-06-18,2025-11-25]',
      '  - tasks-lifecycle [extension]',
      '  - tasks-mrtr-input [extension]',
      '  - input-required-result-basic-elicitation [2026-07-28]',
      '  - auth-thing [extension]',
      '  - tasks-lifecycle [extension]',
      '',
    ].join('\n');
    assert.deepEqual(parseExtensionList(out), ['tasks-lifecycle', 'tasks-mrtr-input']);
  });

  it('readScenarioChecks reads the newest result folder of that scenario only', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'conformance-test-'));
    const write = (d, checks) => {
      fs.mkdirSync(path.join(dir, d), { recursive: true });
      if (checks) fs.writeFileSync(path.join(dir, d, 'checks.json'), JSON.stringify(checks));
    };
    write('server-tasks-lifecycle-2026-01-01T00-00-00-000Z', [{ id: 'old', status: 'FAILURE' }]);
    write('server-tasks-lifecycle-2026-01-02T00-00-00-000Z', [{ id: 'new', status: 'SUCCESS' }]);
    write('server-tasks-lifecycle-extra-2026-01-03T00-00-00-000Z', [{ id: 'other', status: 'SUCCESS' }]);
    write('server-tasks-mrtr-input-2026-01-01T00-00-00-000Z', null);
    assert.deepEqual(readScenarioChecks(dir, 'tasks-lifecycle'), [{ id: 'new', status: 'SUCCESS' }]);
    assert.equal(readScenarioChecks(dir, 'tasks-mrtr-input'), null);
    assert.equal(readScenarioChecks(dir, 'tasks-wire-fields'), null);
    assert.equal(readScenarioChecks(path.join(dir, 'missing'), 'tasks-lifecycle'), null);
  });

  const ex = (scenarios = {}, checks = {}) => ({ scenarios: new Map(Object.entries(scenarios)), checks: new Map(Object.entries(checks)) });
  const sc = (...checks) => ({ checks: checks.map(([id, status]) => ({ id, status, errorMessage: `${id} said ${status}` })) });
  const cases = [
    {
      name: 'success, warning, info and skipped pass',
      scenarios: { a: sc(['x', 'SUCCESS'], ['y', 'WARNING'], ['z', 'INFO'], ['s', 'SKIPPED']) },
      ex: ex(),
      code: 0,
      failures: 0,
    },
    { name: 'a failing check fails', scenarios: { a: sc(['x', 'SUCCESS'], ['y', 'FAILURE']) }, ex: ex(), code: 1, failures: 1 },
    { name: 'a check excluded by scenario:check passes', scenarios: { a: sc(['y', 'FAILURE']) }, ex: ex({}, { 'a:y': 'why' }), code: 0, failures: 0 },
    { name: 'a whole scenario excluded passes', scenarios: { a: sc(['y', 'FAILURE'], ['z', 'FAILURE']) }, ex: ex({ a: 'why' }), code: 0, failures: 0 },
    {
      name: 'excluding one check leaves another failing',
      scenarios: { a: sc(['y', 'FAILURE'], ['z', 'FAILURE']) },
      ex: ex({}, { 'a:y': 'why' }),
      code: 1,
      failures: 1,
    },
    {
      name: 'an exclusion of another scenario excuses nothing',
      scenarios: { a: sc(['y', 'FAILURE']) },
      ex: ex({}, { 'b:y': 'why' }),
      code: 1,
      failures: 1,
      stale: ['b:y'],
    },
    { name: 'a scenario without checks fails', scenarios: { a: { checks: null, reason: 'scenario crashed: boom' } }, ex: ex(), code: 1, failures: 1 },
  ];
  for (const tc of cases) {
    it(`judgeTasks: ${tc.name}`, () => {
      const j = judgeTasks(tc.scenarios, tc.ex);
      assert.equal(j.code, tc.code);
      assert.equal(j.failures.length, tc.failures, j.failures.join('\n'));
      assert.deepEqual(j.stale, tc.stale ?? []);
    });
  }

  it('judgeTasks reports the check and its message, and exclusions that excuse nothing', () => {
    const j = judgeTasks({ a: sc(['y', 'FAILURE']), b: { checks: null, reason: 'no checks.json (CLI exit 1)' } }, ex({ c: 'gone' }, { 'a:y': 'known' }));
    assert.deepEqual(j.failures, ['  b scenario-did-not-finish: no checks.json (CLI exit 1)']);
    assert.deepEqual(j.excused, ['  a y: y said FAILURE [excluded: known]']);
    assert.deepEqual(j.stale, ['c']);
  });

  it('tasks-exclusions.txt names only tasks scenarios the pinned CLI knows', () => {
    const x = loadExclusions(path.join(HERE, 'tasks-exclusions.txt'));
    const node = path.join(HERE, 'node_modules', 'node', 'bin', 'node');
    const r = spawnSync(node, [path.join(HERE, 'node_modules', 'conformance-next', 'dist', 'index.js'), 'list', '--server'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const known = new Set(parseExtensionList(r.stdout));
    assert.ok(known.size > 0);
    const unknown = [...x.scenarios.keys(), ...[...x.checks.keys()].map((k) => k.split(':')[0])].filter((n) => !known.has(n));
    assert.deepEqual(unknown, []);
  });
});
