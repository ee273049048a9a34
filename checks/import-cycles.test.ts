import { describe, expect, it } from 'vitest';
import { importCycles, importGraph } from './import-cycles.ts';
import { type ModuleRef, moduleSpecifiers } from './imports.ts';
import { productSources, read } from './repo.ts';

const refsOf = (file: string): ModuleRef[] => moduleSpecifiers(read(file), file.endsWith('x'));

describe('import cycles in product code (apps/*/src, packages/*/src)', () => {
  const files = productSources();
  const graph = importGraph(files, refsOf);

  // Type-only imports count: a cycle of types is still two files that cannot be read, tested or split one without
  // the other, and it turns into a runtime cycle the day one of its imports brings a value.
  it('has none (each cycle is printed as its files in import order)', () => {
    const cycles = importCycles(graph).map((c) => c.join('\n  -> '));
    expect(cycles, 'break each cycle: move what both files need into a third, or pass it in').toEqual([]);
  });

  it('reads the whole product source (the scan itself works)', () => {
    expect(graph.size).toBe(files.length);
    expect(graph.size).toBeGreaterThan(200);
    const edges = [...graph.values()].reduce((n, to) => n + to.length, 0);
    expect(edges).toBeGreaterThan(500);
    // The façade of the manager imports its parts (a resolved relative import, `.ts` extension).
    expect(graph.get('packages/manager/src/inference-manager.ts')).toContain(
      'packages/manager/src/replicas/health.ts',
    );
  });
});

describe('the cycle finder', () => {
  /** Cycles of a made-up tree: file -> what it imports (`type:` marks a type-only import). */
  const cyclesOf = (tree: Record<string, string[]>) =>
    importCycles(
      importGraph(Object.keys(tree), (f) =>
        (tree[f] ?? []).map((s) => ({ specifier: s.replace(/^type:/, ''), typeOnly: s.startsWith('type:') })),
      ),
    );

  it('finds a cycle through type-only imports, `.js` specifiers, extensionless ones and folder indexes', () => {
    const tree = {
      'p/src/a.ts': ['./b.js', 'zod', 'node:fs'],
      'p/src/b.ts': ['type:./c'],
      'p/src/c.ts': ['./d'],
      'p/src/d/index.ts': ['type:../a.ts'],
      'p/src/e.ts': ['./a.ts'],
    };
    expect(cyclesOf(tree)).toEqual([
      ['p/src/a.ts', 'p/src/b.ts', 'p/src/c.ts', 'p/src/d/index.ts', 'p/src/a.ts'],
    ]);
  });

  it('shows the shortest cycle of a tangle, one per tangle, a file importing itself too', () => {
    const tree = {
      'x/a.ts': ['./b.ts', './c.ts'],
      'x/b.ts': ['./c.ts'],
      'x/c.ts': ['./a.ts'],
      'y/self.tsx': ['./self'],
      'y/free.ts': ['../x/a.ts'],
    };
    expect(cyclesOf(tree)).toEqual([
      ['x/a.ts', 'x/c.ts', 'x/a.ts'],
      ['y/self.tsx', 'y/self.tsx'],
    ]);
  });

  it('finds nothing in a graph without cycles (a diamond)', () => {
    const tree = { 'a.ts': ['./b.ts', './c.ts'], 'b.ts': ['./d.ts'], 'c.ts': ['./d.ts'], 'd.ts': [] };
    expect(cyclesOf(tree)).toEqual([]);
  });
});
