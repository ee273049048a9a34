import type { Clock } from '@uis/spec';

interface Timer {
  due: number;
  seq: number;
  resolve: () => void;
}

/** Lets the event loop run everything already queued (promise jobs and I/O callbacks) once. */
const turn = () => new Promise<void>((r) => setImmediate(r));

/** A clock that only moves when a test says so: `advance(ms)` fires the sleeps due meanwhile in time order,
 * letting the woken code run (and sleep again) before the next one fires. Backoff, deadlines and timeouts are
 * then tested in microseconds, exactly, instead of by waiting on a loaded machine. */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  readonly #timers = new Set<Timer>();

  constructor(start = 1_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason ?? new Error('aborted'));
        return;
      }
      const timer: Timer = {
        due: this.#now + Math.max(0, ms),
        seq: this.#seq++,
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.#timers.delete(timer);
        reject(signal?.reason ?? new Error('aborted'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#timers.add(timer);
    });
  }

  /** Sleeps registered and not yet fired or aborted. */
  get pending(): number {
    return this.#timers.size;
  }

  /** The durations (from now) of the pending sleeps, soonest first. */
  pendingDelays(): number[] {
    return [...this.#timers].map((t) => t.due - this.#now).sort((a, b) => a - b);
  }

  /** Moves time forward by `ms`, firing every sleep due on the way in order. */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    for (;;) {
      await this.settle();
      const next = [...this.#timers]
        .filter((t) => t.due <= end)
        .sort((a, b) => a.due - b.due || a.seq - b.seq)[0];
      if (!next) break;
      this.#timers.delete(next);
      this.#now = Math.max(this.#now, next.due);
      next.resolve();
    }
    this.#now = end;
    await this.settle();
  }

  /** Resolves once `n` sleeps are pending (the code under test reached its timer) while real I/O runs (a process
   * exits, a socket answers). Fails after `realTimeoutMs` of wall time, so a test waiting for a sleep that never
   * comes fails instead of hanging. */
  async untilPending(n = 1, realTimeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + realTimeoutMs;
    for (let i = 0; this.#timers.size < n; i++) {
      if (Date.now() > deadline) throw new Error(`expected ${n} pending sleeps, have ${this.#timers.size}`);
      // Promise jobs first; then let the event loop breathe instead of spinning a shared CPU.
      await (i < 50 ? turn() : new Promise<void>((r) => setTimeout(r, 5)));
    }
  }

  private async settle(): Promise<void> {
    for (let i = 0; i < 5; i++) await turn();
  }
}
