import { placeReservedReplicas } from '@uis/planner';
import { type GroupPlacement, type Logger, type PoolPlan, UisError } from '@uis/spec';
import type { InFlightTracker } from '../in-flight.ts';
import { errorMessage } from '../runtime.ts';
import type { ExternalEngines } from './external-engines.ts';
import type { Incarnations } from './incarnations.ts';
import type { ResolvedManagerOptions } from './init.ts';
import { precheckReplica } from './precheck.ts';
import type { PublicationProjector } from './publication.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { Residency } from './residency.ts';
import type { RouterSync } from './router-sync.ts';
import type { Audit, ModelRuntime, Slot } from './types.ts';
import type { WeightSync } from './weight-sync.ts';

/** The steps of a scale operation the scaler reports as it reaches them (Relax's state names). */
export type ScaleStep =
  | 'CREATING'
  | 'CONNECTING'
  | 'HEALTH_CHECKING'
  | 'WEIGHT_SYNCING'
  | 'READY'
  | 'DRAINING'
  | 'REMOVING';

export interface ScaleControl {
  /** Cancels the operation between steps and any engine start in flight; what it added is rolled back. */
  signal?: AbortSignal;
  /** Told each step as it starts, with the engines it concerns. */
  onStep?: (step: ScaleStep, engineIds: string[]) => void;
  /** Relax's `keep_partial` (scale-out): a replica that fails a step is removed alone and the others go on; the
   * operation fails only when none is left. Default `rollback_all`: one failure removes every replica it added. A
   * cancel or a timeout removes them all either way. */
  keepPartial?: boolean;
}

/** What a scale-out asks: an absolute count of regular replicas, or engines to attach by URL. */
export type ScaleOutRequest = { target: number } | { urls: string[] };
/** What a scale-in asks: an absolute count to keep, or the engines to remove by URL; `force` may take initial
 * replicas. */
export type ScaleInRequest = ({ target: number } | { urls: string[] }) & { force: boolean };

export interface ScaleOutResult {
  added: string[];
  weight_version: string | null;
  /** Replicas that failed and were removed while the others joined (`keepPartial`). */
  failed: ScaleFailure[];
}

/** A failure of one replica of a scale operation. */
export interface ScaleFailure {
  engine_id: string;
  error: string;
}

/**
 * Elastic scale of a model. Scale-out: new replicas on the bundles its plan reserved (placed by the planner's
 * rules) or engines attached by URL, each launched, prechecked (fail-closed) and synced to the model's weight
 * version while hidden from discovery, then all made eligible in one topology revision; any failure or a cancel
 * removes every replica it added (Relax's `rollback_all`). Scale-in: LIFO victims (scaled-out replicas first, the
 * plan's own only when forced), published draining in one revision, drained, stopped and removed.
 */
export class ElasticScaler {
  constructor(
    /** This role's groups of the placement plan (a model's placeholder groups are its reserved bundles). */
    private readonly placements: readonly GroupPlacement[],
    private readonly pools: Record<string, PoolPlan>,
    private readonly replicas: ReplicaTable,
    private readonly incarnations: Incarnations,
    private readonly externals: ExternalEngines,
    private readonly weights: WeightSync,
    private readonly residency: Residency,
    private readonly routers: RouterSync,
    private readonly publication: PublicationProjector,
    private readonly inFlight: InFlightTracker,
    private readonly opts: Pick<ResolvedManagerOptions, 'drainDeadlineMs' | 'drainPolicy'>,
    private readonly logger: Logger,
    private readonly audit: Audit,
  ) {}

  /** The replicas a scale counts: regular ones that joined (launched or attached). */
  members(model: string): Slot[] {
    return this.replicas
      .slotsOf(model)
      .filter((s) => !s.joining && s.replica.worker_type === 'regular' && s.state !== 'dead');
  }

  /** Places `count` more replicas of `m` on its reserved bundles (nothing is added): the planner's answer, or its
   * refusal as a UisError. */
  place(m: ModelRuntime, count: number) {
    const name = m.spec.name;
    const live = this.replicas.slotsOf(name).filter((s) => !s.external);
    const groupIndex =
      live[0]?.replica.group ?? m.spec.engine_groups.findIndex((g) => g.worker_type === 'regular');
    const group = m.spec.engine_groups[groupIndex];
    const base = this.placements.find((p) => p.model === name && p.group === groupIndex);
    if (!group || !base)
      throw new UisError({ code: 'no_regular_group', message: `model ${name} has no regular engine group` });
    const placed = placeReservedReplicas({
      model: name,
      base,
      group: groupIndex,
      gpusPerEngine: group.gpus_per_engine,
      reserved: this.placements
        .filter((p) => p.model === name && p.worker_type === 'placeholder')
        .flatMap((p) => p.bundle_indices),
      used: new Set(this.replicas.all().flatMap((s) => s.replica.nodes.flatMap((x) => x.bundle_indices))),
      firstIndex: this.replicas.nextIndex(name),
      count,
      pool: this.pools[base.pool],
    });
    if (!placed.ok) {
      const [first] = placed.errors;
      throw new UisError({
        code: first?.code ?? 'invalid_layout',
        path: first?.path,
        message: placed.errors.map((e) => `${e.path}: ${e.message}`).join('; '),
        details: placed.errors,
      });
    }
    return { group, base, replicas: placed.replicas };
  }

