#!/usr/bin/env node
// Runs every test runner of the workspace (vitest projects, the Playwright e2e suite when present, then the Python
// client's strict type check and pytest, and the SGLang surface extractor's pytest) and ends with one line `N passed, N failed, N skipped` summed over all of them. Exit code 1 if anything failed.
// With UIS_TEST_TOTALS=FILE (CI, .ci/run) it writes the totals there as JSON instead, for the caller's one last line.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const reports = join(root, 'node_modules', '.cache', 'uis-test');
rmSync(reports, { recursive: true, force: true });
mkdirSync(reports, { recursive: true });
const extra = process.argv.slice(2);

const totals = { passed: 0, failed: 0, skipped: 0 };
let broken = false;

function run(name, cmd, args, env = {}, cwd = root) {
  console.log(`\n=== ${name}: ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { cwd, stdio: 'inherit', env: { ...process.env, ...env } });
  return r.status ?? 1;
}

/** Runs vitest with a JSON report and adds its counts to the totals. */
function vitest(name, args) {
  const json = join(reports, `${name}.json`);
  const status = run(name, 'npx', [
    'vitest',
    'run',
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${json}`,
    ...args,
  ]);
  if (!existsSync(json)) {
    broken = true;
    return;
  }
  const r = JSON.parse(readFileSync(json, 'utf8'));
  totals.passed += r.numPassedTests ?? 0;
  totals.failed += r.numFailedTests ?? 0;
  totals.skipped += (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
  // A file that failed to load has no tests but is a failure all the same.
  const failedSuites = (r.testResults ?? []).filter(
    (s) => s.status === 'failed' && (s.assertionResults ?? []).length === 0,
  );
  totals.failed += failedSuites.length;
  if (status !== 0 && r.numFailedTests === 0 && failedSuites.length === 0) broken = true;
}

// Unit and integration tests of every package, from source.
vitest('vitest', extra);

// The packages as another repo installs them (build, pack, publint, attw, npm install, plain-Node consumer):
// minutes, so only in a full run.
if (extra.length === 0) vitest('packaging', ['--config', 'packaging/vitest.config.ts']);

// Playwright e2e (the console against `uis demo`), when the e2e package exists and no filter was given.
if (extra.length === 0 && existsSync(join(root, 'e2e', 'playwright.config.ts'))) {
  const pwJson = join(reports, 'playwright.json');
  const pStatus = run('playwright', 'npx', ['playwright', 'test', '-c', 'e2e/playwright.config.ts'], {
    PLAYWRIGHT_JSON_OUTPUT_NAME: pwJson,
  });
  if (existsSync(pwJson)) {
    const r = JSON.parse(readFileSync(pwJson, 'utf8'));
    totals.passed += (r.stats?.expected ?? 0) + (r.stats?.flaky ?? 0);
    totals.failed += r.stats?.unexpected ?? 0;
    totals.skipped += r.stats?.skipped ?? 0;
    if (pStatus !== 0 && !r.stats?.unexpected) broken = true;
  } else if (pStatus !== 0) {
    broken = true;
  }
}

// The Python client (clients/python): mypy --strict as one check, then pytest against a real `uis demo` (the test
// session starts and stops it). Needs `pip install ./clients/python` and its test deps (.ci/system-deps does it).
if (extra.length === 0) runPython();

function runPython() {
  const dir = join(root, 'clients', 'python');
  const python = process.env.PYTHON ?? 'python3';
  // The checkout's source first: an older uis-client installed in site-packages must not stand in for it.
  const env = {
    ...process.env,
    PYTHONPATH: [join(dir, 'src'), process.env.PYTHONPATH].filter(Boolean).join(':'),
  };
  const probe = spawnSync(python, ['-c', 'import uis_client, pytest, mypy'], {
    cwd: dir,
    encoding: 'utf8',
    env,
  });
  if (probe.status !== 0) {
    console.log(
      `\n=== python: cannot import uis_client, pytest and mypy with ${python} (${(probe.stderr ?? '').trim().split('\n').pop()}); run .ci/system-deps or pip install ./clients/python pytest mypy; counted as 1 failed`,
    );
    totals.failed += 1;
    return;
  }
  // Its cache goes with the other caches in node_modules: tests leave the working tree as they found it.
  const mypy = spawnSync(
    python,
    ['-m', 'mypy', '--cache-dir', join(root, 'node_modules', '.cache', 'mypy')],
    {
      cwd: dir,
      stdio: 'inherit',
      env,
    },
  );
  console.log(
    `\n=== mypy --strict (clients/python, examples/python): ${mypy.status === 0 ? 'passed' : 'failed'}`,
  );
  if (mypy.status === 0) totals.passed += 1;
  else totals.failed += 1;
  pytest('pytest', python, dir, { PYTHONPATH: env.PYTHONPATH });
}

/** The SGLang surface extractor's tests (scripts/sglang-surface, on a fixture source tree; standard library only). */
if (extra.length === 0) {
  pytest('pytest sglang-surface', process.env.PYTHON ?? 'python3', join(root, 'scripts', 'sglang-surface'));
}

/** Runs pytest in `dir` with a JUnit report and adds its counts to the totals. */
function pytest(name, python, dir, env = {}) {
  const junit = join(reports, `${name.replaceAll(' ', '-')}.xml`);
  const status = run(
    name,
    python,
    ['-m', 'pytest', '-p', 'no:cacheprovider', `--junitxml=${junit}`],
    env,
    dir,
  );
  if (status === 5) {
    // pytest's exit 5: no test was collected. This suite is never empty, so that is a failure, not a pass.
    console.log('=== pytest collected no tests (exit 5); counted as 1 failed');
    totals.failed += 1;
    return;
  }
  if (!existsSync(junit)) {
    totals.failed += 1;
    return;
  }
  const xml = readFileSync(junit, 'utf8');
  const suite = /<testsuite\b([^>]*)>/.exec(xml)?.[1] ?? '';
  const attr = (key) => Number(new RegExp(`\\b${key}="(\\d+)"`).exec(suite)?.[1] ?? 0);
  const failed = attr('failures') + attr('errors');
  totals.passed += attr('tests') - failed - attr('skipped');
  totals.failed += failed;
  totals.skipped += attr('skipped');
  if (status !== 0 && failed === 0) broken = true;
}

if (broken) totals.failed += 1;
const summary = `${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`;
if (process.env.UIS_TEST_TOTALS) {
  writeFileSync(process.env.UIS_TEST_TOTALS, JSON.stringify(totals));
  console.log(`\n=== test runners: ${summary} (the caller adds its own checks to the last line)`);
} else {
  console.log(`\n${summary}`);
}
process.exit(totals.failed > 0 ? 1 : 0);
