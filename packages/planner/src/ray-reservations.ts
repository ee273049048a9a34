import { type ConfigRole, ROLE_CAPABILITIES } from '@uis/spec';
import { EPS, type PlanCtx, type PlannedGroup, type PoolState, round } from './plan-parts.ts';
import { reserve } from './pool-sites.ts';

/** Ray reservations: one engine actor per node of each engine, on the first bundle of its node part. */
export function reserveRay(
  { config }: PlanCtx,
  planned: readonly PlannedGroup[],
  pools: Map<string, PoolState>,
): void {
  for (const pg of planned) {
    const p = pg.placement;
    const pool = pools.get(pg.pool);
    if (!p || !pool || p.worker_type === 'placeholder') continue;
    const spec = config.roles[pg.role] as ConfigRole;
    const g = spec.models.find((m) => m.name === p.model)?.engine_groups[p.group];
    const capabilities = ROLE_CAPABILITIES[pg.role];
    const besideProducer = planned.some(
      (o) =>
        ROLE_CAPABILITIES[o.role].producesSamples &&
        o !== pg &&
        o.pool === pg.pool &&
        o.start < pg.stop &&
        pg.start < o.stop,
    );
    let fraction: number = besideProducer
      ? capabilities.rayGpuFractionBesideProducer
      : capabilities.rayGpuFraction;
    fraction = g?.ray_num_gpus ?? fraction;
    p.ray_num_gpus = fraction;
    for (const r of p.replicas)
      for (const n of r.nodes)
        reserve(
          pool,
          n.bundle_indices[0] ?? 0,
          (n.bundle_indices[0] ?? 0) + 1,
          `${pg.role}/${p.model}`,
          fraction,
          `${pg.path}.ray_num_gpus`,
        );
  }
}

/** Fractional Ray GPU reservations per bundle never exceed 1 (one violation per pool names what to change). */
export function checkRayBudget({ fail }: PlanCtx, pools: Map<string, PoolState>): void {
  for (const pool of pools.values()) {
    for (let i = 0; i < pool.reserved.length; i++) {
      const total = pool.reserved[i] ?? 0;
      if (total > 1 + EPS) {
        const holders = pool.claims.filter((c) => c.from <= i && i < c.to);
        // Name the claim that tipped the bundle over: that is the knob to turn.
        fail(
          'ray_gpu_oversubscribed',
          holders[holders.length - 1]?.path ?? `pools.${pool.plan.name}`,
          `Ray GPU reservations on bundle ${pool.plan.name}[${i}] sum to ${round(total)} > 1 (${holders.map((h) => `${h.who}=${h.fraction}`).join(', ')}); offloading does not release them: lower a ray_num_gpus or move a role to its own pool`,
        );
        break; // one bundle per pool is enough to say what to change
      }
    }
  }
}
