// The packages as another repo gets them: build, `pnpm pack` every publishable package, lint the tarballs
// (publint, arethetypeswrong), install them with npm into a scratch project outside the workspace (real copies,
// no links), then use them from plain Node and type-check a consumer against the packed `.d.ts`.
import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const here = join(import.meta.dirname, 'consumer');

interface Packed {
  name: string;
  dir: string;
  tarball: string;
}

/** Workspace packages that are not `private`: the ones another repo can install. */
function publishable(): Array<{ name: string; dir: string }> {
  return ['packages', 'apps'].flatMap((parent) =>
    readdirSync(join(root, parent))
      .map((d) => join(root, parent, d))
      .filter((dir) => existsSync(join(dir, 'package.json')))
      .map((dir) => ({ dir, pkg: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) }))
      .filter(({ pkg }) => pkg.private !== true)
      .map(({ dir, pkg }) => ({ name: pkg.name as string, dir })),
  );
}

/** Runs a command to completion; a failure throws with its output, so the failing step names itself. */
function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): string {
  const r: SpawnSyncReturns<string> = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout: 300_000 });
  if (r.status !== 0) {
    throw new Error(
      `${cmd} ${args.join(' ')} (in ${cwd}) exited ${r.status ?? r.signal}:\n${r.stdout}\n${r.stderr}`,
    );
  }
  return r.stdout;
}

/** The environment of a plain Node process: no loader or condition inherited from the test runner. */
function plainEnv(): NodeJS.ProcessEnv {
  const { NODE_OPTIONS: _options, VITEST: _vitest, ...rest } = process.env;
  return rest;
}

const targets = publishable();
const work = mkdtempSync(join(tmpdir(), 'uis-consumer-'));
const tarballs = join(work, 'tarballs');
const project = join(work, 'project');
const packed: Packed[] = [];

const tarballOf = (name: string) => packed.find((p) => p.name === name)!.tarball;

beforeAll(() => {
  run(
    'pnpm',
    [
      'exec',
      'turbo',
      'run',
      'build',
      '--output-logs=errors-only',
      ...targets.map((t) => `--filter=${t.name}`),
    ],
    root,
  );
  mkdirSync(tarballs);
  for (const t of targets) {
    const out = run('pnpm', ['pack', '--pack-destination', tarballs], t.dir).trim().split('\n');
    packed.push({ ...t, tarball: out[out.length - 1]! });
  }
  mkdirSync(project);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'uis-consumer', private: true, type: 'module' }),
  );
  for (const f of ['consumer.mjs', 'consumer.ts', 'tsconfig.json'])
    copyFileSync(join(here, f), join(project, f));
  copyFileSync(join(root, 'examples', 'demo.yaml'), join(project, 'demo.yaml'));
  const typesNode = JSON.parse(
    readFileSync(join(root, 'node_modules', '@types', 'node', 'package.json'), 'utf8'),
  );
  // --ignore-scripts: nothing here opens SQLite, so better-sqlite3's native build (minutes on 2 cores) is skipped.
  run(
    'npm',
    [
      'install',
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
      '--loglevel=error',
      ...packed.map((p) => p.tarball),
      `@types/node@${typesNode.version}`,
    ],
    project,
  );
});

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

describe('packed packages', () => {
  it('every publishable package was packed, control plane and gateway included', () => {
    const names = packed.map((p) => p.name);
    for (const n of ['@uis/spec', '@uis/planner', '@uis/routing', '@uis/sglang-engine', '@uis/sglang-sim']) {
      expect(names).toContain(n);
    }
    expect(names).toContain('@uis/manager');
    expect(names).toContain('@uis/control-plane');
    expect(names).toContain('@uis/gateway');
  });

  it('manifests carry real versions and point only at built files', () => {
    for (const p of packed) {
      const manifest = run('tar', ['-xOzf', p.tarball, 'package/package.json'], work);
      expect(manifest, p.name).not.toMatch(/"(workspace|catalog):/);
      const pkg = JSON.parse(manifest);
      expect(JSON.stringify(pkg.exports), p.name).not.toMatch(/\.\/src\//);
      expect(pkg.license, p.name).toBeTruthy();
      expect(pkg.repository?.url, p.name).toBeTruthy();
      const files = run('tar', ['-tzf', p.tarball], work).split('\n');
      expect(
        files.filter((f) => f.startsWith('package/src/')),
        p.name,
      ).toEqual([]);
    }
  });

  it.for(targets.map((t) => t.name))(
    'publint reports nothing for %s, not even a suggestion',
    async (name) => {
      const tarball = readFileSync(tarballOf(name));
      const { messages, pkg } = await publint({
        pack: { tarball: tarball.buffer.slice(tarball.byteOffset, tarball.byteOffset + tarball.byteLength) },
        level: 'suggestion',
      });
      expect(messages.map((m) => `${m.type}: ${formatMessage(m, pkg)}`)).toEqual([]);
    },
  );

  it.for(targets.map((t) => t.name))('arethetypeswrong finds no problem in %s (ESM-only profile)', (name) => {
    const attw = join(root, 'node_modules', '.bin', 'attw');
    const r = spawnSync(attw, [tarballOf(name), '--profile', 'esm-only', '--format', 'ascii', '--no-color'], {
      encoding: 'utf8',
    });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
  });
});

describe('a consumer project with the tarballs installed by npm', () => {
  it('has real copies, not links into the workspace', () => {
    const spec = join(project, 'node_modules', '@uis', 'spec');
    expect(existsSync(join(spec, 'dist', 'index.mjs'))).toBe(true);
    expect(existsSync(join(spec, 'src'))).toBe(false);
  });

  it('plans the demo, routes a snapshot and generates on a simulated engine, in plain Node', () => {
    const out = run(process.execPath, ['consumer.mjs', 'demo.yaml'], project, plainEnv());
    const result = JSON.parse(out.trim().split('\n').at(-1)!);
    expect(result.mode).toBe('colocated_defer');
    expect(result.placements).toBeGreaterThan(0);
    expect(result.engineId).toBe('policy/0');
    expect(result.url).toBe(result.simUrl);
    expect(result.completionTokens).toBeGreaterThan(0);
  });

  it('type-checks a consumer against the packed .d.ts with tsc', () => {
    const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    const r = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: project, encoding: 'utf8' });
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });

  it('runs the installed compiled uis CLI: --version and plan', () => {
    const uis = join(project, 'node_modules', '.bin', 'uis');
    const version = JSON.parse(readFileSync(join(root, 'apps', 'gateway', 'package.json'), 'utf8')).version;
    expect(run(uis, ['--version'], project, plainEnv()).trim()).toBe(version);
    const plan = run(uis, ['plan', '--config', 'demo.yaml', '--json'], project, plainEnv());
    expect(JSON.parse(plan).ok).toBe(true);
  });
});
