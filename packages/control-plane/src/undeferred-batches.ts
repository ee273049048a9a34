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
  /** Batches with a run in progress here (one writer per database: nobody else runs them). */
  private readonly active = new Set<string>();
  /** Aborted first by `stop()`: runs end as interrupted, not as failures of stopped engines. */
  private readonly stopSignal = new AbortController();

  constructor(
    private readonly runner: BatchRunner,
    private readonly store: BatchStore,
    private readonly logger: Logger,
  ) {}

  run(batchId: string, rerun = 0): void {
    if (this.stopSignal.signal.aborted || this.active.has(batchId)) return;
    this.active.add(batchId);
    const ran = this.runner.run(batchId, this.stopSignal.signal);
    void ran.finally(() => this.active.delete(batchId)).catch(() => {});
    ran.catch((e: unknown) => {
      // Cut short by stop(): the runner logged it and put the batch back for the next start.
      if (this.stopSignal.signal.aborted) return;
      // Still running after its run ended: the store refused to put it back (a full disk); it goes back before the
      // rerun, so accepted work is not stranded until a restart.
      const state = this.store.get(batchId).state;
      if (state !== 'sealed' && state !== 'running') {
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
        this.requeueStranded(batchId);
        this.run(batchId, rerun + 1);
      }, delayMs);
      this.reruns.add(timer);
    });
  }

  /** Puts a batch left running by a run that has ended back to sealed; if the store still refuses, the rerun fails
   * on the running batch and is scheduled again. */
  private requeueStranded(batchId: string): void {
    try {
      if (this.store.get(batchId).state === 'running')
        this.store.requeue(batchId, 'run ended while the store refused writes');
    } catch (e) {
      this.logger.warn(
        { batch: batchId, err: String(e) },
        'batch still cannot be put back; rerun will retry',
      );
    }
  }

  /** Cancels pending reruns and interrupts the runs in progress with `reason`. */
  stop(reason: Error): void {
    for (const timer of this.reruns) clearTimeout(timer);
    this.reruns.clear();
    this.stopSignal.abort(reason);
  }
}
