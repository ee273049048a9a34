import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { moduleSpecifiers } from './imports.ts';
import { REPO } from './repo.ts';
import { type PackageJson, packageOf, type WorkspacePackage, workspacePackages } from './workspace.ts';

/** The layers, top to bottom: shipped code imports only packages of a lower layer (README, "Architecture"). */
const LAYERS: ReadonlyArray<readonly string[]> = [
  ['@uis/e2e', '@uis/packaging', '@uis/checks'],
  ['@uis/gateway', '@uis/console'],
  ['@uis/control-plane'],
  ['@uis/manager'],
  ['@uis/sglang-sim'],
  ['@uis/planner', '@uis/sglang-engine', '@uis/routing'],
  ['@uis/spec'],
];

/** Declared dependencies no file imports, each with why it is declared all the same. */
const USED_WITHOUT_IMPORT: Record<string, Record<string, string>> = {
  '@uis/console': {
    'happy-dom': "vitest's DOM environment, named in vitest.config.ts (`environment: 'happy-dom'`)",
  },
  '@uis/packaging': {
    '@arethetypeswrong/cli': 'its `attw` program checks the packed tarballs',
    dockerfilelint: 'its program lints the Dockerfile',
    typescript: 'its `tsc` type-checks the consumer project against the packed `.d.ts`',
  },
};

/** Shipped imports satisfied by a dev dependency, each with why that is right. */
const SHIPPED_FROM_DEV: Record<string, Record<string, string>> = {
  '@uis/sglang-sim': {
    tsx: 'bin/sglang-sim.mjs loads it only when the TypeScript source is there (in the repo); the published package runs dist/',
  },
  '@uis/gateway': {
    tsx: 'bin/uis.mjs loads it only when the compiled CLI is missing in a checkout (a failed build on install); the published package runs dist/',
  },
};

/** Packages whose build inlines the @uis packages they depend on (tsdown `noExternal`): each dependency an inlined
 * package's shipped code imports is theirs to declare (it stays an import of the bundle, installed beside it). */
const INLINES_WORKSPACE: Record<string, string> = {
  '@uis/gateway':
    'the `uis` CLI build (tsdown.config.ts) inlines the @uis packages, so the compiled CLI runs in the repo',
};

/** A consumer project the packaging test installs the packed tarballs into: its imports are not packaging's. */
const NOT_THE_PACKAGES_OWN = ['packaging/consumer/'];

const packages = workspacePackages().map((p) => ({
  ...p,
  imports: p.imports.filter((i) => !NOT_THE_PACKAGES_OWN.some((d) => i.file.startsWith(d))),
}));
const names = new Set(packages.map((p) => p.json.name));

const declared = (j: PackageJson, ...kinds: Array<'dependencies' | 'peerDependencies' | 'devDependencies'>) =>
  new Set(kinds.flatMap((k) => Object.keys(j[k] ?? {})));

/** The package.json of `dep` as installed for the package in `dir`. */
function installed(dir: string, dep: string): PackageJson | undefined {
  const file = join(REPO, dir, 'node_modules', dep, 'package.json');
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as PackageJson) : undefined;
}

