import { ManualClock } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import { ReplicaBreakers } from './replica-breakers.ts';

describe('ReplicaBreakers', () => {
  it('opens after consecutive failures, probes once when the open time is up, closes on success', async () => {
    const clock = new ManualClock(0);
    const b = new ReplicaBreakers({ failureThreshold: 3, openMs: 1000, clock });
    for (let i = 0; i < 2; i++) b.failure('r/0');
    expect(b.allows('r/0')).toBe(true);
    b.failure('r/0');
    expect(b.state('r/0')).toBe('open');
    expect(b.allows('r/0')).toBe(false);
    expect(b.allows('r/1')).toBe(true);
    await clock.advance(1000);
    expect(b.state('r/0')).toBe('half_open');
    expect(b.allows('r/0')).toBe(true);
    // One probe at a time.
    expect(b.allows('r/0')).toBe(false);
    b.success('r/0');
    expect(b.state('r/0')).toBe('closed');
    expect(b.allows('r/0')).toBe(true);
    expect(b.snapshot()).toEqual([]);
  });

  it('a failed probe opens the circuit again for a full open time; a success resets the count', async () => {
    const clock = new ManualClock(0);
    const b = new ReplicaBreakers({ failureThreshold: 2, openMs: 1000, clock });
    b.failure('r/0');
    b.success('r/0');
    b.failure('r/0');
    expect(b.state('r/0')).toBe('closed');
    b.failure('r/0');
    expect(b.state('r/0')).toBe('open');
    await clock.advance(1500);
    expect(b.allows('r/0')).toBe(true);
    b.failure('r/0');
    expect(b.state('r/0')).toBe('open');
    expect(b.allows('r/0')).toBe(false);
    await clock.advance(999);
    expect(b.allows('r/0')).toBe(false);
    await clock.advance(1);
    expect(b.allows('r/0')).toBe(true);
    expect(b.snapshot()).toEqual([{ engineId: 'r/0', state: 'half_open', failures: 3 }]);
  });

  it('disabled (the unprotected bench column): failures never open a circuit', () => {
    const b = new ReplicaBreakers({ enabled: false, failureThreshold: 1 });
    for (let i = 0; i < 10; i++) b.failure('r/0');
    expect(b.state('r/0')).toBe('closed');
    expect(b.allows('r/0')).toBe(true);
    expect(b.snapshot()).toEqual([]);
  });
});
