import { type Clock, type GroupPlacement, isUisError, type Logger, type PoolPlan, UisError } from '@uis/spec';
import type { PlacementGroups } from '../placement-groups.ts';
import { errorMessage } from '../runtime.ts';
import type { Adoption } from './adoption.ts';
import type { EngineRecords } from './engine-records.ts';
import type { Health } from './health.ts';
import type { Incarnations } from './incarnations.ts';
import type { PublicationProjector } from './publication.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { RouterSync } from './router-sync.ts';
import type { Audit, Slot } from './types.ts';
import type { WeightSync } from './weight-sync.ts';

/** How often a start names the engines still loading. */
const SLOW_REPORT_MS = 30_000;

/** Where the role's engines run: the placement groups this manager created, the start of the whole plan (adopting
 * or launching every replica) with its rollback, and the shutdown. */
export class EnginePool {
  #started = false;
  readonly #createdPgs: string[] = [];

  constructor(
    private readonly role: string,
    /** This role's groups of the placement plan. */
    private readonly placements: readonly GroupPlacement[],
    private readonly pools: Record<string, PoolPlan>,
    private readonly pgs: PlacementGroups | undefined,
    private readonly replicas: ReplicaTable,
    private readonly adoption: Adoption,
    private readonly incarnations: Incarnations,
    private readonly weights: WeightSync,
    private readonly health: Health,
    private readonly routers: RouterSync,
    private readonly publication: PublicationProjector,
    private readonly records: EngineRecords | null,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly audit: Audit,
  ) {}

  get started(): boolean {
    return this.#started;
  }