  async scaleOut(m: ModelRuntime, req: ScaleOutRequest, ctl: ScaleControl = {}): Promise<ScaleOutResult> {
    const name = m.spec.name;
    let added: Slot[];
    if ('target' in req) {
      const count = req.target - this.members(name).length;
      if (count <= 0) return { added: [], weight_version: m.target, failed: [] };
      const placed = this.place(m, count);
      added = placed.replicas.map((r) =>
        this.replicas.add(m.spec, placed.group, placed.base, r, { elastic: true }),
      );
    } else {
      const known = new Set(this.replicas.all().map((s) => s.baseUrl));
      added = [];
      // One at a time: each takes the next replica index.
      for (const u of req.urls.filter((x) => !known.has(x)))
        added.push(await this.externals.prepare(m, u, { elastic: true }));
    }
    if (added.length === 0) return { added: [], weight_version: m.target, failed: [] };
    for (const s of added) s.joining = true;
    const failed: ScaleFailure[] = [];
    try {
      await this.join(m, added, 'target' in req ? 'CREATING' : 'CONNECTING', ctl, failed);
    } catch (e) {
      await this.rollback(added);
      throw e;
    }
    const ids = added.map((s) => s.engineId);
    this.audit('admin.scale_out', name, { added: ids, weight_version: m.target, failed });
    return { added: ids, weight_version: m.target, failed };
  }

  /** Launch (or connect), precheck and sync every replica, then make them eligible at once. With `keepPartial`,
   * the replicas that fail a step leave `added` (rolled back, noted in `failed`) and the rest go on. */
  private async join(
    m: ModelRuntime,
    added: Slot[],
    first: ScaleStep,
    ctl: ScaleControl,
    failed: ScaleFailure[],
  ): Promise<void> {
    const step = (st: ScaleStep) => {
      ctl.signal?.throwIfAborted();
      ctl.onStep?.(
        st,
        added.map((s) => s.engineId),
      );
    };
    const every = (f: (s: Slot) => Promise<void>) =>
      this.everyOne(added, f, ctl.keepPartial === true, failed);
    step(first);
    await every((s) => this.incarnations.launch(s, ctl.signal));
    step('HEALTH_CHECKING');
    await every((s) => precheckReplica(this.replicas, s, m, this.opts.drainPolicy, ctl.signal));
    step('WEIGHT_SYNCING');
    await every(async (s) => {
      await this.weights.sync(s, m);
      // Unlike Relax, a replica never joins below its model's version: a version it cannot reach fails it.
      if (!this.replicas.versionOk(s))
        throw new UisError({
          code: 'scale_failed',
          path: s.engineId,
          message: `${s.engineId} is at weight version ${s.weightVersion ?? 'none'}, the model at ${m.target}${
            m.replay ? '' : ' (its last update came from the trainer and cannot be replayed)'
          }`,
        });
    });
    step('READY');
    for (const s of added) {
      s.joining = false;
      this.replicas.setState(s, 'ready');
    }
    await this.routers.sync();
    this.publication.publish();
    // A model asleep (another phase holds its GPUs) takes the new replicas to sleep with it.
    if (m.desire === 'sleeping') for (const s of added) await this.residency.readyOrAsleep(s, m);
  }

  /** Runs `f` on every slot; after all settled, throws `scale_failed` naming each one that failed (every failure
   * so far with `keepPartial` when none is left); with `keepPartial` and some left, the failed ones are rolled back
   * and taken out of `slots` instead. */
  private async everyOne(
    slots: Slot[],
    f: (s: Slot) => Promise<void>,
    keepPartial: boolean,
    failed: ScaleFailure[],
  ): Promise<void> {
    const results = await Promise.allSettled(slots.map(f));
    const bad: Slot[] = [];
    results.forEach((r, i) => {
      if (r.status === 'rejected') {
        bad.push(slots[i] as Slot);
        failed.push({ engine_id: (slots[i] as Slot).engineId, error: errorMessage(r.reason) });
      }
    });
    if (bad.length === 0) return;
    if (!keepPartial || bad.length === slots.length)
      throw new UisError({
        code: 'scale_failed',
        message: failed.map((x) => `${x.engine_id}: ${x.error}`).join('; '),
        details: { engines: failed },
      });
    await this.rollback(bad);
    for (const s of bad) slots.splice(slots.indexOf(s), 1);
  }

