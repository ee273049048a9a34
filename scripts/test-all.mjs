#!/usr/bin/env node
// Runs every test runner of the workspace (vitest projects, then the Playwright e2e suite when present) and ends
// with one line `N passed, N failed, N skipped` summed over all of them. Exit code 1 if anything failed.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const reports = join(root, 'node_modules', '.cache', 'uis-test');
rmSync(reports, { recursive: true, force: true });
mkdirSync(reports, { recursive: true });
const extra = process.argv.slice(2);

const totals = { passed: 0, failed: 0, skipped: 0 };
let broken = false;

function run(name, cmd, args, env = {}) {
  console.log(`\n=== ${name}: ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
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

if (broken) totals.failed += 1;
console.log(`\n${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
process.exit(totals.failed > 0 ? 1 : 0);
