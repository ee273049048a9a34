import { dirname, join, normalize } from 'node:path';
import type { ModuleRef } from './imports.ts';

/** Files a file imports, as repository paths: its relative specifiers resolved against the set of known files
 * (`./x.ts`, `./x.js` for `x.ts`, `./x` for `x.ts`/`x.tsx`, a folder for its `index.ts`). Package names are left
 * out: imports between packages follow the layers (package-deps.test.ts), which cannot form a cycle. */
export function importGraph(
  files: readonly string[],
  refsOf: (file: string) => readonly ModuleRef[],
): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets = new Set<string>();
    for (const ref of refsOf(file)) {
      if (!ref.specifier.startsWith('.')) continue;
      const target = resolveRelative(file, ref.specifier, known);
      if (target !== undefined) targets.add(target);
    }
    graph.set(file, [...targets].sort());
  }
  return graph;
}

function resolveRelative(from: string, specifier: string, known: ReadonlySet<string>): string | undefined {
  const base = normalize(join(dirname(from), specifier));
  const stem = base.replace(/\.(?:[cm]?js|jsx)$/, '');
  const candidates = [
    base,
    `${stem}.ts`,
    `${stem}.tsx`,
    `${base}.ts`,
    `${base}.tsx`,
    `${base}/index.ts`,
    `${base}/index.tsx`,
  ];
  return candidates.find((c) => known.has(c));
}

/**
 * The import cycles of a graph: one per strongly connected component of more than one file (or a file that
 * imports itself), as the shortest cycle through the component's first file, in import order and ending where it
 * starts (`a -> b -> a`). Every file of a component lies on some cycle; breaking the one shown and running again
 * shows the next, until none is left.
 */
export function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  return components(graph)
    .filter((c) => c.length > 1 || (graph.get(c[0] as string) ?? []).includes(c[0] as string))
    .map((c) => shortestCycle(graph, c))
    .sort((a, b) => (a[0] as string).localeCompare(b[0] as string));
}

/** Strongly connected components (Tarjan), each sorted; iterative so deep import chains cannot overflow. */
export function components(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  let next = 0;
  for (const root of graph.keys()) {
    if (index.has(root)) continue;
    const work: Array<{ node: string; edge: number }> = [{ node: root, edge: 0 }];
    index.set(root, next);
    low.set(root, next++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const top = work[work.length - 1] as { node: string; edge: number };
      const edges = graph.get(top.node) ?? [];
      if (top.edge < edges.length) {
        const to = edges[top.edge++] as string;
        if (!index.has(to)) {
          index.set(to, next);
          low.set(to, next++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, edge: 0 });
        } else if (onStack.has(to))
          low.set(top.node, Math.min(low.get(top.node) as number, index.get(to) as number));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.node, Math.min(low.get(parent.node) as number, low.get(top.node) as number));
      if (low.get(top.node) === index.get(top.node)) {
        const component: string[] = [];
        for (;;) {
          const n = stack.pop() as string;
          onStack.delete(n);
          component.push(n);
          if (n === top.node) break;
        }
        out.push(component.sort());
      }
    }
  }
  return out;
}

/** The shortest path from the component's first file back to itself, staying inside the component (BFS). */
function shortestCycle(
  graph: ReadonlyMap<string, readonly string[]>,
  component: readonly string[],
): string[] {
  const inside = new Set(component);
  const start = component[0] as string;
  const from = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const node = queue[i] as string;
    for (const to of graph.get(node) ?? []) {
      if (!inside.has(to)) continue;
      if (to === start) {
        const path = [start];
        for (let n = node; n !== start; n = from.get(n) as string) path.splice(1, 0, n);
        return [...path, start];
      }
      if (!from.has(to)) {
        from.set(to, node);
        queue.push(to);
      }
    }
  }
  return [start, start];
}
