import {
  type ActivationGroupPlan,
  DEFAULT_GPU_TYPE,
  type GroupMemoryPlan,
  type GroupPlacement,
  type PlacementPlan,
  SCORER_ROLES,
  type SchedulePrediction,
  type UisConfig,
} from '@uis/spec';
import {
  isMisfit,
  type MemGroup,
  memGroup,
  misfitMessage,
  type PhaseDef,
  poolGpus,
  poolItems,
  predictSchedule,
} from './memory-model.ts';
import type { Fail } from './plan-parts.ts';

/** The memory stage of the planner: every activation group's residency and switches in its configured order and
 * in the best order the planner finds (the deferred scorer phases permuted, neighbours merged when their residents
 * fit together), a violation for a phase that cannot fit, and with `schedule.defer.order: optimized` the plan's
 * phases rewritten to the best order. Pools no group shares are checked to fit as well. */

const isScorerPhase = (p: PhaseDef) =>
  p.residents.every((r) => (SCORER_ROLES as readonly string[]).includes(r));

function permutations<T>(xs: readonly T[]): T[][] {
  if (xs.length <= 1) return [[...xs]];
  return xs.flatMap((x, i) =>
    permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((rest) => [x, ...rest]),
  );
}

/** Every split of `xs` into consecutive non-empty blocks. */
function compositions<T>(xs: readonly T[]): T[][][] {
  if (xs.length === 0) return [[]];
  const out: T[][][] = [];
  for (let k = 1; k <= xs.length; k++)
    for (const rest of compositions(xs.slice(k))) out.push([xs.slice(0, k), ...rest]);
  return out;
}

const merged = (block: readonly PhaseDef[]): PhaseDef => ({
  name: block.map((p) => p.name).join('+'),
  residents: block.flatMap((p) => p.residents),
});

/** Orders to consider: each maximal run of scorer-only phases permuted and split into merged blocks. The
 * configured order comes first (identity permutation, one phase per block), so it wins a tie. */
export function orderCandidates(phases: readonly PhaseDef[]): PhaseDef[][] {
  const segments: PhaseDef[][][] = [];
  let i = 0;
  while (i < phases.length) {
    const p = phases[i] as PhaseDef;
    if (!isScorerPhase(p)) {
      segments.push([[p]]);
      i++;
      continue;
    }
    let j = i;
    while (j < phases.length && isScorerPhase(phases[j] as PhaseDef)) j++;
    const run = phases.slice(i, j);
    segments.push(permutations(run).flatMap((perm) => compositions(perm).map((c) => c.map(merged))));
    i = j;
  }
  return segments.reduce<PhaseDef[][]>(
    (acc, alts) => acc.flatMap((base) => alts.map((a) => [...base, ...a])),
    [[]],
  );
}

/** The cheapest order that fits (the configured one on a tie). */
function bestOrder(
  g: MemGroup,
  phases: readonly PhaseDef[],
  configured: SchedulePrediction,
): { phases: PhaseDef[]; prediction: SchedulePrediction } {
  let best = { phases: [...phases], prediction: configured };
  for (const cand of orderCandidates(phases).slice(1)) {
    const p = predictSchedule(g, cand);
    if (!isMisfit(p) && p.bubble_s < best.prediction.bubble_s) best = { phases: cand, prediction: p };
  }
  return best;
}

export interface MemoryStage {
  memory: GroupMemoryPlan[];
  activation_groups: ActivationGroupPlan[];
  placements: GroupPlacement[];
}

