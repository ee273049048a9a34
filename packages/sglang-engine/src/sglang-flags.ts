import { type ErrorCode, UisError } from '@uis/spec';
import {
  compareSGLangVersions,
  flagOf,
  SGLANG_VERSIONS,
  type SurfaceFlag,
  surfaceOf,
} from './sglang-surface.ts';

/** One flag uis puts on an engine's command line, and the config field that put it there. */
export interface PlannedFlag {
  flag: string;
  /** The value after the flag; absent for a switch. */
  value?: string;
  /** Config path of the field the flag comes from (what the user changes when the version refuses it). */
  from: string;
  /** Why that field adds the flag, when the path alone does not say. */
  why?: string;
}

/** Why `flag` cannot take `value` as argparse would parse it, or null. */
export function valueProblem(spec: SurfaceFlag, flag: string, value: string | undefined): string | null {
  const [min, max] = spec.arity;
  if (value === undefined) return min > 0 ? `${flag} takes a value` : null;
  if (max === 0) return `${flag} is a switch and takes no value`;
  if (spec.type === 'int' && !/^[-+]?\d+$/.test(value.trim()))
    return `${flag} takes an integer, not "${value}"`;
  if (spec.type === 'float' && (value.trim() === '' || !Number.isFinite(Number(value)))) {
    return `${flag} takes a number, not "${value}"`;
  }
  if (spec.choices !== undefined && !spec.choices.map(String).includes(value)) {
    return `${flag} takes one of ${spec.choices.map(String).join(', ')}, not "${value}"`;
  }
  return null;
}

/** Supported versions that have `flag`, oldest first: what the error suggests instead. */
export function versionsWithFlag(flag: string): string[] {
  return SGLANG_VERSIONS.filter((v) => {
    const s = surfaceOf(v);
    return s !== undefined && flagOf(s, flag) !== undefined;
  });
}

/** What is wrong with each flag for the SGLang `version` (a flag it does not have, or cannot take as given), each
 * naming the flag, the release and the config field; empty when every flag parses there. */
export function flagIssues(
  flags: readonly PlannedFlag[],
  version: string,
  versionPath: string,
): Array<{ code: ErrorCode; path: string; message: string }> {
  const surface = surfaceOf(version);
  if (surface === undefined) {
    return [
      {
        code: 'unsupported_sglang_version',
        path: versionPath,
        message: `uis has no surface for SGLang ${version}; supported: ${SGLANG_VERSIONS.join(', ')}`,
      },
    ];
  }
  const issues: Array<{ code: ErrorCode; path: string; message: string }> = [];
  for (const f of flags) {
    // The simulator's own knobs (server_args `sim_*`, e.g. a test's `sim_onload_ms`) stand in for GPU timing; no
    // SGLang release has a `--sim-` flag, and a real engine's argparse still refuses one at launch.
    if (f.flag.startsWith('--sim-')) continue;
    const spec = flagOf(surface, f.flag);
    const source = f.why === undefined ? f.from : `${f.from}: ${f.why}`;
    if (spec === undefined) {
      const having = versionsWithFlag(f.flag);
      issues.push({
        code: 'sglang_flag_unsupported',
        path: f.from,
        message:
          having.length === 0
            ? `SGLang ${version} has no ${f.flag} (from ${source}), nor has any supported release; change ${f.from}`
            : `SGLang ${version} has no ${f.flag} (from ${source}); releases that have it: ${summarize(having)}. Set sglang_version to one of them, or change ${f.from}`,
      });
      continue;
    }
    const problem = valueProblem(spec, f.flag, f.value);
    if (problem !== null) {
      issues.push({
        code: 'sglang_flag_unsupported',
        path: f.from,
        message: `SGLang ${version} refuses ${f.flag}${f.value === undefined ? '' : ` ${f.value}`} (from ${source}): ${problem}`,
      });
    }
  }
  return issues;
}

/** Refuses, before any engine starts, a flag the SGLang `version` does not have or cannot take as given (the
 * first of `flagIssues`). */
export function checkFlags(flags: readonly PlannedFlag[], version: string, versionPath: string): void {
  const first = flagIssues(flags, version, versionPath)[0];
  if (first !== undefined) throw new UisError(first);
}

function summarize(versions: readonly string[]): string {
  const sorted = [...versions].sort(compareSGLangVersions);
  return sorted.length > 3 ? `${sorted[0]} and later (${sorted.join(', ')})` : sorted.join(', ');
}

/** Extra argv a launcher appends (`--flag value`, `--flag=value`, `--switch`), as planned flags. The simulator's
 * own `--sim-*` knobs are not SGLang's and are left out. */
export function argvFlags(argv: readonly string[], from: string): PlannedFlag[] {
  const out: PlannedFlag[] = [];
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] as string;
    if (!token.startsWith('--')) continue;
    const eq = token.indexOf('=');
    const flag = eq === -1 ? token : token.slice(0, eq);
    let value: string | undefined = eq === -1 ? undefined : token.slice(eq + 1);
    const next = argv[i + 1];
    if (value === undefined && next !== undefined && !next.startsWith('--')) {
      value = next;
      i++;
    }
    if (flag.startsWith('--sim-')) continue;
    out.push(value === undefined ? { flag, from } : { flag, value, from });
  }
  return out;
}
