import {
  type ConfigRole,
  type EngineGroupSpec,
  engineId,
  type GroupPlacement,
  groupTp,
  type ReplicaPlacement,
  type Role,
  serverArgIssue,
} from '@uis/spec';
import { checkEngineSites } from './engine-sites.ts';
import type { BundleSite } from './inventory.ts';
import {
  ACTOR_POOL,
  type Fail,
  isColocated,
  type PlanCtx,
  type PlannedGroup,
  type PoolState,
  type Residency,
  range,
} from './plan-parts.ts';

/** Every engine group of every role: its bundle range in its pool, checked, with its replicas and nodes. */
export function placeGroups(
  ctx: PlanCtx,
  pools: Map<string, PoolState>,
  residency: Residency,
  slices: Map<Role, { start: number; size: number }>,
): { planned: PlannedGroup[]; placements: GroupPlacement[] } {
  const planned: PlannedGroup[] = [];
  const placements: GroupPlacement[] = [];
  for (const { role, spec } of ctx.roles) {
    const mode = spec.deployment.mode;
    const poolName = isColocated(mode) || mode === 'shared_coresident' ? ACTOR_POOL : role;
    let start = slices.get(role)?.start ?? 0;
    spec.models.forEach((model, mi) => {
      const mpath = `roles.${role}.models[${mi}]`;
      checkWorkerMix(model.engine_groups, `${mpath}.engine_groups`, ctx.fail);
      const counter = { next: 0 };
      model.engine_groups.forEach((g, gi) => {
        const at = { role, spec, poolName, pool: pools.get(poolName), where: residency.get(role) };
        const pg = placeGroup(ctx, at, { model: model.name, mpath, g, gi, groupStart: start, counter });
        start += g.num_gpus;
        planned.push(pg);
        if (pg.placement) placements.push(pg.placement);
      });
    });
  }
  return { planned, placements };
}

interface GroupSite {
  role: Role;
  spec: ConfigRole;
  poolName: string;
  pool: PoolState | undefined;
  where: ReturnType<Residency['get']>;
}

interface GroupRef {
  model: string;
  mpath: string;
  g: EngineGroupSpec;
  gi: number;
  groupStart: number;
  /** The model's next replica index (counted across its groups). */
  counter: { next: number };
}

function placeGroup(
  { inv, fail }: PlanCtx,
  { role, spec, poolName, pool, where }: GroupSite,
  { model, mpath, g, gi, groupStart, counter }: GroupRef,
): PlannedGroup {
  const mode = spec.deployment.mode;
  const path = `${mpath}.engine_groups[${gi}]`;
  for (const key of Object.keys(g.server_args)) {
    const issue = serverArgIssue(key);
    if (issue) fail(issue.code, `${path}.server_args.${key}`, issue.message);
  }
  const ok = checkGroupShape(g, path, inv.uniform, fail);
  const pg: PlannedGroup = {
    role,
    path,
    start: groupStart,
    stop: groupStart + g.num_gpus,
    pool: poolName,
    phase: where?.phase ?? null,
    // An unscheduled deferred role is already an error; its residency is unknown, so no overlap is claimed.
    unscheduled: mode === 'colocated_defer' && !where,
    placement: undefined,
  };
  if (!pool || mode === 'shared_coresident') return pg;
  if (pg.stop > pool.plan.size) {
    fail(
      'pool_capacity_exceeded',
      `${path}.num_gpus`,
      `bundles ${groupStart}..${pg.stop - 1} do not fit the ${poolName} pool of ${pool.plan.size}; shrink the group or grow the pool${poolName === ACTOR_POOL ? ' (training.actor_gpus)' : ''}`,
    );
    return pg;
  }
  const tp = groupTp(g);
  const bundleIndices = range(groupStart, pg.stop);
  const engines = ok ? placeEngines({ inv, fail }, pool, { model, g, gi, groupStart, counter, path }) : null;
  if (!engines) return pg;
  const { replicas, nodesPerEngine } = engines;
  pg.placement = {
    role,
    model,
    group: gi,
    worker_type: g.worker_type,
    num_gpus: g.num_gpus,
    gpus_per_engine: g.gpus_per_engine,
    tp,
    pp: g.pp,
    dp: g.dp,
    ep: g.ep,
    bundle_start: groupStart,
    bundle_stop: pg.stop,
    bundle_indices: bundleIndices,
    gpu_ids: bundleIndices.map((b) => {
      const s = pool.sites[b];
      return s ? inv.global(s) : -1;
    }),
    replicas,
    nodes_per_engine: nodesPerEngine,
    pool: poolName,
    owner: pool.plan.owner,
    deleted_by: pool.plan.deleted_by,
    activation_group: where?.group ?? spec.deployment.activation_group ?? null,
    phase: where?.phase ?? spec.deployment.activation_phase ?? null,
    deferred: mode === 'colocated_defer',
    ray_num_gpus: 0,
    offload: isColocated(mode),
  };
  return pg;
}