  /** Removes what a failed or cancelled scale-out added: no engine of it is left running. */
  private async rollback(added: Slot[]): Promise<void> {
    for (const s of added) this.replicas.remove(s);
    await Promise.allSettled(
      added.map((s) =>
        s.engine?.shutdown(5_000).catch((e: unknown) => {
          this.logger.error(
            { engineId: s.engineId, err: errorMessage(e) },
            'could not stop a rolled-back replica',
          );
        }),
      ),
    );
    await this.routers.sync();
    this.publication.publish();
    this.audit('scale.rolled_back', added[0]?.model ?? '', { engines: added.map((s) => s.engineId) });
  }

  /** The replicas a scale-in takes, newest first: scaled-out ones, then (forced only) the plan's own. Refuses a
   * request that needs an initial replica without `force` (400), or names an engine the model does not have. */
  victims(m: ModelRuntime, req: ScaleInRequest): Slot[] {
    const members = this.members(m.spec.name);
    const lifo = [...members].sort((a, b) => Number(b.elastic) - Number(a.elastic) || b.index - a.index);
    let chosen: Slot[];
    if ('target' in req) {
      chosen = lifo.slice(0, Math.max(0, members.length - req.target));
    } else {
      chosen = req.urls.map((u, i) => {
        const s = members.find((x) => x.baseUrl === u);
        if (!s)
          throw new UisError({
            code: 'unknown_engine',
            path: `engine_urls[${i}]`,
            message: `model ${m.spec.name} has no replica at ${u}`,
          });
        return s;
      });
    }
    const initial = chosen.filter((s) => !s.elastic);
    if (initial.length > 0 && !req.force)
      throw new UisError({
        code: 'scale_in_protected',
        path: 'target' in req ? 'num_replicas' : 'engine_urls',
        message: `scale-in of ${m.spec.name} would remove initial replicas ${initial.map((s) => s.engineId).join(', ')} (${
          members.filter((s) => !s.elastic).length
        } started with the plan); keep at least that many or pass force`,
      });
    return chosen;
  }

  /** Publishes the victims draining (one revision), drains them (in-flight work finishes or is aborted at the
   * deadline), stops and removes them (one revision). Removal is not rolled back; failures are returned. */
  async scaleIn(victims: Slot[], drain: { deadlineMs: number; force: boolean }, ctl: ScaleControl = {}) {
    const ids = victims.map((s) => s.engineId);
    ctl.onStep?.('DRAINING', ids);
    for (const s of victims)
      if (s.state === 'ready' || s.state === 'onloading') this.replicas.setState(s, 'draining');
    await this.routers.sync();
    this.publication.publish();
    const failed: ScaleFailure[] = [];
    await Promise.all(
      victims
        .filter((s) => s.state === 'draining')
        .map(async (s) => {
          try {
            await this.replicas.engineOf(s).drain({
              deadlineMs: drain.force ? 0 : drain.deadlineMs,
              policy: drain.force ? 'abort' : this.opts.drainPolicy,
              inFlight: () => this.inFlight.count(s.engineId),
            });
          } catch (e) {
            this.logger.warn({ engineId: s.engineId, err: errorMessage(e) }, 'drain before removal failed');
          }
        }),
    );
    ctl.onStep?.('REMOVING', ids);
    for (const s of victims) this.replicas.remove(s);
    await Promise.all(
      victims.map((s) =>
        s.engine?.shutdown(5_000).catch((e: unknown) => {
          failed.push({ engine_id: s.engineId, error: errorMessage(e) });
        }),
      ),
    );
    await this.routers.sync();
    this.publication.publish();
    for (const s of victims) this.audit('replica.removed', s.engineId, { reason: 'scaled in' });
    return { removed: ids, failed };
  }

  /** Drain one replica (published), stop it (unless external), remove it, publish. */
  async retire(s: Slot, reason: string): Promise<void> {
    const { replicas, opts } = this;
    if (s.state === 'ready' || s.state === 'onloading') replicas.setState(s, 'draining');
    await this.routers.sync();
    this.publication.publish();
    if (s.state === 'draining') {
      try {
        await replicas.engineOf(s).drain({
          deadlineMs: opts.drainDeadlineMs,
          policy: opts.drainPolicy,
          inFlight: () => this.inFlight.count(s.engineId),
        });
      } catch (e) {
        this.logger.warn({ engineId: s.engineId, err: errorMessage(e) }, 'drain before removal failed');
      }
    }
    replicas.remove(s);
    await s.engine?.shutdown(5_000);
    await this.routers.sync();
    this.publication.publish();
    this.audit('replica.removed', s.engineId, { reason });
  }
}