/** Why a declared, unimported dependency is there, or undefined when nothing explains it. */
function reasonFor(p: WorkspacePackage, dep: string, imported: ReadonlySet<string>): string | undefined {
  const listed = USED_WITHOUT_IMPORT[p.json.name]?.[dep];
  if (listed !== undefined) return listed;
  if (dep.startsWith('@types/')) {
    const typed = dep.slice('@types/'.length).replace(/^(.+)__(.+)$/, '@$1/$2');
    if (typed === 'node' || imported.has(typed)) return `the types of ${typed}`;
  }
  const bins = installed(p.dir, dep)?.bin;
  const programs = typeof bins === 'string' ? [dep.replace(/^@[^/]+\//, '')] : Object.keys(bins ?? {});
  const script = Object.values(p.json.scripts ?? {}).find((s) =>
    programs.some((b) => new RegExp(`(^|[\\s&|;])${b}\\b`).test(s)),
  );
  if (script !== undefined) return `its program runs in a script: ${script}`;
  const inlined = INLINES_WORKSPACE[p.json.name];
  if (inlined !== undefined) {
    const by = workspaceDepsOf(p.json.name).find((w) => shippedImports(w).has(dep));
    if (by !== undefined) return `${inlined}; ${by} imports it`;
  }
  // A peer dependency of another declared dependency: the depender provides it (one copy shared with the rest).
  for (const other of declared(p.json, 'dependencies', 'devDependencies'))
    if (other !== dep && Object.hasOwn(installed(p.dir, other)?.peerDependencies ?? {}, dep))
      return `a peer dependency of ${other}`;
  return undefined;
}

function bare(p: WorkspacePackage, filter: (i: WorkspacePackage['imports'][number]) => boolean): Set<string> {
  return new Set(
    p.imports
      .filter(filter)
      .map((i) => packageOf(i.specifier))
      .filter((n): n is string => n !== undefined && n !== p.json.name),
  );
}

describe.each(packages.map((p) => [p.json.name, p] as const))('%s package.json', (_name, p) => {
  const all = bare(p, () => true);
  const shipped = bare(p, (i) => i.runtime && !i.typeOnly);

  it('declares every package its files import (shipped code: as a dependency or peer)', () => {
    const anyKind = declared(p.json, 'dependencies', 'peerDependencies', 'devDependencies');
    const runtimeKind = declared(p.json, 'dependencies', 'peerDependencies');
    expect([...all].filter((n) => !anyKind.has(n))).toEqual([]);
    const fromDev = SHIPPED_FROM_DEV[p.json.name] ?? {};
    expect([...shipped].filter((n) => !runtimeKind.has(n) && !Object.hasOwn(fromDev, n))).toEqual([]);
  });

  it('imports every dependency it declares (dependencies from shipped code), or says why not', () => {
    const unused = [...declared(p.json, 'dependencies', 'peerDependencies')]
      .filter((d) => !shipped.has(d) && !bare(p, (i) => i.runtime).has(d))
      .filter((d) => reasonFor(p, d, all) === undefined);
    expect(unused, 'move test-only ones to devDependencies, drop the rest').toEqual([]);
    const unusedDev = [...declared(p.json, 'devDependencies')]
      .filter((d) => !all.has(d))
      .filter((d) => reasonFor(p, d, all) === undefined);
    expect(unusedDev).toEqual([]);
  });

  it('imports workspace packages only of a lower layer (tests: any that does not import it back), through their exports', () => {
    const rank = (n: string) => LAYERS.findIndex((l) => l.includes(n));
    expect(rank(p.json.name), `${p.json.name} is in no layer`).toBeGreaterThanOrEqual(0);
    const ours = p.imports.filter((i) => {
      const n = packageOf(i.specifier) ?? '';
      return names.has(n) && n !== p.json.name;
    });
    const upward = ours
      .filter((i) => i.runtime && rank(packageOf(i.specifier) as string) <= rank(p.json.name))
      .map((i) => `${i.file}: ${i.specifier}`);
    expect(upward).toEqual([]);
    const cyclic = ours
      .filter((i) => importsBack(packageOf(i.specifier) as string, p.json.name))
      .map((i) => `${i.file}: ${i.specifier}`);
    expect(cyclic).toEqual([]);
    const notExported = ours.filter((i) => !exported(i.specifier)).map((i) => `${i.file}: ${i.specifier}`);
    expect(notExported).toEqual([]);
    const testEntry = ours.filter((i) => i.runtime && /\/testing$/.test(i.specifier)).map((i) => i.file);
    expect(testEntry, 'test helpers are for tests').toEqual([]);
  });

  it('reaches no other package by a relative path', () => {
    const others = packages.filter((o) => o !== p).map((o) => `${o.dir}/`);
    const reaching = p.imports
      .filter((i) => i.specifier.startsWith('.'))
      .map((i) => ({ i, target: normalize(join(dirname(i.file), i.specifier)) }))
      .filter(({ target }) => others.some((d) => target.startsWith(d)))
      .map(({ i }) => `${i.file}: ${i.specifier}`);
    expect(reaching).toEqual([]);
  });
});

/** The workspace packages `name` depends on at run time, transitively. */
function workspaceDepsOf(name: string, seen = new Set<string>()): string[] {
  const pkg = packages.find((p) => p.json.name === name);
  for (const d of declared(pkg?.json ?? { name }, 'dependencies', 'peerDependencies'))
    if (names.has(d) && !seen.has(d)) {
      seen.add(d);
      workspaceDepsOf(d, seen);
    }
  return [...seen];
}

/** The packages a workspace package's shipped code imports. */
function shippedImports(name: string): Set<string> {
  const pkg = packages.find((p) => p.json.name === name);
  return pkg === undefined ? new Set() : bare(pkg, (i) => i.runtime && !i.typeOnly);
}

/** Whether `from` (or a package it declares, transitively) declares `to`. */
function importsBack(from: string, to: string, seen = new Set<string>()): boolean {
  if (seen.has(from)) return false;
  seen.add(from);
  const pkg = packages.find((p) => p.json.name === from);
  if (pkg === undefined) return false;
  const deps = [...declared(pkg.json, 'dependencies', 'peerDependencies', 'devDependencies')].filter((d) =>
    names.has(d),
  );
  return deps.includes(to) || deps.some((d) => importsBack(d, to, seen));
}

/** Whether a workspace specifier (`@uis/x` or `@uis/x/sub`) is an entry of that package's `exports`. */
function exported(specifier: string): boolean {
  const name = packageOf(specifier) as string;
  const sub = `.${specifier.slice(name.length)}`;
  const json = packages.find((p) => p.json.name === name)?.json;
  const exports = json?.exports;
  return typeof exports === 'string' ? sub === '.' : Object.hasOwn(exports ?? {}, sub);
}

describe('the lists of reasons', () => {
  const byName = new Map(packages.map((p) => [p.json.name, p]));
  it('name only dependencies that are declared and not imported', () => {
    const stale = Object.entries(USED_WITHOUT_IMPORT).flatMap(([name, deps]) => {
      const p = byName.get(name);
      return Object.keys(deps).filter(
        (d) =>
          p === undefined ||
          !declared(p.json, 'dependencies', 'devDependencies').has(d) ||
          bare(p, () => true).has(d),
      );
    });
    expect(stale).toEqual([]);
  });

  it('name only dev dependencies that shipped code imports', () => {
    const stale = Object.entries(SHIPPED_FROM_DEV).flatMap(([name, deps]) => {
      const p = byName.get(name);
      return Object.keys(deps).filter(
        (d) =>
          p === undefined || !declared(p.json, 'devDependencies').has(d) || !bare(p, (i) => i.runtime).has(d),
      );
    });
    expect(stale).toEqual([]);
  });
});

describe('the import scanner', () => {
  it('reads every way a file names a module, and nothing in comments or strings', () => {
    const src = [
      "import x from 'a';",
      'import type { Y } from "b";',
      "import {\n  c1,\n  c2,\n} from 'c';",
      "import 'd';",
      "export { e } from 'e';",
      "export type * from 'f';",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a template literal, scanned as code
      "const t = `${g} // import('no1') ${`in ${h}`} from 'no2'`;",
      "const r = /['\"]/g; // import('no3')",
      "/* from 'no4' */ const lazy = () => import('i');",
      "const j = require('j'); const s = \"from 'no5'\";",
      "const k = createRequire(import.meta.url).resolve('k/package.json');",
      "const l = import.meta.resolve('l'); obj.require('no6'); const m = a / b / c;",
    ].join('\n');
    expect(moduleSpecifiers(src, false)).toEqual([
      { specifier: 'a', typeOnly: false },
      { specifier: 'b', typeOnly: true },
      { specifier: 'c', typeOnly: false },
      { specifier: 'd', typeOnly: false },
      { specifier: 'e', typeOnly: false },
      { specifier: 'f', typeOnly: true },
      { specifier: 'i', typeOnly: false },
      { specifier: 'j', typeOnly: false },
      { specifier: 'k/package.json', typeOnly: false },
      { specifier: 'l', typeOnly: false },
    ]);
  });

  it('finds the imports of the whole workspace', () => {
    expect(packages.length).toBeGreaterThanOrEqual(12);
    expect(packages.reduce((n, p) => n + p.imports.length, 0)).toBeGreaterThan(1000);
  });
});