/** The replicas of one group, engine by engine, each checked with the engine-site rule; null after the first
 * violation (reported) or a missing site (capacity or binding errors already say why). */
function placeEngines(
  { inv, fail }: Pick<PlanCtx, 'inv' | 'fail'>,
  pool: PoolState,
  { model, g, gi, groupStart, counter, path }: Omit<GroupRef, 'mpath'> & { path: string },
): { replicas: ReplicaPlacement[]; nodesPerEngine: number } | null {
  const replicas: ReplicaPlacement[] = [];
  let nodesPerEngine = 1;
  let shapeOk = true;
  for (let e = 0; shapeOk && e < g.num_gpus / g.gpus_per_engine; e++) {
    const first = groupStart + e * g.gpus_per_engine;
    const sites = pool.sites.slice(first, first + g.gpus_per_engine);
    if (sites.length < g.gpus_per_engine || sites.some((s) => s === undefined)) {
      shapeOk = false; // capacity or binding errors already say why
      break;
    }
    const checked = checkEngineSites(sites as BundleSite[], inv.gpus);
    if (!checked.ok) {
      fail(
        checked.code,
        path,
        `engine ${e} (bundles ${first}..${first + g.gpus_per_engine - 1}): ${checked.message}`,
      );
      shapeOk = false;
      break;
    }
    nodesPerEngine = checked.chunks.length;
    if (g.worker_type === 'placeholder') continue;
    const replica = counter.next++;
    replicas.push({
      engine_id: engineId(model, replica),
      replica,
      group: gi,
      worker_type: g.worker_type,
      nnodes: checked.chunks.length,
      nodes: checked.chunks.map((c, rank) => ({
        node: inv.names[c.node] ?? '',
        ...(inv.ips[c.node] ? { node_ip: inv.ips[c.node] } : {}),
        node_rank: rank,
        bundle_indices: c.positions.map((p) => first + p),
        gpu_ids: c.gpus,
        base_gpu_id: c.gpus[0] ?? 0,
        gpu_id_step: 1,
      })),
    });
  }
  return shapeOk ? { replicas, nodesPerEngine } : null;
}

function checkWorkerMix(groups: readonly EngineGroupSpec[], path: string, fail: Fail): void {
  const types = new Set(groups.map((g) => g.worker_type));
  if (types.has('prefill') && !types.has('decode'))
    fail('prefill_without_decode', path, 'a model with prefill groups needs at least one decode group');
  if (types.has('decode') && !types.has('prefill'))
    fail('decode_without_prefill', path, 'a model with decode groups needs at least one prefill group');
  if (types.has('regular') && (types.has('prefill') || types.has('decode')))
    fail(
      'mixed_regular_pd',
      path,
      'a model cannot mix regular groups with prefill/decode groups; split it into two models',
    );
}

function checkGroupShape(g: EngineGroupSpec, path: string, uniform: number | null, fail: Fail): boolean {
  let ok = true;
  if (g.num_gpus % g.gpus_per_engine !== 0) {
    fail(
      'gpus_not_divisible',
      `${path}.num_gpus`,
      `num_gpus ${g.num_gpus} is not a multiple of gpus_per_engine ${g.gpus_per_engine}`,
    );
    ok = false;
  }
  const tp = groupTp(g);
  if (tp * g.pp !== g.gpus_per_engine) {
    fail(
      'tp_pp_mismatch',
      `${path}.tp`,
      `tp ${tp} x pp ${g.pp} = ${tp * g.pp} must equal gpus_per_engine ${g.gpus_per_engine}`,
    );
    ok = false;
  }
  if (g.enable_dp_attention && tp % g.dp !== 0) {
    fail('dp_attention_indivisible', `${path}.dp`, `DP attention needs tp (${tp}) divisible by dp (${g.dp})`);
  }
  if (uniform !== null && g.gpus_per_engine > uniform && g.gpus_per_engine % uniform !== 0) {
    fail(
      'multinode_partial_node',
      `${path}.gpus_per_engine`,
      `an engine larger than a node takes whole nodes: use a multiple of ${uniform} GPUs per engine`,
    );
    ok = false;
  }
  return ok;
}
