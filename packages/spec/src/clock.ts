/** The time source of every timestamp, timer, deadline, backoff and health loop (engine, manager, coordinator,
 * gateway, direct client): code takes a `Clock` instead of touching `Date.now`/`setTimeout`, so tests drive time
 * (`ManualClock` of `@uis/sglang-engine/testing`). Defined here, the lowest layer, because routing's direct client
 * needs it as much as the engine does; it touches timers only, no I/O. */
export interface Clock {
  now(): number;
  /** Resolves after `ms`; rejects with the signal's reason once `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason ?? new Error('aborted'));
        return;
      }
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason ?? new Error('aborted'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};

/** Waits for `p` or `ms` on `clock`, whichever comes first, leaving no timer behind. True when `p` settled. */
export async function settlesWithin(clock: Clock, p: Promise<unknown>, ms: number): Promise<boolean> {
  const ac = new AbortController();
  const settled = p.then(
    () => true,
    () => true,
  );
  try {
    return await Promise.race([
      settled,
      clock.sleep(ms, ac.signal).then(
        () => false,
        () => false,
      ),
    ]);
  } finally {
    ac.abort();
  }
}
