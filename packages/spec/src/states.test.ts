import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canTransition, deriveModelState, REPLICA_STATES, type ReplicaState, transition } from './states.ts';

describe('replica transition table', () => {
  it('follows the RFC cycle', () => {
    const cycle: ReplicaState[] = ['starting', 'ready', 'draining', 'sleeping', 'onloading', 'ready'];
    for (let i = 1; i < cycle.length; i++) expect(canTransition(cycle[i - 1]!, cycle[i]!)).toBe(true);
  });

  it('lets every live state die, and a dead replica only restart', () => {
    for (const s of REPLICA_STATES) if (s !== 'dead') expect(canTransition(s, 'dead')).toBe(true);
    expect(REPLICA_STATES.filter((s) => canTransition('dead', s))).toEqual(['starting']);
  });

  it.each([
    ['ready', 'sleeping'],
    ['sleeping', 'ready'],
    ['starting', 'draining'],
    ['draining', 'ready'],
    ['ready', 'ready'],
  ] as const)('refuses %s -> %s', (from, to) => {
    expect(() => transition(from, to)).toThrow(/illegal transition/);
  });
});

describe('model state from replicas', () => {
  it.each([
    [['ready', 'dead'], 'ready'],
    [['sleeping', 'onloading'], 'onloading'],
    [['draining', 'sleeping'], 'draining'],
    [['sleeping', 'sleeping'], 'sleeping'],
    [['dead'], 'dead'],
    [[], 'dead'],
  ] as const)('%j -> %s', (states, expected) => {
    expect(deriveModelState(states)).toBe(expected);
  });

  it('is ready exactly when some replica is ready', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...REPLICA_STATES)), (states) => {
        expect(deriveModelState(states) === 'ready').toBe(states.includes('ready'));
      }),
    );
  });
});
