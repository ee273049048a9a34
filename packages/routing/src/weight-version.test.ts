import { describe, expect, it } from 'vitest';
import { versionsBehind } from './weight-version.ts';

describe('versions behind the newest', () => {
  it.each([
    ['10', '12', [], 2],
    ['12', '12', [], 0],
    ['13', '12', [], 0],
    ['1.5', '3', [], 1.5],
    // Not numbers: the distinct known versions above it, up to the newest.
    ['r01', 'r03', ['r01', 'r02', 'r03', 'r02'], 2],
    ['r01', 'r03', ['r01'], 1],
    ['r02', 'r03', ['r01', 'r02', 'r03', 'r04'], 1],
    // One numeric and one not: string order ("7" < "step-1"), counted by the versions between.
    ['7', 'step-1', ['7', 'step-1'], 1],
  ] as const)('%s behind %s (known %j): %s', (version, newest, known, behind) => {
    expect(versionsBehind(version, newest, known)).toBe(behind);
  });
});
