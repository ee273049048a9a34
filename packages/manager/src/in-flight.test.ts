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
