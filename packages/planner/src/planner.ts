import {
  configuredRoles,
  type DeploymentMode,
  type PlanResult,
  type PlanViolation,
  type UisConfig,
} from '@uis/spec';
import { planMemory } from './defer-order.ts';
import { placeGroups } from './group-placement.ts';
import { Inventory } from './inventory.ts';
import { type Fail, isColocated, type PlanCtx, type PlannedGroup, type PoolState } from './plan-parts.ts';
import { bindSites, createPools, reserveTraining } from './pool-sites.ts';
import { checkRayBudget, reserveRay } from './ray-reservations.ts';
import { checkNodes, checkRoleRules, planSchedule } from './schedule-rules.ts';

export { RAY_GPU_FRACTION } from './plan-parts.ts';

/** Pure placement: (config) -> the plan, or every violation at once, each with a stable code and a path. */
export class PlacementPlanner {
  plan(config: UisConfig): PlanResult {
    return planPlacement(config);
  }
}

/** The stages in order, each reporting into one list of violations: nodes, schedule, role rules, pools and their
 * GPU sites, training reservations, groups and replicas, overlaps of resident slices, Ray reservations. */
export function planPlacement(config: UisConfig): PlanResult {
  const errors: PlanViolation[] = [];
  const fail: Fail = (code, path, message) => {
    errors.push({ code, path, message });
  };
  const ctx: PlanCtx = {
    config,
    inv: new Inventory(config.cluster),
    roles: configuredRoles(config).filter(({ spec }) => spec.external_engine_urls === undefined),
    fail,
  };
  const { roles } = ctx;
  const anyColocated = roles.some(({ spec }) => isColocated(spec.deployment.mode));
  checkNodes(ctx);
  const { residency, activation_groups } = planSchedule(ctx);
  checkRoleRules(ctx, residency);
  const { pools, slices, criticShares } = createPools(ctx, anyColocated);
  bindSites(ctx, pools);
  reserveTraining(ctx, pools, criticShares);
  const { planned, placements } = placeGroups(ctx, pools, residency, slices);
  checkOverlaps(planned, pools, fail);
  reserveRay(ctx, planned, pools);
  checkRayBudget(ctx, pools);

  if (errors.length > 0) return { ok: false, errors };
  const poolPlans = Object.fromEntries([...pools].map(([k, v]) => [k, v.plan]));
  // Memory last: it reads the placed bundles, and a layout already wrong needs no byte counts.
  const memory = planMemory(config, { pools: poolPlans, placements, activation_groups }, fail);
  if (errors.length > 0) return { ok: false, errors };
  const modes = roles.map(({ spec }) => spec.deployment.mode);
  const mode: DeploymentMode = modes.includes('colocated_defer')
    ? 'colocated_defer'
    : modes.includes('colocated_split')
      ? 'colocated_split'
      : 'decoupled';
  return {
    ok: true,
    plan: {
      mode,
      pools: poolPlans,
      placements: memory.placements,
      activation_groups: memory.activation_groups,
      memory: memory.memory,
    },
  };
}

/** The job's GPU total: every pool of the plan (Relax's total_required_gpus). */
export function planTotalGpus(plan: { pools: Record<string, { size: number }> }): number {
  return Object.values(plan.pools).reduce((s, p) => s + p.size, 0);
}

/** Slices that are resident at the same time must not share a bundle: phase-less colocated slices are resident
 * in every phase; phased slices only in their phase. */
function checkOverlaps(
  planned: readonly PlannedGroup[],
  pools: ReadonlyMap<string, PoolState>,
  fail: Fail,
): void {
  for (const [name, pool] of pools) {
    const inPool = planned.filter((p) => p.pool === name && p.stop <= pool.plan.size && !p.unscheduled);
    const always = new Int32Array(pool.plan.size).fill(-1);
    const byPhase = new Map<string, Int32Array>();
    const claim = (occ: Int32Array, idx: number, pg: PlannedGroup, other?: Int32Array): boolean => {
      for (let b = pg.start; b < pg.stop; b++) {
        const prev = occ[b] ?? -1;
        const prev2 = other ? (other[b] ?? -1) : -1;
        const hit = prev >= 0 ? prev : prev2;
        if (hit >= 0) {
          const o = planned[hit];
          const both = o?.role === pg.role ? 'bundle_offset' : 'bundle_offset of one role';
          fail(
            'split_overlap',
            pg.path,
            `bundles ${pg.start}..${pg.stop - 1} overlap ${o?.path} at bundle ${b} while both are resident; change ${both} or put one in another phase`,
          );
          return false;
        }
      }
      occ.fill(idx, pg.start, pg.stop);
      return true;
    };
    for (const pg of inPool) if (pg.phase === null) claim(always, planned.indexOf(pg), pg);
    for (const pg of inPool) {
      if (pg.phase === null) continue;
      let occ = byPhase.get(pg.phase);
      if (!occ) {
        occ = new Int32Array(pool.plan.size).fill(-1);
        byPhase.set(pg.phase, occ);
      }
      claim(occ, planned.indexOf(pg), pg, always);
    }
  }
}
