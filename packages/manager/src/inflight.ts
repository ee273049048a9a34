import { UisError } from '@uis/spec';

/** Requests the gateway has in flight per engine. The gateway acquires before proxying and releases when the
 * answer (or stream) ends; drain waits for these counts to reach zero. `acquire` refuses (503) an engine the
 * manager no longer admits work for, so no request slips in after a drain began. */
export class InflightTracker {
  private readonly counts = new Map<string, number>();
  private readonly waiters = new Set<() => void>();

  constructor(private readonly admits: (engineId: string) => boolean = () => true) {}

  /** Counts one request; returns its release function (idempotent). Throws 503 `replica_not_admitting`. */
  acquire(engineId: string): () => void {
    if (!this.admits(engineId))
      throw new UisError({
        code: 'replica_not_admitting',
        path: engineId,
        message: `${engineId} accepts no new work (draining, sleeping or not at the target weight version)`,
      });
    this.counts.set(engineId, (this.counts.get(engineId) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.release(engineId);
    };
  }

  release(engineId: string): void {
    const n = (this.counts.get(engineId) ?? 0) - 1;
    if (n <= 0) this.counts.delete(engineId);
    else this.counts.set(engineId, n);
    // Called once per request: no copy when nobody waits (a drain is rare).
    if (this.waiters.size > 0) for (const w of [...this.waiters]) w();
  }

  count(engineId: string): number {
    return this.counts.get(engineId) ?? 0;
  }

  total(): number {
    let n = 0;
    for (const v of this.counts.values()) n += v;
    return n;
  }
}
