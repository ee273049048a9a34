import type { SGLangEngine } from '@uis/sglang-engine';
import { type GroupPlacement, isUisError, type PoolPlan, UisError } from '@uis/spec';
import type { Launcher, LaunchRequest } from '../launchers.ts';
import type { PlacementGroups } from '../placement-groups.ts';
import { errorMessage } from '../runtime.ts';
import type { ManagerContext } from './context.ts';
import type { Slot } from './types.ts';

/** How often a start names the engines still loading. */
const SLOW_REPORT_MS = 30_000;

/** Where the role's engines run: the placement groups this manager created, launching each incarnation of a
 * replica (`slot.engine`, `slot.baseUrl`), the start of the whole plan with its rollback, and the shutdown. */
export class EnginePool {
  #started = false;
  readonly #createdPgs: string[] = [];

  constructor(
    private readonly ctx: ManagerContext,
    private readonly launcher: Launcher,
    readonly placements: GroupPlacement[],
    readonly pools: Record<string, PoolPlan>,
    private readonly pgs: PlacementGroups | undefined,
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
        message: `${this.ctx.role} manager is not started`,
      });
  }

  /** Creates owned PGs, launches every replica of the plan in parallel, waits healthy, reads weight versions,
   * registers with routers and publishes. On any failure rolls back exactly what it created. */
  async start(sleep: boolean): Promise<void> {
    if (this.#started) return;
    const { replicas, publication } = this.ctx;
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
      const adopted = await this.ctx.adoption.run(createdSlots);
      const fresh = createdSlots.filter((s) => !adopted.has(s));
      await this.launchAll(fresh);
      for (const m of replicas.models.values()) this.ctx.weights.adoptTarget(m);
      for (const s of fresh) replicas.setState(s, 'ready');
      // Starting to sleep: never registered or published as eligible, the drain that follows publishes.
      if (!sleep) {
        await this.ctx.routers.sync(registered);
        publication.publish();
      }
      this.#started = true;
      this.ctx.recovery.start();
    } catch (e) {
      this.ctx.logger.error({ role: this.ctx.role, err: errorMessage(e) }, 'start failed; rolling back');
      await this.rollback(createdSlots, registered, pgsCreatedNow);
      throw new UisError({
        code: 'start_failed',
        relayedStatus: e instanceof UisError ? e.status : undefined,
        message: `${this.ctx.role} start failed and was rolled back: ${errorMessage(e)}`,
        cause: e,
        details: { rolled_back: { engines: createdSlots.map((s) => s.engineId), pgs: pgsCreatedNow } },
      });
    }
  }

  /** Starts every slot's engine at once. The first failure cancels the other starts (their engines stop instead
   * of polling for health until the start deadline) and is thrown once every start has ended, so the rollback
   * that follows never races an engine still being launched. */
  private async launchAll(slots: Slot[]): Promise<void> {
    const cancel = new AbortController();
    const progress = this.startProgress(slots, cancel.signal);
    const results = await Promise.allSettled(
      slots.map((s) =>
        this.launch(s, cancel.signal).then(
          () => progress.ready(s),
          (e: unknown) => {
            cancel.abort(e);
            throw e;
          },
        ),
      ),
    );
    progress.done();
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    const first = failed.find((r) => !isUisError(r.reason) || r.reason.code !== 'engine_start_cancelled');
    const reported = first ?? failed[0];
    if (reported) throw reported.reason;
  }

  /** Tells the operator how a start goes (engines load for minutes on real GPUs): `n of m ready` as each engine
   * answers, and every SLOW_REPORT_MS which engines are still loading. */
  private startProgress(slots: Slot[], signal: AbortSignal) {
    const { clock, logger, role } = this.ctx;
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
      this.ctx.audit('pg.created', pool.pg_name, { owner: 'manager' });
    }
  }

  private async rollback(slots: Slot[], registered: Slot[], pgs: string[]): Promise<void> {
    await this.ctx.routers.unregister(registered);
    await Promise.allSettled(slots.map((s) => s.engine?.shutdown(2_000)));
    for (const s of slots) this.ctx.records?.forget(s.engineId);
    for (const s of slots) this.ctx.replicas.remove(s);
    await this.removePgs(pgs.reverse(), 'rollback');
    this.ctx.publication.publish();
  }

  private async removePgs(pgs: string[], reason: string): Promise<void> {
    for (const pg of pgs) {
      try {
        await this.pgs?.remove(pg);
        this.ctx.audit('pg.removed', pg, { reason });
      } catch (e) {
        this.ctx.logger.error({ pg, err: errorMessage(e) }, `${reason} could not remove placement group`);
      }
      const i = this.#createdPgs.indexOf(pg);
      if (i >= 0) this.#createdPgs.splice(i, 1);
    }
  }

  launchRequest(s: Slot): LaunchRequest {
    return {
      role: this.ctx.spec.role,
      model: s.spec,
      group: s.group,
      placement: s.placement,
      replica: s.replica,
      offload: s.placement.offload || this.ctx.spec.deployment.offload,
      generation: s.generation,
    };
  }

  /** Gives an external replica the client of its attached engine (`launch` then starts it). */
  attach(s: Slot, engine: SGLangEngine): void {
    s.engine = engine;
    s.baseUrl = engine.baseUrl;
  }

  /** Stops what is left of a replica's incarnation (never an external engine's processes). */
  async stopIncarnation(s: Slot): Promise<void> {
    if (s.engine && !s.external) {
      await s.engine.shutdown(2_000).catch(() => undefined);
      s.engine = null;
      this.ctx.records?.forget(s.engineId);
    }
  }

  /** Creates the engine (launcher), starts it (launch + healthy + flush) and reads its weight version. */
  async launch(s: Slot, signal?: AbortSignal): Promise<void> {
    // A free port can be taken by another process between the probe and the engine's bind: one more try.
    for (let attempt = 1; ; attempt++) {
      const engine = s.external && s.engine ? s.engine : await this.launcher.create(this.launchRequest(s));
      this.attach(s, engine);
      const epoch = s.epoch;
      let up = false;
      engine.onExit((e) => {
        // Before it is up, a failed start is reported by start() itself (and rolled back by the caller).
        if (!up || s.epoch !== epoch || s.engine !== engine) return;
        this.ctx.recovery
          .markDead(s, `process exited (node ${e.nodeRank}, code ${e.code}, signal ${e.signal})`, true)
          .catch((err: unknown) =>
            this.ctx.logger.error(
              { engineId: s.engineId, err: errorMessage(err) },
              'could not mark replica dead',
            ),
          );
      });
      try {
        await engine.start({ deadlineMs: this.ctx.opts.startDeadlineMs, ...(signal ? { signal } : {}) });
      } catch (e) {
        if (attempt < 2 && !s.external && /EADDRINUSE|address already in use/i.test(errorMessage(e))) {
          this.ctx.logger.warn(
            { engineId: s.engineId },
            'port taken before the engine bound it; relaunching',
          );
          await engine.shutdown(2_000).catch(() => undefined);
          continue;
        }
        throw e;
      }
      up = true;
      await this.ctx.weights.readVersion(s);
      this.ctx.recovery.launched(s);
      this.ctx.residency.launched(s);
      this.ctx.records?.launched(s);
      return;
    }
  }

  /** Unregisters router workers, stops owned engines (never external ones), deletes the PGs this manager
   * created, publishes every replica dead. The health loop and recoveries have stopped before. */
  async shutdown(): Promise<void> {
    const { replicas } = this.ctx;
    const slots = replicas.all();
    await this.ctx.routers.removeAll(slots);
    for (const s of slots) replicas.invalidate(s);
    await Promise.allSettled(slots.map((s) => s.engine?.shutdown(5_000)));
    // A clean stop stops every engine, adoption mode included: the next start launches a new set.
    for (const s of slots) this.ctx.records?.forget(s.engineId);
    for (const s of slots) if (s.state !== 'dead') replicas.setState(s, 'dead');
    await this.removePgs([...this.#createdPgs].reverse(), 'shutdown');
    this.#createdPgs.length = 0;
    this.ctx.publication.publish();
  }
}
