import type { PathIssue } from '@uis/spec';

/** Python argparse's rules for the long options Relax declares, so a command line that Relax accepts reads the
 * same here and one Relax rejects is rejected for the same reason:
 * - `store_true` switches take no value (`--colocate=true` is "ignored explicit argument"), BooleanOptionalAction
 *   switches also answer to `--no-<name>` (argparse.BooleanOptionalAction);
 * - an option takes `--name value` or `--name=value`; a token that starts with `-` is the next option unless it
 *   reads as a negative number; `nargs="+"` lists take every following value;
 * - `allow_abbrev`: an unambiguous prefix of an option string stands for it, an ambiguous one is an error that
 *   names every candidate; exact spellings always win;
 * - a repeated option keeps its last value.
 * Underscores are not dashes (argparse compares option strings as written). */

export type FlagKind = 'store_true' | 'boolean_optional' | 'value' | 'list';
export type FlagValue = string | boolean | string[];

export interface FlagTable {
  /** Canonical name (without `--`) -> how argparse reads it. */
  readonly flags: ReadonlyMap<string, FlagKind>;
  /** Name prefixes whose every member is a Relax flag passed through to SGLang (`sglang-`, `teacher-sglang-`):
   * the members are open-ended, so they are read as given and never abbreviated. */
  readonly families: readonly string[];
}

export interface TokenizeOptions {
  /** Relax's full parser knows training flags this table does not: skip unknown flags (parse_known_args). */
  allowUnknown: boolean;
}

export interface Tokenized {
  values: Map<string, FlagValue>;
  issues: PathIssue[];
}

/** argparse's `_negative_number_matcher`: such a token is a value, not an option. */
const NEGATIVE_NUMBER = /^-\d+$|^-\d*\.\d+$/;
const looksLikeOption = (token: string | undefined): boolean =>
  token?.startsWith('-') === true && token.length > 1 && !NEGATIVE_NUMBER.test(token);

type Resolved =
  | { kind: 'known'; name: string; flagKind: FlagKind; negated: boolean }
  | { kind: 'family'; name: string }
  | { kind: 'unknown' }
  | { kind: 'error'; issue: PathIssue };

/** Every option string argparse would register for the table: `--name`, plus `--no-name` for
 * BooleanOptionalAction. */
function optionStrings(table: FlagTable): Map<string, { name: string; negated: boolean }> {
  const out = new Map<string, { name: string; negated: boolean }>();
  for (const [name, kind] of table.flags) {
    out.set(`--${name}`, { name, negated: false });
    if (kind === 'boolean_optional') out.set(`--no-${name}`, { name, negated: true });
  }
  return out;
}

function resolve(
  option: string,
  strings: Map<string, { name: string; negated: boolean }>,
  table: FlagTable,
  options: TokenizeOptions,
): Resolved {
  const known = (hit: { name: string; negated: boolean }): Resolved => ({
    kind: 'known',
    name: hit.name,
    negated: hit.negated,
    flagKind: table.flags.get(hit.name) ?? 'value',
  });
  const exact = strings.get(option);
  if (exact) return known(exact);
  const bare = option.slice(2);
  const inFamily = table.families.some((f) => bare.startsWith(f));
  const candidates = [...strings.keys()].filter((s) => s.startsWith(option)).sort();
  if (candidates.length > 0) {
    const [only] = candidates;
    if (candidates.length === 1 && only !== undefined && !options.allowUnknown && !inFamily) {
      const hit = strings.get(only);
      if (hit) return known(hit);
    }
    if (candidates.length > 1) {
      return {
        kind: 'error',
        issue: {
          code: 'ambiguous_flag',
          path: option,
          message: `ambiguous option: ${option} could match ${candidates.join(', ')}; spell the flag out`,
        },
      };
    }
    // One candidate, but the parser that will finally read this command line knows flags we do not (training
    // flags, every SGLang server field): it may expand the prefix differently or refuse it as ambiguous.
    return {
      kind: 'error',
      issue: {
        code: 'abbreviated_flag',
        path: option,
        message: `${option} abbreviates ${only}, but ${inFamily ? 'SGLang fields' : 'flags this adapter does not know'} may share the prefix; spell out ${only}`,
      },
    };
  }
  if (inFamily && table.families.every((f) => bare !== f)) return { kind: 'family', name: bare };
  return { kind: 'unknown' };
}

/** Reads a Relax argv (without the program name) the way argparse does; every problem is an issue with the
 * flag it concerns as its path. */
export function tokenize(argv: readonly string[], table: FlagTable, options: TokenizeOptions): Tokenized {
  const values = new Map<string, FlagValue>();
  const issues: PathIssue[] = [];
  const strings = optionStrings(table);
  const takeValues = (from: number): string[] => {
    const out: string[] = [];
    for (let j = from; j < argv.length && !looksLikeOption(argv[j]); j++) out.push(argv[j] ?? '');
    return out;
  };
  let i = 0;
  while (i < argv.length) {
    const token = argv[i] ?? '';
    i++;
    if (!looksLikeOption(token) || token === '--' || !token.startsWith('--')) {
      if (options.allowUnknown && looksLikeOption(token) && token !== '--') {
        i += takeValues(i).length;
        continue;
      }
      if (options.allowUnknown && !looksLikeOption(token)) continue;
      issues.push({
        code: 'unexpected_argument',
        path: token,
        message: `unrecognized argument "${token}"; Relax flags look like --name value`,
      });
      continue;
    }
    const eq = token.indexOf('=');
    const option = eq === -1 ? token : token.slice(0, eq);
    const inline = eq === -1 ? undefined : token.slice(eq + 1);
    const hit = resolve(option, strings, table, options);
    if (hit.kind === 'error') {
      issues.push(hit.issue);
      if (inline === undefined) i += takeValues(i).length;
      continue;
    }
    if (hit.kind === 'unknown') {
      if (!options.allowUnknown) {
        issues.push({
          code: 'unknown_flag',
          path: option,
          message: `unknown Relax flag ${option}; check the spelling`,
        });
      }
      if (inline === undefined) i += takeValues(i).length;
      continue;
    }
    if (hit.kind === 'family') {
      // SGLang fields: a value if one follows, else a switch (`--sglang-enable-dp-attention`).
      const next = inline ?? takeValues(i)[0];
      if (inline === undefined && next !== undefined) i++;
      values.set(hit.name, next ?? true);
      continue;
    }
    const display = `--${hit.negated ? 'no-' : ''}${hit.name}`;
    if (hit.flagKind === 'store_true' || hit.flagKind === 'boolean_optional') {
      if (inline !== undefined) {
        issues.push({
          code: 'unexpected_value',
          path: display,
          message: `${display}: ignored explicit argument '${inline}'; the switch takes no value${hit.flagKind === 'boolean_optional' ? ` (use --no-${hit.name} to turn it off)` : ''}`,
        });
        continue;
      }
      values.set(hit.name, !hit.negated);
      continue;
    }
    if (hit.flagKind === 'list') {
      const list = inline !== undefined ? [inline] : takeValues(i);
      if (inline === undefined) i += list.length;
      if (list.length === 0) {
        issues.push({
          code: 'missing_value',
          path: display,
          message: `${display}: expected at least one argument`,
        });
        continue;
      }
      values.set(hit.name, list);
      continue;
    }
    const value = inline ?? takeValues(i)[0];
    if (value === undefined) {
      issues.push({ code: 'missing_value', path: display, message: `${display}: expected one argument` });
      continue;
    }
    if (inline === undefined) i++;
    values.set(hit.name, value);
  }
  return { values, issues };
}