export function planMemory(
  config: UisConfig,
  plan: Pick<PlacementPlan, 'pools' | 'placements' | 'activation_groups'>,
  fail: Fail,
): MemoryStage {
  const memory: GroupMemoryPlan[] = [];
  let { activation_groups, placements } = plan;
  const order = config.schedule.defer?.order ?? 'configured';
  checkGpuTypes(config, fail);
  plan.activation_groups.forEach((group, gi) => {
    const g = memGroup(config, plan, group);
    if (g === null) return;
    const configured = predictSchedule(g, group.phases);
    if (isMisfit(configured)) {
      const phase = group.phases[configured.phase]?.name ?? '';
      fail(
        'memory_exceeded',
        `schedule.activation_groups[${gi}].phases[${configured.phase}]`,
        misfitMessage(g, phase, configured),
      );
      return;
    }
    const best = bestOrder(g, group.phases, configured);
    memory.push({
      group: group.name,
      order,
      configured,
      optimized: best.prediction,
      release_all: predictSchedule(g, group.phases, { releaseAll: true }) as SchedulePrediction,
      unsized: [...new Set(g.items.filter((it) => it.bytes === null).map((it) => it.model))],
    });
    if (order !== 'optimized' || best.prediction === configured) return;
    const phaseOf = new Map(best.phases.flatMap((p) => p.residents.map((r) => [r, p.name] as const)));
    activation_groups = activation_groups.map((a) =>
      a.name === group.name ? { ...a, phases: best.phases } : a,
    );
    placements = placements.map((p) =>
      p.pool === group.pool && p.phase !== null && phaseOf.has(p.role)
        ? { ...p, phase: phaseOf.get(p.role) ?? p.phase }
        : p,
    );
  });
  checkUnsharedPools(config, plan, fail);
  return { memory, activation_groups, placements: withGpuTypes(config, plan, placements) };
}

/** A pool no activation group shares holds all its models at once: every GPU must hold them. */
function checkUnsharedPools(
  config: UisConfig,
  plan: Pick<PlacementPlan, 'pools' | 'placements' | 'activation_groups'>,
  fail: Fail,
): void {
  const shared = new Set(plan.activation_groups.map((g) => g.pool));
  for (const [name, pool] of Object.entries(plan.pools)) {
    if (shared.has(name)) continue;
    const gpus = poolGpus(config, pool.bundles);
    const items = poolItems(
      config,
      plan.placements.filter((p) => p.pool === name),
      gpus,
    );
    const g: MemGroup = {
      items: items.map((it) => ({ ...it, always: true })),
      gpus,
      trainer: new Float64Array(gpus.capacity.length),
    };
    const p = predictSchedule(g, [{ name, residents: [] }]);
    if (!isMisfit(p)) continue;
    const item = g.items.find((it) => it.bytes !== null && it.gpus.includes(p.gpu));
    fail(
      'memory_exceeded',
      `${item?.path ?? `pools.${name}`}.memory`,
      misfitMessage(g, name, p).replace(` phase "${name}"`, ` of pool ${name}`),
    );
  }
}

function checkGpuTypes(config: UisConfig, fail: Fail): void {
  const known = [DEFAULT_GPU_TYPE, ...Object.keys(config.cluster.gpu_types ?? {})];
  config.cluster.nodes.forEach((n, i) => {
    if (n.gpu_type !== undefined && !known.includes(n.gpu_type))
      fail(
        'unknown_gpu_type',
        `cluster.nodes[${i}].gpu_type`,
        `GPU type "${n.gpu_type}" is not defined; use ${[...new Set(known)].join(', ')} or define it under cluster.gpu_types`,
      );
  });
}

/** Names each group's GPU type when the config names types (the simulator sizes its engines by it). */
function withGpuTypes(
  config: UisConfig,
  plan: Pick<PlacementPlan, 'pools'>,
  placements: GroupPlacement[],
): GroupPlacement[] {
  if (config.cluster.gpu_types === undefined && config.cluster.nodes.every((n) => n.gpu_type === undefined))
    return placements;
  return placements.map((p) => {
    const bundles = plan.pools[p.pool]?.bundles ?? [];
    const type = poolGpus(config, bundles).types[p.bundle_indices[0] ?? 0];
    return type === undefined ? p : { ...p, gpu_type: type };
  });
}
