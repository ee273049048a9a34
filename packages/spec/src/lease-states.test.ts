import { describe, expect, it } from 'vitest';
import { canMoveLease, LEASE_MOVES, type LeaseMove, LeaseStatusSchema } from './lease-states.ts';

describe('lease move table', () => {
  it('runs the defer cycle: held -> transitioning (release, onload) -> held', () => {
    const cycle: LeaseMove[] = ['begin', 'release', 'onload', 'enter'];
    let status = LeaseStatusSchema.parse('held');
    for (const move of cycle) {
      expect(canMoveLease(status, move)).toBe(true);
      status = LEASE_MOVES[move].to;
    }
    expect(status).toBe('held');
  });

  it('a blocked lease only leaves by an operator (resolve), a restart that proves memory (recover) or a fresh start, never by a transition', () => {
    const out = (Object.keys(LEASE_MOVES) as LeaseMove[]).filter(
      (m) => canMoveLease('blocked', m) && LEASE_MOVES[m].to !== 'blocked',
    );
    expect(out.sort()).toEqual(['acquire', 'recover', 'resolve']);
    expect(canMoveLease('transitioning', 'recover')).toBe(false);
    expect(canMoveLease('blocked', 'begin')).toBe(false);
  });

  it.each([
    ['held', 'enter'],
    ['held', 'release'],
    ['held', 'resolve'],
    ['transitioning', 'resolve'],
    ['transitioning', 'acquire'],
  ] as const)('refuses %s by %s', (from, move) => {
    expect(canMoveLease(from, move)).toBe(false);
  });
});
