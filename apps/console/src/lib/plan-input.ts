import { fromRelaxArgs, planPlacement } from '@uis/planner';
import { errorIssues, loadConfig, type PlacementPlan, type PlanViolation, type UisConfig } from '@uis/spec';

/** The Plan page's pipeline, in the browser: pasted text (YAML/JSON config, or a Relax command line) -> config
 * -> placement plan, or every violation with its code and path. Pure; no server round trip. */

export type PlanSource = 'config' | 'relax-flags';

export type PlanInputResult =
  | { kind: 'empty' }
  | { kind: 'plan'; source: PlanSource; config: UisConfig; plan: PlacementPlan }
  | { kind: 'violations'; source: PlanSource; violations: PlanViolation[] };

/** Splits a shell command line the way a POSIX shell would for plain words, quotes and line continuations
 * (enough for pasted `python train.py --flag '{"json": 1}' \` commands; no expansion). */
export function shellSplit(text: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '\\' && text[i + 1] === '\n') {
      i += 2;
      continue;
    }
    if (c === "'") {
      const end = text.indexOf("'", i + 1);
      const stop = end < 0 ? text.length : end;
      word += text.slice(i + 1, stop);
      inWord = true;
      i = stop + 1;
      continue;
    }
    if (c === '"') {
      i++;
      while (i < text.length && text[i] !== '"') {
        if (text[i] === '\\' && i + 1 < text.length && '"\\$`'.includes(text[i + 1]!)) i++;
        word += text[i];
        i++;
      }
      inWord = true;
      i++;
      continue;
    }
    if (c === '\\' && i + 1 < text.length) {
      word += text[i + 1];
      inWord = true;
      i += 2;
      continue;
    }
    if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
      i++;
      continue;
    }
    word += c;
    inWord = true;
    i++;
  }
  if (inWord) words.push(word);
  return words;
}

/** Relax flags when the first meaningful line is a command line (`--flag ...`, or `python x.py --flag ...`). */
export function looksLikeFlags(text: string): boolean {
  const first = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l !== '' && !l.startsWith('#'));
  if (first === undefined) return false;
  if (first.startsWith('--')) return true;
  return /^[\w./-]+(\s+[\w./-]+)*\s+--[a-z]/.test(first) && !/^[\w-]+\s*:/.test(first);
}

export function planFromText(text: string): PlanInputResult {
  if (text.trim() === '') return { kind: 'empty' };
  const source: PlanSource = looksLikeFlags(text) ? 'relax-flags' : 'config';
  let config: UisConfig;
  try {
    if (source === 'relax-flags') {
      const words = shellSplit(text.replace(/^\s*#.*$/gm, ''));
      const firstFlag = words.findIndex((w) => w.startsWith('--'));
      // Pasted command lines carry training flags too; the adapter ignores those it does not know.
      config = fromRelaxArgs(words.slice(Math.max(0, firstFlag)), { allowUnknown: true });
    } else {
      config = loadConfig(text, 'pasted config');
    }
  } catch (e) {
    return { kind: 'violations', source, violations: errorIssues(e) };
  }
  const result = planPlacement(config);
  if (!result.ok) return { kind: 'violations', source, violations: result.errors };
  return { kind: 'plan', source, config, plan: result.plan };
}
