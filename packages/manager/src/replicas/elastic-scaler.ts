import { placeReservedReplicas } from '@uis/planner';
import { type GroupPlacement, type Logger, type PoolPlan, UisError } from '@uis/spec';
import type { InFlightTracker } from '../in-flight.ts';
import { errorMessage } from '../runtime.ts';
import type { Incarnations } from './incarnations.ts';
import type { ResolvedManagerOptions } from './init.ts';
import type { PublicationProjector } from './publication.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { Residency } from './residency.ts';
import type { RouterSync } from './router-sync.ts';
import type { Audit, ModelRuntime, Slot } from './types.ts';
import type { WeightSync } from './weight-sync.ts';

/** Elastic scale of a model: new replicas on the bundles its plan reserved (placed by the planner's rules),
 * or the newest replicas retired (drained, stopped, removed). Every step is published. */
export class ElasticScaler {
  constructor(
    /** This role's groups of the placement plan (a model's placeholder groups are its reserved bundles). */
    private readonly placements: readonly GroupPlacement[],
    private readonly pools: Record<string, PoolPlan>,
    private readonly replicas: ReplicaTable,
    private readonly incarnations: Incarnations,
    private readonly weights: WeightSync,
    private readonly residency: Residency,
    private readonly routers: RouterSync,
    private readonly publication: PublicationProjector,
    private readonly inFlight: InFlightTracker,
    private readonly opts: Pick<ResolvedManagerOptions, 'drainDeadlineMs' | 'drainPolicy'>,
    private readonly logger: Logger,
    private readonly audit: Audit,
  ) {}

  async scale(m: ModelRuntime, n: number): Promise<{ model: string; replicas: number }> {
    const live = this.replicas
      .slotsOf(m.spec.name)
      .filter((s) => !s.external && s.replica.worker_type === 'regular');
    if (n < live.length) {
      const victims = [...live].sort((a, b) => b.index - a.index).slice(0, live.length - n);
      for (const s of victims) await this.retire(s, 'scaled down');
    } else if (n > live.length) {
      await this.grow(m, live, n);
    }
    this.audit('admin.scale', m.spec.name, { replicas: n });
    return { model: m.spec.name, replicas: n };
  }

  private async grow(m: ModelRuntime, live: Slot[], n: number): Promise<void> {
    const { replicas, incarnations, placements } = this;
    const name = m.spec.name;
    const groupIndex =
      live[0]?.replica.group ?? m.spec.engine_groups.findIndex((g) => g.worker_type === 'regular');
    const group = m.spec.engine_groups[groupIndex];
    const base = placements.find((p) => p.model === name && p.group === groupIndex);
    if (!group || !base)
      throw new UisError({
        code: 'no_regular_group',
        message: `model ${name} has no regular engine group`,
      });
    const placed = placeReservedReplicas({
      model: name,
      base,
      group: groupIndex,
      gpusPerEngine: group.gpus_per_engine,
      reserved: placements
        .filter((p) => p.model === name && p.worker_type === 'placeholder')
        .flatMap((p) => p.bundle_indices),
      used: new Set(replicas.all().flatMap((s) => s.replica.nodes.flatMap((x) => x.bundle_indices))),
      firstIndex: replicas.nextIndex(name),
      count: n - live.length,
      pool: this.pools[base.pool],
    });
    if (!placed.ok) throw new UisError({ code: placed.code, path: placed.path, message: placed.message });
    const added = placed.replicas.map((r) => replicas.add(m.spec, group, base, r, { elastic: true }));
    this.publication.publish();
    const results = await Promise.allSettled(added.map((s) => incarnations.launch(s)));
    const failed: string[] = [];
    results.forEach((r, i) => {
      const s = added[i] as Slot;
      if (r.status === 'rejected') {
        failed.push(`${s.engineId}: ${errorMessage(r.reason)}`);
        replicas.remove(s);
        s.engine?.shutdown(2_000).catch((e: unknown) => {
          this.logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'could not stop failed replica');
        });
      }
    });
    for (const s of added.filter((x) => replicas.has(x))) {
      await this.weights.sync(s, m).catch(() => undefined);
      await this.residency.readyOrAsleep(s, m);
    }
    await this.routers.sync();
    this.publication.publish();
    if (failed.length > 0)
      throw new UisError({
        code: 'scale_failed',
        message: `scale up failed: ${failed.join('; ')}`,
      });
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
