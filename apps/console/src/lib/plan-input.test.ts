import { describe, expect, it } from 'vitest';
import { looksLikeFlags, planFromText, shellSplit } from './plan-input.ts';

describe('plan input', () => {
  it('splits shell command lines with quotes and continuations', () => {
    expect(
      shellSplit(`python x.py \\\n --resource '{"a": [1, 8]}' --name "a b" --esc \\"q\\" c\\ d`),
    ).toEqual(['python', 'x.py', '--resource', '{"a": [1, 8]}', '--name', 'a b', '--esc', '"q"', 'c d']);
  });

  it('tells flags from YAML', () => {
    expect(looksLikeFlags('--colocate --resource {}')).toBe(true);
    expect(looksLikeFlags('# comment\npython train.py \\\n  --colocate')).toBe(true);
    expect(looksLikeFlags('cluster:\n  nodes: []')).toBe(false);
    expect(looksLikeFlags('{"cluster": {}}')).toBe(false);
  });

  it('returns the adapter errors as violations', () => {
    const r = planFromText('--colocate');
    expect(r.kind).toBe('violations');
    if (r.kind === 'violations') {
      expect(r.source).toBe('relax-flags');
      expect(r.violations.some((v) => v.message.includes('--resource'))).toBe(true);
    }
  });

  it('reports YAML syntax errors with their line', () => {
    const r = planFromText('cluster: [unclosed');
    expect(r.kind).toBe('violations');
    if (r.kind === 'violations') expect(r.violations[0]!.path).toMatch(/^line \d+/);
  });

  it('is empty for blank input', () => {
    expect(planFromText('  \n ')).toEqual({ kind: 'empty' });
  });
});