  createdPgs(): string[] {
    return [...this.#createdPgs];
  }

  requireStarted(): void {
    if (!this.#started)
      throw new UisError({
        code: 'manager_not_started',
        message: `${this.role} manager is not started`,
      });
  }

  /** Creates owned PGs, launches every replica of the plan in parallel, waits healthy, reads weight versions,
   * registers with routers and publishes. On any failure, or `signal` aborting, rolls back exactly what it
   * created. */
  async start(sleep: boolean, signal?: AbortSignal): Promise<void> {
    if (this.#started) return;
    const { replicas, publication } = this;
    const createdSlots: Slot[] = [];
    const registered: Slot[] = [];
    const pgsCreatedNow: string[] = [];
    try {
      await this.createPgs(pgsCreatedNow);
      for (const p of this.placements) {
        if (p.worker_type === 'placeholder') continue;
        const m = replicas.model(p.model);
        const group = m.spec.engine_groups[p.group];
        if (!group)
          throw new UisError({
            code: 'unknown_group',
            path: `${p.model}.engine_groups[${p.group}]`,
            message: 'placement names a group the model lacks',
          });
        for (const r of p.replicas) createdSlots.push(replicas.add(m.spec, group, p, r));
      }
      publication.publish(); // candidates, all starting
      // Engines a previous control plane left running are adopted (or stopped) before anything is launched.
      const adopted = await this.adoption.run(createdSlots);
      const fresh = createdSlots.filter((s) => !adopted.has(s));
      signal?.throwIfAborted();
      await this.launchAll(fresh, signal);
      signal?.throwIfAborted();
      for (const m of replicas.models.values()) this.weights.adoptTarget(m);
      for (const s of fresh) replicas.setState(s, 'ready');
      // Starting to sleep: never registered or published as eligible, the drain that follows publishes.
      if (!sleep) {
        await this.routers.sync(registered);
        publication.publish();
      }
      this.#started = true;
      this.health.start();
    } catch (e) {
      this.logger.error({ role: this.role, err: errorMessage(e) }, 'start failed; rolling back');
      await this.rollback(createdSlots, registered, pgsCreatedNow);
      throw new UisError({
        code: 'start_failed',
        relayedStatus: e instanceof UisError ? e.status : undefined,
        message: `${this.role} start failed and was rolled back: ${errorMessage(e)}`,
        cause: e,
        details: { rolled_back: { engines: createdSlots.map((s) => s.engineId), pgs: pgsCreatedNow } },
      });
    }
  }

  /** Starts every slot's engine at once. The first failure cancels the other starts (their engines stop instead
   * of polling for health until the start deadline) and is thrown once every start has ended, so the rollback
   * that follows never races an engine still being launched. `stop` aborting cancels them all the same. */
  private async launchAll(slots: Slot[], stop?: AbortSignal): Promise<void> {
    const cancel = new AbortController();
    const stopped = () => cancel.abort(stop?.reason);
    stop?.addEventListener('abort', stopped, { once: true });
    const progress = this.startProgress(slots, cancel.signal);
    const results = await Promise.allSettled(
      slots.map((s) =>
        this.incarnations.launch(s, cancel.signal).then(
          () => progress.ready(s),
          (e: unknown) => {
            cancel.abort(e);
            throw e;
          },
        ),
      ),
    );
    progress.done();
    stop?.removeEventListener('abort', stopped);
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    const first = failed.find((r) => !isUisError(r.reason) || r.reason.code !== 'engine_start_cancelled');
    const reported = first ?? failed[0];
    if (reported) throw reported.reason;
  }

  /** Tells the operator how a start goes (engines load for minutes on real GPUs): `n of m ready` as each engine
   * answers, and every SLOW_REPORT_MS which engines are still loading. */
  private startProgress(slots: Slot[], signal: AbortSignal) {
    const { clock, logger, role } = this;
    const t0 = clock.now();
    const waiting = new Set(slots.map((s) => s.engineId));
    const stop = new AbortController();
    const abort = () => stop.abort();
    signal.addEventListener('abort', abort, { once: true });
    logger.info({ role }, `starting ${slots.length} engine${slots.length === 1 ? '' : 's'}`);
    const watch = async () => {
      for (;;) {
        await clock.sleep(SLOW_REPORT_MS, stop.signal);
        const seconds = Math.round((clock.now() - t0) / 1000);
        logger.info(
          { role, loading: [...waiting], seconds },
          `${waiting.size} of ${slots.length} engines still loading`,
        );
      }
    };
    watch().catch(() => undefined);
    return {
      ready: (s: Slot) => {
        waiting.delete(s.engineId);
        const ready = slots.length - waiting.size;
        const seconds = ((clock.now() - t0) / 1000).toFixed(1);
        logger.info({ role, engineId: s.engineId, seconds }, `engine ready (${ready} of ${slots.length})`);
      },
      done: () => {
        signal.removeEventListener('abort', abort);
        stop.abort();
      },
    };
  }

  private async createPgs(createdNow: string[]): Promise<void> {
    for (const poolName of new Set(this.placements.map((p) => p.pool))) {
      const pool = this.pools[poolName];
      if (pool?.owner !== 'manager' || !this.pgs) continue;
      if (await this.pgs.exists(pool.pg_name)) continue;
      await this.pgs.create(pool);
      createdNow.push(pool.pg_name);
      this.#createdPgs.push(pool.pg_name);
      this.audit('pg.created', pool.pg_name, { owner: 'manager' });
    }
  }

  private async rollback(slots: Slot[], registered: Slot[], pgs: string[]): Promise<void> {
    await this.routers.unregister(registered);
    await Promise.allSettled(slots.map((s) => s.engine?.shutdown(2_000)));
    for (const s of slots) this.records?.forget(s.engineId);
    for (const s of slots) this.replicas.remove(s);
    await this.removePgs(pgs.reverse(), 'rollback');
    this.publication.publish();
  }

  private async removePgs(pgs: string[], reason: string): Promise<void> {
    for (const pg of pgs) {
      try {
        await this.pgs?.remove(pg);
        this.audit('pg.removed', pg, { reason });
      } catch (e) {
        this.logger.error({ pg, err: errorMessage(e) }, `${reason} could not remove placement group`);
      }
      const i = this.#createdPgs.indexOf(pg);
      if (i >= 0) this.#createdPgs.splice(i, 1);
    }
  }

  /** Unregisters router workers, stops owned engines (never external ones), deletes the PGs this manager
   * created, publishes every replica dead. The health loop and recoveries have stopped before. */
  async shutdown(): Promise<void> {
    const { replicas } = this;
    const slots = replicas.all();
    await this.routers.removeAll(slots);
    for (const s of slots) replicas.invalidate(s);
    await Promise.allSettled(slots.map((s) => s.engine?.shutdown(5_000)));
    // A clean stop stops every engine, adoption mode included: the next start launches a new set.
    for (const s of slots) this.records?.forget(s.engineId);
    for (const s of slots) if (s.state !== 'dead') replicas.setState(s, 'dead');
    await this.removePgs([...this.#createdPgs].reverse(), 'shutdown');
    this.#createdPgs.length = 0;
    this.publication.publish();
  }
}
