import { flagOf, type Surface, type SurfaceFlag } from './sglang-surface.ts';

/** SGLang's command line parsed as its argparse parser would (CPython 3.11 `argparse`: `--flag value`,
 * `--flag=value`, unique prefixes of long options, arity, int/float types, choices), against one release's
 * surface. The simulator refuses what the real server would refuse with the same message and exit code 2. */
export interface ArgparseResult {
  /** `error: ...` text argparse prints after the usage line, or null when the argv parses. */
  error: string | null;
  /** Option strings that matched, in order (a prefix resolved to its full name). */
  matched: string[];
}

export const ARGPARSE_EXIT_CODE = 2;

const NEGATIVE_NUMBER = /^-\d+$|^-\d*\.\d+$/;

function allNames(surface: Surface): string[] {
  return Object.values(surface.flags).flatMap((f) => f.names);
}

/** The option an argv word names: exact, or a unique prefix (argparse's allow_abbrev). */
function resolve(
  surface: Surface,
  word: string,
): { name: string; spec: SurfaceFlag } | { error: string } | null {
  const exact = flagOf(surface, word);
  if (exact !== undefined) return { name: word, spec: exact };
  if (!word.startsWith('--')) return null;
  const candidates = allNames(surface).filter((n) => n.startsWith(word));
  if (candidates.length === 1) {
    const name = candidates[0] as string;
    return { name, spec: flagOf(surface, name) as SurfaceFlag };
  }
  if (candidates.length > 1) {
    return { error: `ambiguous option: ${word} could match ${candidates.join(', ')}` };
  }
  return null;
}

function typeError(spec: SurfaceFlag, value: string): string | null {
  if (spec.type === 'int' && !/^\s*[-+]?\d+\s*$/.test(value)) {
    return `argument ${spec.names.join('/')}: invalid int value: '${value}'`;
  }
  if (spec.type === 'float' && (value.trim() === '' || Number.isNaN(Number(value)))) {
    return `argument ${spec.names.join('/')}: invalid float value: '${value}'`;
  }
  if (spec.choices !== undefined) {
    const ok = spec.choices.some((c) => String(c) === value);
    if (!ok) {
      const list = spec.choices.map((c) => (typeof c === 'string' ? `'${c}'` : String(c))).join(', ');
      return `argument ${spec.names.join('/')}: invalid choice: '${value}' (choose from ${list})`;
    }
  }
  return null;
}

function isOptionLike(word: string): boolean {
  return word.startsWith('-') && word !== '-' && !NEGATIVE_NUMBER.test(word);
}

/** Parses `argv` (the words after `launch_server`) against `surface`. `required`: also refuse a missing required
 * option (`--model-path`), as the real parser does. */
export function parseLikeArgparse(
  surface: Surface,
  argv: readonly string[],
  required = true,
): ArgparseResult {
  const matched: string[] = [];
  const unrecognized: string[] = [];
  const seen = new Set<SurfaceFlag>();
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i] as string;
    if (!isOptionLike(word)) {
      unrecognized.push(word);
      continue;
    }
    const eq = word.indexOf('=');
    const head = word.startsWith('--') && eq !== -1 ? word.slice(0, eq) : word;
    const inline = head === word ? undefined : word.slice(eq + 1);
    const found = resolve(surface, head);
    if (found === null) {
      unrecognized.push(word);
      continue;
    }
    if ('error' in found) return { error: found.error, matched };
    const { name, spec } = found;
    matched.push(name);
    seen.add(spec);
    const [min, max] = spec.arity;
    if (inline !== undefined) {
      if (max === 0)
        return { error: `argument ${spec.names.join('/')}: ignored explicit argument '${inline}'`, matched };
      const bad = typeError(spec, inline);
      if (bad !== null) return { error: bad, matched };
      continue;
    }
    const values: string[] = [];
    while (
      (max === null || values.length < max) &&
      i + 1 < argv.length &&
      !isOptionLike(argv[i + 1] as string)
    ) {
      values.push(argv[++i] as string);
    }
    if (values.length < min) {
      const want = min === 1 && max === 1 ? 'expected one argument' : `expected at least ${min} argument(s)`;
      return { error: `argument ${spec.names.join('/')}: ${want}`, matched };
    }
    for (const v of values) {
      const bad = typeError(spec, v);
      if (bad !== null) return { error: bad, matched };
    }
  }
  if (required) {
    const missing = Object.values(surface.flags).filter((f) => f.required === true && !seen.has(f));
    if (missing.length > 0) {
      return {
        error: `the following arguments are required: ${missing.map((f) => f.names.join('/')).join(', ')}`,
        matched,
      };
    }
  }
  if (unrecognized.length > 0) return { error: `unrecognized arguments: ${unrecognized.join(' ')}`, matched };
  return { error: null, matched };
}
