// Time in tests goes through the clock: time-based behaviour is tested with the injected clock (ManualClock), and a
// test that waits for a real process waits on a condition (`waitFor`), never for a guessed time. A sleep in a test
// either makes it slow or, on a loaded machine, wrong. This fails on a sleep in test code unless it is listed below
// with its reason.
import { describe, expect, it } from 'vitest';
import { isTestCode, read, tracked } from './repo.ts';

/** What counts as a sleep, by language. The injected clock's `clock.sleep(...)` and an engine's `engine.sleep()`
 * (SGLang's memory release) are member calls and do not count. */
const TS_SLEEPS: Array<[string, RegExp]> = [
  // `new Promise((r) => setTimeout(r, ms))`, however the resolver is named.
  ['a promise resolved by a timer', /=>\s*\{?\s*setTimeout\(\s*[\w$]+\s*[,)]/],
  ['a timer promise (timers/promises)', /from\s+['"](?:node:)?timers\/promises['"]/],
  ['a sleep or delay helper', /(?<![\w.$#])(?:sleep|delay)\s*\(/],
  ["Playwright's fixed wait", /\.waitForTimeout\s*\(/],
];
const PY_SLEEPS: Array<[string, RegExp]> = [
  ['time.sleep / asyncio.sleep', /\b(?:time|asyncio)\.sleep\s*\(/],
  ['a sleep helper', /(?<![\w.])sleep\s*\(/],
];

/** The sleeps that stay, each with why no clock or condition can stand in for it. `line`: a piece of the line. */
const LISTED: Array<{ file: string; line: string; reason: string }> = [
  {
    file: 'packages/sglang-sim/src/control.test.ts',
    line: 'setTimeout(res, 150)',
    reason:
      'asserts that a paused engine makes no progress: an absence of steps over real time (the simulator schedules on real timers, not on the injected clock)',
  },
  {
    file: 'clients/python/tests/conditions.py',
    line: 'time.sleep(0.02)',
    reason:
      'the poll step of wait_until, the Python twin of waitFor: it waits on a condition in the uis process (a rid the gateway holds, tokens a stream delivered), never for a guessed time',
  },
];

/** Test code in every language: TypeScript tests and helpers (`*.test.ts`, `testing/`), Playwright specs, Python tests. */
export function testFiles(): string[] {
  return tracked().filter(
    (f) =>
      f !== 'checks/test-sleeps.test.ts' &&
      (isTestCode(f) ||
        /\.spec\.[cm]?[jt]sx?$/.test(f) ||
        /(^|\/)tests\/.*\.py$|(^|\/)conftest\.py$/.test(f)),
  );
}

export interface Sleep {
  file: string;
  line: number;
  text: string;
  what: string;
}

/** Every sleep in `text` (the contents of `file`). */
export function sleepsIn(file: string, text: string): Sleep[] {
  const patterns = file.endsWith('.py') ? PY_SLEEPS : TS_SLEEPS;
  return text.split('\n').flatMap((raw, i) => {
    const code = file.endsWith('.py') ? raw.replace(/#.*$/, '') : raw.replace(/^\s*(\/\/|\*|\/\*).*$/, '');
    const hit = patterns.find(([, re]) => re.test(code));
    return hit ? [{ file, line: i + 1, text: raw.trim(), what: hit[0] }] : [];
  });
}

const listed = (s: Sleep) => LISTED.some((l) => l.file === s.file && s.text.includes(l.line));

describe('time in tests goes through the clock', () => {
  const files = testFiles();
  const sleeps = files.flatMap((f) => sleepsIn(f, read(f)));

  it('has no sleep in a test but the listed ones (use ManualClock, or waitFor on a condition)', () => {
    const unlisted = sleeps.filter((s) => !listed(s)).map((s) => `${s.file}:${s.line} ${s.what}: ${s.text}`);
    expect(
      unlisted,
      'replace with the injected clock or a condition wait, or list it with its reason',
    ).toEqual([]);
  });

  it('lists no sleep that is gone, and gives each a reason', () => {
    const stale = LISTED.filter((l) => !sleeps.some((s) => s.file === l.file && s.text.includes(l.line)));
    expect(stale.map((l) => `${l.file}: ${l.line}`)).toEqual([]);
    expect(LISTED.filter((l) => l.reason.length < 20)).toEqual([]);
  });

  it('scans the tests of every language (the scan itself works)', () => {
    expect(files.filter((f) => f.endsWith('.test.ts')).length).toBeGreaterThan(100);
    expect(files.some((f) => f.startsWith('e2e/tests/') && f.endsWith('.spec.ts'))).toBe(true);
    expect(files.some((f) => f.startsWith('clients/python/tests/') && f.endsWith('.py'))).toBe(true);
    expect(files.some((f) => /\/testing(\/|\.ts$)/.test(f))).toBe(true);
  });
});

describe('what counts as a sleep', () => {
  it.each([
    ['a.test.ts', 'await new Promise((r) => setTimeout(r, 50));'],
    ['a.test.ts', 'await new Promise((resolve) => setTimeout(resolve, 5));'],
    ['a.test.ts', 'await new Promise<void>((wake) => { setTimeout(wake, 5); });'],
    ['a.test.ts', "import { setTimeout as wait } from 'node:timers/promises';"],
    ['a.test.ts', 'await sleep(100);'],
    ['a.test.ts', 'await delay(20);'],
    ['e2e/tests/a.spec.ts', 'await page.waitForTimeout(500);'],
    ['tests/test_a.py', '    time.sleep(0.5)'],
    ['tests/test_a.py', '    await asyncio.sleep(1)'],
    ['tests/test_a.py', '    sleep(1)'],
  ])('finds it in %s: %s', (file, line) => {
    expect(sleepsIn(file, `x\n${line}\n`)).toMatchObject([{ line: 2 }]);
  });

  it.each([
    ['a.test.ts', 'await clock.sleep(1000);'],
    ['a.test.ts', 'await engine.sleep();'],
    ['a.test.ts', "const timer = setTimeout(() => reject(new Error('no exit')), 30_000);"],
    ['a.test.ts', 'const timer = setTimeout(done, timeout); // a fake server answering a long poll'],
    ['a.test.ts', '// a fixed sleep(50) raced the request'],
    ['a.test.ts', "await waitFor(() => done, 10_000, 'done');"],
    ['tests/test_a.py', '    watcher.wait_for(lambda s: s.ready, timeout=60)  # no time.sleep( here'],
  ])('does not count %s: %s', (file, line) => {
    expect(sleepsIn(file, line)).toEqual([]);
  });
});
