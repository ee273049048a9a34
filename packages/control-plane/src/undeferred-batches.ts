import type { BatchRunner, BatchStore } from '@uis/manager';
import type { Logger } from '@uis/spec';

/** Backoff of the reruns of a requeued undeferred batch: 1 s, doubling, at most 30 s apart. */
const RERUN_FIRST_MS = 1_000;
const RERUN_MAX_MS = 30_000;

/** Runs the batches of roles without a defer schedule. No scorer phase comes back for them, so a run the engines
 * could not finish (the runner put the batch back to sealed: no replica, engine unreachable) is run again with
 * backoff until it commits or fails, instead of waiting for a restart. */
export class UndeferredBatches {
  private readonly reruns = new Set<NodeJS.Timeout>();
  /** Aborted first by `stop()`: runs end as interrupted, not as failures of stopped engines. */
  private readonly stopSignal = new AbortController();

  constructor(
    private readonly runner: BatchRunner,
    private readonly store: BatchStore,
    private readonly logger: Logger,
  ) {}

  run(batchId: string, rerun = 0): void {
    if (this.stopSignal.signal.aborted) return;
    this.runner.run(batchId, this.stopSignal.signal).catch((e: unknown) => {
      // Cut short by stop(): the runner logged it and put the batch back for the next start.
      if (this.stopSignal.signal.aborted) return;
      if (this.store.get(batchId).state !== 'sealed') {
        this.logger.error({ batch: batchId, err: String(e) }, 'batch run failed');
        return;
      }
      const delayMs = Math.min(RERUN_MAX_MS, RERUN_FIRST_MS * 2 ** rerun);
      this.logger.warn(
        { batch: batchId, err: String(e), retryInMs: delayMs },
        'batch run failed; rerun scheduled',
      );
      const timer = setTimeout(() => {
        this.reruns.delete(timer);
        this.run(batchId, rerun + 1);
      }, delayMs);
      this.reruns.add(timer);
    });
  }

  /** Cancels pending reruns and interrupts the runs in progress with `reason`. */
  stop(reason: Error): void {
    for (const timer of this.reruns) clearTimeout(timer);
    this.reruns.clear();
    this.stopSignal.abort(reason);
  }
}
