import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { functionSpans, nameAt } from './function-spans.ts';
import { lineCount, productSources, read } from './repo.ts';
import { readmeExceptions } from './size-exceptions.ts';

const MAX_FUNCTION_LINES = 120;
const MAX_FILE_LINES = 500;

const files = productSources();
const spans = functionSpans(files, undefined, read);
const exceptions = readmeExceptions();

describe('product source sizes (README, "Size exceptions")', () => {
  it('has no function over 120 lines but the exceptions the README names', () => {
    const long = spans.filter((s) => s.lines > MAX_FUNCTION_LINES);
    const unexcused = long
      .filter((s) => !exceptions.some((e) => e.file === s.file && e.fn === s.name))
      .map((s) => `${s.file}:${s.line} ${s.name} (${s.lines} lines)`);
    expect(unexcused, 'split these, or name each in the README with the reason').toEqual([]);
  });

  it('names no function exception that is not over 120 lines any more', () => {
    const stale = exceptions
      .filter((e) => e.fn !== null)
      .filter((e) => !spans.some((s) => s.file === e.file && s.name === e.fn && s.lines > MAX_FUNCTION_LINES))
      .map((e) => `${e.file} ${e.fn}`);
    expect(stale, 'remove these rows from the README').toEqual([]);
  });

  it('has no file over 500 lines but the exceptions the README names, and names no file that is not', () => {
    const long = files.filter((f) => lineCount(read(f)) > MAX_FILE_LINES);
    const named = exceptions.filter((e) => e.fn === null).map((e) => e.file);
    expect(long.filter((f) => !named.includes(f))).toEqual([]);
    expect(named.filter((f) => !long.includes(f))).toEqual([]);
  });

  it('scans the whole product source (the scan itself works)', () => {
    expect(files.length).toBeGreaterThan(200);
    expect(files.some((f) => f.endsWith('.test.ts') || f.includes('/testing'))).toBe(false);
    expect(new Set(spans.map((s) => s.file)).size).toBeGreaterThan(150);
    expect(spans.length).toBeGreaterThan(1000);
  });
});

describe('the function measure', () => {
  const dir = mkdtempSync(join(tmpdir(), 'uis-sizes-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('counts every line of a function, comments and blank lines too, in every kind of function', () => {
    const body = (n: number, indent: string) =>
      Array.from({ length: n }, (_, i) =>
        i % 3 === 0 ? '' : i % 3 === 1 ? `${indent}// why ${i}` : `${indent}x += ${i};`,
      ).join('\n');
    // 120 lines: the first and last line and 118 between; 121 lines: one more.
    const src = [
      'export function atLimit(): number {',
      '  let x = 0;',
      body(116, '  '),
      '  return x;',
      '}',
      'export class C {',
      '  overLimit(): number {',
      '    let x = 0;',
      body(117, '    '),
      '    return x;',
      '  }',
      '}',
      'export const arrow = async (): Promise<number> => {',
      '  let x = 0;',
      body(117, '  '),
      '  return x;',
      '};',
      '',
    ].join('\n');
    writeFileSync(join(dir, 'sample.ts'), src);
    const found = functionSpans(['sample.ts'], dir, (f) => readFileSync(join(dir, f), 'utf8'));
    expect(found.map((s) => [s.name, s.lines])).toEqual([
      ['atLimit', 120],
      ['overLimit', 121],
      ['arrow', 121],
    ]);
  });

  it.each([
    ['export function foo(a: number) {', 8, 'foo'],
    ['export async function genrmCall<M>(', 8, 'genrmCall'],
    ['  constructor(opts: X) {', 3, 'constructor'],
    ['  private async run(id: string) {', 3, 'run'],
    ['  async #transition(end: AuditEvent): void {', 3, '#transition'],
    ['  const worker = async () => {', 18, 'worker'],
    ['    onClick: (e) => {', 14, 'onClick'],
    ['  readonly handler: Handler = (req, res) => {', 31, 'handler'],
    ['  const f = function () {', 13, 'f'],
    ["  app.get('/x', (c) => {", 17, '(anonymous)'],
  ])('names the function at %j column %i %j', (line, column, name) => {
    expect(nameAt(line, column)).toBe(name);
  });
});
