import type { Clock, Logger } from '@uis/spec';
import { errorMessage } from '../runtime.ts';
import type { Health } from './health.ts';
import type { Incarnations } from './incarnations.ts';
import type { ResolvedManagerOptions } from './init.ts';
import type { MemoryLedger } from './memory-ledger.ts';
import type { OperationQueue } from './operation-queue.ts';
import type { PublicationProjector } from './publication.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { Residency } from './residency.ts';
import type { RouterSync } from './router-sync.ts';
import type { Audit, Slot } from './types.ts';
import type { WeightSync } from './weight-sync.ts';

/** Restarts of dead replicas: owns `slot.generation` and the restart part of `slot.health` (a restart running, a
 * restart deferred to the model's next onload because it died while its model slept, the background recovery a
 * drain waits for). The rules of `restarting`, `restartPending` and `recovery` live here and nowhere else. */
export class Recovery {
  readonly #stop = new AbortController();
  readonly #background = new Set<Promise<unknown>>();

  constructor(
    private readonly replicas: ReplicaTable,
    private readonly queue: OperationQueue,
    private readonly health: Health,
    private readonly incarnations: Incarnations,
    private readonly memory: MemoryLedger,
    private readonly weights: WeightSync,
    private readonly residency: Residency,
    private readonly routers: RouterSync,
    private readonly publication: PublicationProjector,
    private readonly opts: Pick<ResolvedManagerOptions, 'restartBackoffMs' | 'restartBackoffMaxMs'>,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly audit: Audit,
  ) {
    health.onDeath((s) => this.recoverInBackground(s));
  }

  /** Ends every restart backoff; resolves once the background recoveries gave up. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await Promise.allSettled([...this.#background]);
  }

  /** Replicas whose restart waits for their model's onload. */
  pendingRestarts(slots: Slot[]): Slot[] {
    return slots.filter((s) => s.state === 'dead' && s.health.restartPending);
  }

  /** The onload that a deferred restart waited for: one attempt, errors thrown. */
  restartNow(s: Slot): Promise<void> {
    s.health.restartPending = false;
    return this.restart(s, false);
  }

  /** The operator's restart: stop the replica now, relaunch it now unless its model sleeps (then at its next
   * onload). Whether it relaunched. */
  async operatorRestart(s: Slot): Promise<boolean> {
    if (s.state !== 'dead') await this.health.markDead(s, 'restart requested by operator', false);
    await this.restart(s, false);
    return !s.health.restartPending;
  }

  /** Restarts a replica declared dead in the background, with backoff (a drain waits for it: `health.recovery`). */
  private recoverInBackground(s: Slot): void {
    // restart() itself defers to the model's next onload when the model sleeps.
    const p = this.restart(s, true).catch((e) => {
      this.logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'recovery gave up');
    });
    this.#background.add(p);
    s.health.recovery = p;
    void p.finally(() => {
      this.#background.delete(p);
      if (s.health.recovery === p) s.health.recovery = null;
    });
  }

  /** dead -> starting (new generation) -> healthy -> weights synced -> ready (eligible only at the target
   * version) -> back to sleep if the model is sleeping. Retries with exponential backoff until it works or the
   * manager shuts down (`retry` false: one attempt, errors thrown). */
  private async restart(s: Slot, retry: boolean): Promise<void> {
    if (s.health.restarting) return;
    s.health.restarting = true;
    let backoff = this.opts.restartBackoffMs;
    try {
      for (;;) {
        if ((await this.attempt(s, retry, backoff)) === 'done') return;
        try {
          await this.clock.sleep(backoff, this.#stop.signal);
        } catch {
          return;
        }
        backoff = Math.min(backoff * 2, this.opts.restartBackoffMaxMs);
      }
    } finally {
      s.health.restarting = false;
    }
  }

  /** One restart attempt: 'done' when the replica is back, given up (shutdown, removed), or deferred to the next
   * onload; 'failed' when a retry is due after `backoff`. */
  private async attempt(s: Slot, retry: boolean, backoff: number): Promise<'done' | 'failed'> {
    const { replicas, queue, incarnations, publication } = this;
    if (queue.closed || !replicas.has(s)) return 'done';
    // Stop what is left of the old incarnation first (never an external engine's processes).
    await incarnations.stop(s);
    if (queue.closed) return 'done';
    // The model went to sleep while this replica was down (or an operator restarts a sleeping one): relaunching
    // now would put it next to the phase that holds the GPUs. The next onload restarts it.
    const m = replicas.model(s.model);
    if (s.state === 'dead' && m.desire === 'sleeping' && this.memory.offloadEnabled(s)) {
      s.health.restartPending = true;
      this.audit('replica.restart_deferred', s.engineId, { reason: 'model is sleeping' });
      return 'done';
    }
    s.generation++;
    replicas.setState(s, 'starting');
    publication.publish();
    try {
      await incarnations.launch(s);
      this.health.launched(s);
      await this.weights.sync(s, m);
      if (queue.closed) return 'done';
      await this.residency.readyOrAsleep(s, m);
      await this.routers.sync();
      publication.publish();
      this.audit('replica.recovered', s.engineId, {
        generation: s.generation,
        weight_version: s.weightVersion,
      });
      return 'done';
    } catch (e) {
      this.logger.warn({ engineId: s.engineId, err: errorMessage(e), backoff }, 'restart failed');
      if (s.state !== 'dead') replicas.setState(s, 'dead');
      publication.publish();
      if (!retry) throw e;
      return 'failed';
    }
  }
}
