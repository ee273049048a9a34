import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The repository's root (this directory's parent). */
export const REPO = join(import.meta.dirname, '..');

/** Tracked files under `paths` (relative to the repository root). */
export function tracked(...paths: string[]): string[] {
  const out = execFileSync('git', ['ls-files', '-z', '--', ...paths], { cwd: REPO, encoding: 'utf8' });
  return out.split('\0').filter((f) => f !== '');
}

/** Test code: test files, fixtures, test helpers (`testing.ts`, `testing/`, exported as `<pkg>/testing`). */
export function isTestCode(file: string): boolean {
  return /\.test\.[cm]?[jt]sx?$|\.fixture\.[cm]?[jt]sx?$|(^|\/)testing(\.[cm]?[jt]sx?$|\/)/.test(file);
}

/** Product source: the TypeScript under apps/STAR/src and packages/STAR/src, tests, test helpers, declaration files
 * and generated files (`*.gen.ts`) aside. */
export function productSources(): string[] {
  return tracked('apps', 'packages').filter(
    (f) =>
      /^(apps|packages)\/[^/]+\/src\//.test(f) &&
      /\.tsx?$/.test(f) &&
      !f.endsWith('.d.ts') &&
      !/\.gen\.tsx?$/.test(f) &&
      !isTestCode(f),
  );
}

export function read(file: string): string {
  return readFileSync(join(REPO, file), 'utf8');
}

/** Lines of a file as an editor counts them (a final newline ends the last line, it does not start one). */
export function lineCount(text: string): number {
  if (text === '') return 0;
  const n = text.split('\n').length;
  return text.endsWith('\n') ? n - 1 : n;
}
