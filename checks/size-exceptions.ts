import { read } from './repo.ts';

/** One exception the README's architecture section names: a file over 500 lines, or one function of a file over
 * 120 lines (`fn` is its name), with the reason. */
export interface SizeException {
  file: string;
  fn: string | null;
  why: string;
}

const SECTION = /^## Architecture\n([\s\S]*?)(?=^## )/m;
const TABLE_TITLE = '### Size exceptions';

/** The rows of the README's size-exception table: `| \`file\` | \`function\` or "whole file" | why |`. */
export function readmeExceptions(readme = read('README.md')): SizeException[] {
  const section = SECTION.exec(readme)?.[1];
  if (section === undefined) throw new Error('README.md has no "## Architecture" section');
  const at = section.indexOf(TABLE_TITLE);
  if (at < 0) throw new Error(`README.md's architecture section has no "${TABLE_TITLE}" table`);
  const rows = section
    .slice(at)
    .split('\n')
    .filter((l) => l.startsWith('|'))
    .slice(2);
  return rows.map((row) => {
    const cells = row
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    const [file, fn, why] = cells;
    const code = (c: string | undefined) => /^`([^`]+)`$/.exec(c ?? '')?.[1];
    const path = code(file);
    if (path === undefined || why === undefined || why === '')
      throw new Error(
        `README size exception row is not | \`file\` | \`function\` or whole file | why |: ${row}`,
      );
    return { file: path, fn: fn === 'whole file' ? null : (code(fn) ?? fn ?? null), why };
  });
}
