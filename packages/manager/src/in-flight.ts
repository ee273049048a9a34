import { UisError } from '@uis/spec';

/** Requests the gateway has in flight per engine. The gateway acquires before proxying and releases when the
 * answer (or stream) ends; drain waits for these counts to reach zero. `acquire` refuses (503) an engine the
 * manager no longer admits work for, so no request slips in after a drain began. */
export class InFlightTracker {
  /** A counter object per engine with requests in flight: one map lookup per admit and release, no set. */
  private readonly counts = new Map<string, { n: number }>();
  private readonly waiters = new Set<() => void>();

  constructor(private readonly admits: (engineId: string) => boolean = () => true) {}

  /** Counts one request; returns its release function (idempotent). Throws 503 `replica_not_admitting`. */
  acquire(engineId: string): () => void {
    if (!this.admit(engineId))
      throw new UisError({
        code: 'replica_not_admitting',
        path: engineId,
        message: `${engineId} accepts no new work (draining, sleeping or not at the target weight version)`,
      });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.release(engineId);
    };
  }

  /** Counts one request when `engineId` admits work (false: it does not, nothing counted); the caller releases it.
   * The gateway's form of `acquire`: no release closure and no error made per request. */
  admit(engineId: string): boolean {
    if (!this.admits(engineId)) return false;
    const c = this.counts.get(engineId);
    if (c === undefined) this.counts.set(engineId, { n: 1 });
    else c.n++;
    return true;
  }

  release(engineId: string): void {
    const c = this.counts.get(engineId);
    if (c !== undefined && --c.n <= 0) this.counts.delete(engineId);
    // Called once per request: no copy when nobody waits (a drain is rare).
    if (this.waiters.size > 0) for (const w of [...this.waiters]) w();
  }

  /** Resolves once `engineId` has no request in flight (at once when it has none), or rejects when `signal`
   * aborts. Woken by each release, no polling. */
  idle(engineId: string, signal?: AbortSignal): Promise<void> {
    if (this.count(engineId) === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        this.waiters.delete(check);
        signal?.removeEventListener('abort', cancel);
      };
      const check = () => {
        if (this.count(engineId) > 0) return;
        done();
        resolve();
      };
      const cancel = () => {
        done();
        reject(signal?.reason ?? new Error('aborted'));
      };
      if (signal?.aborted) return cancel();
      this.waiters.add(check);
      signal?.addEventListener('abort', cancel, { once: true });
    });
  }

  count(engineId: string): number {
    return this.counts.get(engineId)?.n ?? 0;
  }

  total(): number {
    let n = 0;
    for (const c of this.counts.values()) n += c.n;
    return n;
  }
}
