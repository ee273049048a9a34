import { describe, expect, it } from 'vitest';
import { boxedScore, judgementScore, lastNumberScore, verdictScore } from './score-parsers.ts';

describe('score parsers', () => {
  it.each([
    ['Judgement: 1', 1],
    ['reasoning 1 2 3 ... Judgement: 0', 0],
    ['  1 correct', 1],
    ['no digit here', 0],
    ['Judgement: the answer is wrong, 1', 0],
  ])('judgement %j -> %d', (text, score) => expect(judgementScore(text)).toBe(score));

  it.each([
    ['score 3 then 7.5', 7.5],
    ['-2', -2],
    ['1e2 points', 100],
    ['none', null],
  ])('last number %j -> %j', (text, score) => expect(lastNumberScore(text)).toBe(score));

  it.each([
    ['the answer is \\boxed{0.25}.', 0.25],
    ['\\boxed{1} then \\boxed{ 4 }', 4],
    ['\\boxed{x+1}', null],
    ['\\boxed{3', null],
    ['no box 5', null],
  ])('boxed %j -> %j', (text, score) => expect(boxedScore(text)).toBe(score));

  it.each([
    ['yes the answer is no', 0],
    ['No. Actually, Correct', 1],
    ['notably yesterday', null],
  ])('verdict %j -> %j', (text, score) => expect(verdictScore(text)).toBe(score));
});
