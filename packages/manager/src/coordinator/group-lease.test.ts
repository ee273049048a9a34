import { ManualClock } from '@uis/sglang-engine/testing';
import { deferPhases } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { EventLog } from '../event-log.ts';
import { MemoryLogger } from '../runtime.ts';
import { openStore } from '../store.ts';
import { GroupLease } from './group-lease.ts';
import { LeaseStore } from './lease-store.ts';

const PLAN = {
  name: 'actor',
  pool: 'actor',
  phases: deferPhases([]),
};

function lease() {
  const db = openStore();
  const store = new LeaseStore(db);
  const events = new EventLog(db);
  const logger = new MemoryLogger();
  const g = new GroupLease(PLAN, store, events, logger, new ManualClock());
  return { db, store, events, logger, g };
}

describe('GroupLease.move', () => {
  it('saves every move, wakes watchers, logs it and writes its audit event', () => {
    const { store, events, logger, g } = lease();
    const seen: string[] = [];
    g.watch(() => seen.push(g.lease.status));
    g.move('begin', { target: 'rollout' });
    g.move('enter', { phase: 'rollout', holder: ['rollout'] }, { kind: 'phase.entered', data: {} });
    expect(seen).toEqual(['transitioning', 'held']);
    expect(store.load('actor')).toMatchObject({ status: 'held', phase: 'rollout', holder: ['rollout'] });
    // A held lease carries no reason and no target.
    expect(g.lease).toMatchObject({ reason: null, target: null });
    expect(events.list().map((e) => [e.kind, e.subject])).toEqual([['phase.entered', 'actor']]);
    expect(logger.lines.map((l) => l.msg)).toEqual(['lease moved', 'lease moved']);
  });

  it('refuses a move the table does not allow, and changes nothing', () => {
    const { store, g } = lease();
    g.move('block', { reason: 'memory in doubt' });
    expect(() => g.move('begin', { target: 'train' })).toThrow(/cannot begin a blocked lease/);
    expect(() => g.move('enter')).toThrow(/illegal|cannot enter/);
    expect(g.lease).toMatchObject({ status: 'blocked', reason: 'memory in doubt', target: null });
    expect(store.load('actor')?.status).toBe('blocked');
  });

  it('a stored transitioning lease comes back blocked (a restart never guesses where memory is)', () => {
    const { db, store, g } = lease();
    g.move('begin', { target: 'train' });
    const again = new GroupLease(PLAN, store, new EventLog(db), new MemoryLogger(), new ManualClock());
    expect(again.lease.status).toBe('blocked');
    expect(again.lease.reason).toMatch(/restarted during a transition/);
    expect(store.load('actor')?.status).toBe('blocked');
  });
});
