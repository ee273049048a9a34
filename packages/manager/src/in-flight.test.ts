import { describe, expect, it } from 'vitest';
import { InFlightTracker } from './in-flight.ts';

describe('in-flight requests per engine', () => {
  it('idle resolves when the engine’s last request ends (not another engine’s), at once when it has none', async () => {
    const t = new InFlightTracker();
    await t.idle('e0');
    const a = t.acquire('e0');
    const b = t.acquire('e0');
    const other = t.acquire('e1');
    let idle = false;
    const waiting = t.idle('e0').then(() => {
      idle = true;
    });
    a();
    other();
    await Promise.resolve();
    expect(idle).toBe(false);
    b();
    await waiting;
    expect(idle).toBe(true);
  });

  it('a cancelled wait (the drain deadline) rejects with its reason', async () => {
    const t = new InFlightTracker();
    const release = t.acquire('e0');
    const stop = new AbortController();
    const waiting = t.idle('e0', stop.signal);
    stop.abort(new Error('deadline'));
    await expect(waiting).rejects.toThrow('deadline');
    release();
    await expect(t.idle('e0', AbortSignal.abort())).resolves.toBeUndefined();
  });
});

describe('admit (the gateway counts without a release closure)', () => {
  it('counts what the engine admits and refuses the rest without counting; release ends the count', async () => {
    const t = new InFlightTracker((id) => id !== 'draining');
    expect(t.admit('e0')).toBe(true);
    expect(t.admit('e0')).toBe(true);
    expect(t.admit('draining')).toBe(false);
    expect(t.count('e0')).toBe(2);
    expect(t.count('draining')).toBe(0);
    expect(() => t.acquire('draining')).toThrow(/accepts no new work/);
    const idle = t.idle('e0');
    t.release('e0');
    expect(t.count('e0')).toBe(1);
    t.release('e0');
    await idle;
    expect(t.total()).toBe(0);
  });
});
