// A module is imported by one statement per file: `import { type A, b } from 'm'`, not a type-only import beside a
// value import of the same module. Two statements for one module split what a reader looks for in one place, and
// the formatter sorts imports but does not merge them.
import { describe, expect, it } from 'vitest';
import { read, tracked } from './repo.ts';

/** `import [type] { ... } from 'm';`, named imports only (namespace and default imports are one name each). */
const NAMED_IMPORT = /^import (?:type )?\{[^}]*\} from '([^']+)';$/gm;

export function modulesImportedTwice(source: string): string[] {
  const counts = new Map<string, number>();
  for (const m of source.matchAll(NAMED_IMPORT)) counts.set(m[1]!, (counts.get(m[1]!) ?? 0) + 1);
  return [...counts].filter(([, n]) => n > 1).map(([mod]) => mod);
}

describe('one import statement per module', () => {
  it('finds a type-only import beside a value import of the same module', () => {
    const src =
      "import type { A } from '@uis/spec';\nimport {\n  b,\n  c,\n} from '@uis/spec';\nimport { d } from 'x';\n";
    expect(modulesImportedTwice(src)).toEqual(['@uis/spec']);
    expect(modulesImportedTwice("import { type A, b } from '@uis/spec';\n")).toEqual([]);
  });

  it('holds in every TypeScript file', () => {
    const found = tracked()
      .filter((f) => /\.tsx?$/.test(f) && !f.startsWith('checks/one-import'))
      .flatMap((f) => modulesImportedTwice(read(f)).map((mod) => `${f}: ${mod}`));
    expect(found).toEqual([]);
  });
});
