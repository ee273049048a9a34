import type { Clock, Logger } from '@uis/spec';
import { errorMessage } from '../runtime.ts';
import type { Incarnations } from './incarnations.ts';
import type { ResolvedManagerOptions } from './init.ts';
import type { MemoryLedger } from './memory-ledger.ts';
import type { OperationQueue } from './operation-queue.ts';
import type { PublicationProjector } from './publication.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { RouterSync } from './router-sync.ts';
import type { Audit, Slot } from './types.ts';

/** Called for a replica declared dead that its model's fault tolerance should bring back (`Recovery` restarts it). */
export type DeathListener = (s: Slot) => void;

/** Health checks and death: owns `slot.health.failures` (consecutive failed checks). A replica is declared dead
 * after `failuresToDead` failed checks, when its process exits, or when a part gives up on it (a failed offload);
 * a dead replica this manager launched is stopped at once. */
export class Health {
  readonly #stop = new AbortController();
  #loop: Promise<void> | null = null;
  readonly #deathListeners: DeathListener[] = [];

  constructor(
    private readonly role: string,
    private readonly replicas: ReplicaTable,
    private readonly queue: OperationQueue,
    private readonly routers: RouterSync,
    private readonly publication: PublicationProjector,
    private readonly memory: MemoryLedger,
    incarnations: Incarnations,
    /** The launcher's engines are processes of this host (stopped here when dead). */
    private readonly ownsProcesses: boolean,
    private readonly opts: Pick<
      ResolvedManagerOptions,
      'healthIntervalMs' | 'healthTimeoutMs' | 'failuresToDead'
    >,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly audit: Audit,
  ) {
    incarnations.onExit((s, reason) => {
      this.markDead(s, reason, true).catch((err: unknown) =>
        this.logger.error({ engineId: s.engineId, err: errorMessage(err) }, 'could not mark replica dead'),
      );
    });
  }

  /** `listener` hears of every replica declared dead that should be recovered. */
  onDeath(listener: DeathListener): void {
    this.#deathListeners.push(listener);
  }

  /** Checks every replica each `healthIntervalMs` until `stop()`. */
  start(): void {
    const signal = this.#stop.signal;
    const { clock, opts, logger, role } = this;
    this.#loop = (async () => {
      while (!signal.aborted) {
        try {
          await clock.sleep(opts.healthIntervalMs, signal);
        } catch {
          return;
        }
        // One replica's failure to be marked (a publish, an audit write) must not end the loop for the others.
        const checks = await Promise.allSettled(this.replicas.all().map((s) => this.check(s)));
        for (const c of checks)
          if (c.status === 'rejected')
            logger.error({ role, err: errorMessage(c.reason) }, 'health check handling failed');
      }
    })();
  }

  /** Ends the health loop; resolves once it ended. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
  }

  /** A fresh incarnation passed its start: no failures counted against it. */
  launched(s: Slot): void {
    s.health.failures = 0;
  }

  private async check(s: Slot): Promise<void> {
    if (s.state === 'dead' || s.state === 'starting' || s.health.restarting || !s.engine || this.queue.closed)
      return;
    const epoch = s.epoch;
    const endpoint = `GET ${s.engine.baseUrl}/health`;
    let failure: string | null;
    try {
      const ok = await s.engine.client.health({ timeoutMs: this.opts.healthTimeoutMs });
      failure = ok ? null : `${endpoint}: answered 5xx`;
    } catch (e) {
      failure = errorMessage(e);
    }
    if (s.epoch !== epoch || this.queue.closed) return;
    if (failure === null) {
      s.health.failures = 0;
      return;
    }
    s.health.failures++;
    if (s.health.failures >= this.opts.failuresToDead)
      await this.markDead(s, `${s.health.failures} failed health checks (last: ${failure})`, true);
  }

  /** Publishes the replica dead and, with fault tolerance and `recover`, tells the death listeners (recovery). */
  async markDead(s: Slot, reason: string, recover: boolean): Promise<void> {
    const { replicas, logger } = this;
    if (s.state === 'dead' || this.queue.closed || !replicas.has(s)) return;
    replicas.setState(s, 'dead');
    replicas.invalidate(s);
    logger.warn({ engineId: s.engineId, reason }, 'replica dead');
    this.audit('replica.dead', s.engineId, { reason, generation: s.generation });
    await this.routers.sync().catch(() => undefined);
    this.publication.publish();
    // A dead replica this manager launched is stopped at once: its processes are gone, so is its GPU memory, and
    // the coordinator may count it as released. An external engine's memory stays unproven.
    if (!s.external && this.ownsProcesses && s.engine) {
      try {
        await s.engine.shutdown(2_000);
        this.memory.processesStopped(s);
      } catch (e) {
        logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'could not stop dead replica');
      }
    }
    if (recover && s.spec.fault_tolerance_enabled) for (const listener of this.#deathListeners) listener(s);
  }
}
