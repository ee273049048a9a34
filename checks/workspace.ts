import { existsSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join } from 'node:path';
import { moduleSpecifiers } from './imports.ts';
import { isTestCode, REPO, read, tracked } from './repo.ts';

export interface PackageJson {
  name: string;
  exports?: Record<string, unknown> | string;
  private?: boolean;
  files?: string[];
  bin?: string | Record<string, string>;
  scripts?: Record<string, string>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

/** One import of a workspace package's file: the specifier as written, and whether the file ships (product). */
export interface Import {
  file: string;
  specifier: string;
  /** Only types come from it (`import type`): erased from what runs. */
  typeOnly: boolean;
  runtime: boolean;
}

export interface WorkspacePackage {
  dir: string;
  json: PackageJson;
  imports: Import[];
}

const CODE = /\.(?:[cm]?[jt]sx?)$/;

/** The workspace's packages (pnpm-workspace.yaml's `packages`: a directory or `parent/*`). */
export function workspacePackages(): WorkspacePackage[] {
  const yaml = read('pnpm-workspace.yaml');
  const block = /^packages:\n((?:\s+- .+\n)+)/m.exec(yaml)?.[1] ?? '';
  const globs = [...block.matchAll(/- (\S+)/g)].map((m) => m[1] as string);
  const dirs = globs.flatMap((g) =>
    g.endsWith('/*')
      ? [...new Set(tracked(g.slice(0, -2)).map((f) => f.split('/').slice(0, 2).join('/')))]
      : [g],
  );
  const all = dirs.filter((d) => existsSync(join(REPO, d, 'package.json')));
  return all.map((dir) => {
    // A nested package's files are its own.
    const nested = all.filter((d) => d !== dir && d.startsWith(`${dir}/`));
    const files = tracked(dir).filter((f) => CODE.test(f) && !nested.some((n) => f.startsWith(`${n}/`)));
    const json = JSON.parse(read(`${dir}/package.json`)) as PackageJson;
    const imports = files.flatMap((file) =>
      moduleSpecifiers(read(file), /x$/.test(file)).map((ref) => ({
        file,
        ...ref,
        runtime: isShipped(json, file.slice(dir.length + 1)),
      })),
    );
    return { dir, json, imports };
  });
}

/** A file (relative to its package) that runs where the package is used: its source (`src/`, compiled into
 * `dist`) and the other files its `files` publishes (a CLI's `bin/`), test code aside. */
export function isShipped(json: PackageJson, rel: string): boolean {
  if (isTestCode(rel)) return false;
  if (rel.startsWith('src/')) return true;
  return (json.files ?? []).some((f) => f !== 'dist' && (rel === f || rel.startsWith(`${f}/`)));
}

/** The package a bare specifier names (`@scope/name` or `name`), or undefined for relative paths, node built-ins
 * and subpath imports (`#x`). */
export function packageOf(specifier: string): string | undefined {
  if (/^[./#]/.test(specifier) || specifier.startsWith('node:') || isBuiltin(specifier)) return undefined;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}
