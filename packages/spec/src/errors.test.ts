import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { errorIssues, parseOrThrow, UisError } from './errors.ts';

describe('errorIssues', () => {
  it('lists the path issues a UisError carries', () => {
    let caught: unknown;
    try {
      parseOrThrow(z.object({ a: z.number(), b: z.string() }), { a: 'x' }, 'body');
    } catch (e) {
      caught = e;
    }
    expect(errorIssues(caught).map((i) => i.path)).toEqual(['body.a', 'body.b']);
  });

  it('is the error itself when it has no issues, at its path or the root given', () => {
    expect(errorIssues(new UisError({ code: 'usage', message: 'm', path: 'p' }))).toEqual([
      { code: 'usage', path: 'p', message: 'm' },
    ]);
    expect(
      errorIssues(new UisError({ code: 'invalid_input', message: 'm', details: [{ x: 1 }] }), '(input)'),
    ).toEqual([{ code: 'invalid_input', path: '(input)', message: 'm' }]);
  });

  it('is an internal_error for anything that is not a UisError', () => {
    expect(errorIssues(new Error('boom'))).toEqual([
      { code: 'internal_error', path: '(root)', message: 'boom' },
    ]);
    expect(errorIssues('odd', '(input)')).toEqual([
      { code: 'internal_error', path: '(input)', message: 'odd' },
    ]);
  });
});
