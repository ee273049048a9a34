/** A version counter with waiters: producers `notify()`, consumers wait for a version newer than the one they saw.
 * Many notifications between two reads collapse into one wake-up, which is what throttling needs. */
export class ChangeFeed {
  private version = 0;
  private readonly waiters = new Set<() => void>();

  get current(): number {
    return this.version;
  }

  notify = (): void => {
    this.version++;
    // Called once per served request: no copy when no console is waiting.
    if (this.waiters.size === 0) return;
    const ws = [...this.waiters];
    this.waiters.clear();
    for (const w of ws) w();
  };

  /** Resolves with the new version once it exceeds `seen`, or with `seen` when `signal` aborts. */
  after(seen: number, signal: AbortSignal): Promise<number> {
    if (this.version > seen || signal.aborted) return Promise.resolve(this.version);
    return new Promise((resolve) => {
      const done = () => {
        this.waiters.delete(done);
        signal.removeEventListener('abort', done);
        resolve(this.version);
      };
      this.waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }
}

/** Sleeps `ms`, or less when `signal` aborts. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
