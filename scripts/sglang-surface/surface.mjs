#!/usr/bin/env node
// `pnpm sglang:surface <version>...`: downloads each SGLang wheel from the package index (`pip download --no-deps`,
// the sglang wheel alone: never sglang-kernel or torch), reads it with extract_surface.py (Python `ast`, no import of
// sglang) and writes packages/sglang-engine/surfaces/<version>.json, then the README release table (sglang:table).
//
//   pnpm sglang:surface 0.5.10.post1        regenerate one surface
//   pnpm sglang:surface --all               regenerate every committed surface
//   pnpm sglang:surface --check [version]   drift check: regenerate the newest committed surface (or <version>) in a
//                                           temp dir and exit 1 with a diff when it differs from the committed file;
//                                           exit 3 when the package index cannot be reached (nothing was checked)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const here = import.meta.dirname;
const surfaceDir = join(here, '..', '..', 'packages', 'sglang-engine', 'surfaces');
const python = process.env.PYTHON ?? 'python3';

/** Committed surface versions, oldest first (numeric compare of each dotted part, `postN` after the release). */
function surfaceVersions() {
  const key = (v) => v.split(/[.]/).map((p) => (/^\d+$/.test(p) ? p.padStart(6, '0') : p));
  return readdirSync(surfaceDir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.slice(0, -'.json'.length))
    .sort((a, b) => (key(a).join('.') < key(b).join('.') ? -1 : 1));
}

function fail(message, code = 2) {
  process.stderr.write(`sglang:surface: ${message}\n`);
  process.exit(code);
}

/** pip's words for a package index it cannot reach (its retry warnings), as opposed to a version it lacks. */
const UNREACHABLE =
  /NewConnectionError|Temporary failure in name resolution|Name or service not known|Network is unreachable|ConnectTimeout|Read timed out|ProxyError|SSLError/;

/** Exit code of a check that could not run because the package index is unreachable (CI counts it skipped). */
const EXIT_UNREACHABLE = 3;

/** Downloads sglang==version into a temp dir and returns the surface JSON text. */
function surfaceOf(version) {
  if (!/^[0-9][0-9A-Za-z.+-]*$/.test(version)) fail(`"${version}" is not a version (e.g. 0.5.10.post1)`);
  const dir = mkdtempSync(join(tmpdir(), 'sglang-wheel-'));
  try {
    const pip = spawnSync(
      python,
      ['-m', 'pip', 'download', '--no-deps', '--only-binary=:all:', '-q', '-d', dir, `sglang==${version}`],
      { encoding: 'utf8' },
    );
    if (pip.status !== 0) {
      const said = pip.stderr || pip.stdout;
      const network = said.split('\n').find((l) => UNREACHABLE.test(l));
      if (network !== undefined) {
        fail(`cannot reach the package index for sglang==${version}: ${network.trim()}`, EXIT_UNREACHABLE);
      }
      fail(`pip download sglang==${version} failed:\n${said}`);
    }
    const wheel = readdirSync(dir).find((f) => f.endsWith('.whl'));
    if (wheel === undefined) fail(`pip download sglang==${version} gave no wheel`);
    const out = spawnSync(python, [join(here, 'extract_surface.py'), join(dir, wheel)], {
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
    if (out.status !== 0) fail(`extract_surface.py failed on ${wheel}:\n${out.stderr}`);
    const surface = JSON.parse(out.stdout);
    if (surface.sglang_version !== version) {
      fail(`the wheel of ${version} says it is ${surface.sglang_version}`);
    }
    return out.stdout;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The first differing lines of two texts, for a readable CI failure. */
function diffLines(committed, fresh) {
  const a = committed.split('\n');
  const b = fresh.split('\n');
  const setA = new Set(a);
  const setB = new Set(b);
  const out = [];
  for (const line of a) if (!setB.has(line)) out.push(`- ${line}`);
  for (const line of b) if (!setA.has(line)) out.push(`+ ${line}`);
  return out;
}

function check(version) {
  const file = join(surfaceDir, `${version}.json`);
  const committed = readFileSync(file, 'utf8');
  const fresh = surfaceOf(version);
  if (fresh === committed) {
    console.log(`sglang:surface: ${version} matches the package index (${file})`);
    return;
  }
  const diff = diffLines(committed, fresh);
  console.log(
    `sglang:surface: DRIFT: ${version} read from the package index differs from the committed ${file} ` +
      `(${diff.length} changed lines; run pnpm sglang:surface ${version} and review):`,
  );
  for (const line of diff.slice(0, 60)) console.log(`  ${line}`);
  if (diff.length > 60) console.log(`  ... ${diff.length - 60} more`);
  process.exit(1);
}

const args = process.argv.slice(2);
if (args.length === 0) fail('give a version (e.g. 0.5.10.post1), --all or --check [version]');
if (args[0] === '--check') {
  const versions = surfaceVersions();
  check(args[1] ?? versions[versions.length - 1]);
} else {
  const versions = args[0] === '--all' ? surfaceVersions() : args;
  for (const version of versions) {
    const file = join(surfaceDir, `${version}.json`);
    writeFileSync(file, surfaceOf(version));
    console.log(`sglang:surface: wrote ${file}`);
  }
  // The README table follows the surfaces (the engine package's test fails when it does not).
  const table = spawnSync('pnpm', ['-s', 'sglang:table'], { stdio: 'inherit', cwd: join(here, '..', '..') });
  if (table.status !== 0) fail('pnpm sglang:table failed');
}
