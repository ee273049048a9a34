import {
  type ActivationGroupPlan,
  type Bundle,
  type ConfigRole,
  configuredRoles,
  type DeploymentMode,
  type EngineGroupSpec,
  type ErrorCode,
  engineId,
  type GroupPlacement,
  groupTp,
  type PgOwner,
  type PlanResult,
  type PlanViolation,
  type PoolPlan,
  PRODUCER_ROLE,
  type ReplicaPlacement,
  ROLE_CAPABILITIES,
  type Role,
  SCORER_ROLES,
  serverArgIssue,
  TRAIN_PHASE_RESIDENT,
  type UisConfig,
} from '@uis/spec';
import { checkEngineSites } from './engine-sites.ts';
import { type BundleSite, Inventory } from './inventory.ts';

/** Fractional Ray GPU reservations each actor holds on a bundle (Relax's numbers). Offloading model memory does
 * not release them, so everything that ever sits on a bundle counts, whatever its phase. */
/** Ray GPU fractions per bundle: the trainer's, and each role's from the role capability table. */
export const RAY_GPU_FRACTION = {
  train: 0.4,
  rollout: ROLE_CAPABILITIES.rollout.rayGpuFraction,
  genrm: ROLE_CAPABILITIES.genrm.rayGpuFraction,
  /** GenRM sharing bundles with rollout. */
  genrm_with_rollout: ROLE_CAPABILITIES.genrm.rayGpuFractionBesideProducer,
  teacher: ROLE_CAPABILITIES.teacher.rayGpuFraction,
} as const;

const ACTOR_POOL = 'actor';
const EPS = 1e-9;

interface PoolState {
  plan: PoolPlan;
  sites: Array<BundleSite | undefined>;
  /** Summed Ray reservations per bundle and who holds them. */
  reserved: Float64Array;
  /** Claims over bundle ranges [from, to); read back only to explain a violation. */
  claims: Array<{ from: number; to: number; who: string; fraction: number; path: string }>;
}

interface PlannedGroup {
  role: Role;
  path: string;
  start: number;
  stop: number;
  pool: string;
  phase: string | null;
  unscheduled: boolean;
  placement: GroupPlacement | undefined;
}

const isColocated = (mode: DeploymentMode) => mode === 'colocated_split' || mode === 'colocated_defer';

/** Pure placement: (config) -> the plan, or every violation at once, each with a stable code and a path. */
export class PlacementPlanner {
  plan(config: UisConfig): PlanResult {
    return planPlacement(config);
  }
}

export function planPlacement(config: UisConfig): PlanResult {
  const errors: PlanViolation[] = [];
  const fail = (code: ErrorCode, path: string, message: string): void => {
    errors.push({ code, path, message });
  };
  const inv = new Inventory(config.cluster);
  const { training } = config;

  config.cluster.nodes.forEach((n, i) => {
    if (inv.byName.get(n.name) !== i)
      fail(
        'duplicate_node',
        `cluster.nodes[${i}].name`,
        `node "${n.name}" is listed twice; give each node a unique name`,
      );
  });

  const roles = configuredRoles(config).filter(({ spec }) => spec.external_engine_urls === undefined);
  const anyColocated = roles.some(({ spec }) => isColocated(spec.deployment.mode));

  // Schedule: where each role is resident.
  const residency = new Map<string, { group: string; phase: string; index: number; path: string }>();
  const activation_groups: ActivationGroupPlan[] = [];
  const groupNames = new Set<string>();
  config.schedule.activation_groups.forEach((g, gi) => {
    const gpath = `schedule.activation_groups[${gi}]`;
    if (groupNames.has(g.name))
      fail('duplicate_activation_group', `${gpath}.name`, `activation group "${g.name}" is defined twice`);
    groupNames.add(g.name);
    if (g.pool !== ACTOR_POOL)
      fail(
        'activation_group_pool',
        `${gpath}.pool`,
        `phases serialize the shared actor pool; set pool to "${ACTOR_POOL}"`,
      );
    const phaseNames = new Set<string>();
    g.phases.forEach((p, pi) => {
      if (phaseNames.has(p.name))
        fail(
          'duplicate_phase',
          `${gpath}.phases[${pi}].name`,
          `phase "${p.name}" appears twice in ${g.name}`,
        );
      phaseNames.add(p.name);
      p.residents.forEach((r, ri) => {
        const rpath = `${gpath}.phases[${pi}].residents[${ri}]`;
        const prev = residency.get(r);
        if (prev) {
          fail(
            'phase_residents_not_disjoint',
            rpath,
            `${r} is already resident in phase "${prev.phase}" (${prev.path}); a role is resident in one phase only`,
          );
          return;
        }
        residency.set(r, { group: g.name, phase: p.name, index: pi, path: rpath });
        if (r !== TRAIN_PHASE_RESIDENT && config.roles[r] === undefined)
          fail(
            'unknown_resident',
            rpath,
            `role ${r} is not configured under roles; remove it from the phase or configure it`,
          );
      });
    });
    activation_groups.push({
      name: g.name,
      pool: g.pool,
      phases: g.phases.map((p) => ({ name: p.name, residents: [...p.residents] })),
    });
  });

  // Role-level rules.
  for (const { role, spec } of roles) {
    const dpath = `roles.${role}.deployment`;
    const mode = spec.deployment.mode;
    const where = residency.get(role);
    if (mode === 'shared_coresident') {
      fail(
        'shared_coresident_rejected',
        `${dpath}.mode`,
        `roles resident on the same GPUs in the same phase are not supported; use colocated_defer (with a schedule) or colocated_split`,
      );
    }
    if (mode === 'colocated_defer' && ROLE_CAPABILITIES[role].producesSamples) {
      fail(
        'defer_role_not_allowed',
        `${dpath}.mode`,
        `only ${SCORER_ROLES.join(' and ')} can be deferred; place ${role} with colocated_split`,
      );
    }
    if (mode === 'colocated_defer' && training.fully_async) {
      fail(
        'defer_requires_sync',
        `${dpath}.mode`,
        'defer needs synchronous training; set training.fully_async to false or stop deferring',
      );
    } else if (isColocated(mode) && training.fully_async && !training.hybrid) {
      fail(
        'fully_async_colocate',
        `${dpath}.mode`,
        'fully-async training with colocated inference needs training.hybrid: true (or decoupled placement)',
      );
    }
    if (isColocated(mode) && training.actor_gpus <= 0) {
      fail(
        'no_actor_pool',
        'training.actor_gpus',
        `${role} is colocated but the actor pool is empty; set training.actor_gpus`,
      );
    }
    if (isColocated(mode) && !(spec.deployment.offload && training.offload_train)) {
      fail(
        'offload_required',
        spec.deployment.offload ? 'training.offload_train' : `${dpath}.offload`,
        `${role} shares GPUs with training, so both must offload: set roles.${role}.deployment.offload and training.offload_train to true`,
      );
    }
    if (mode === 'colocated_defer' && !where) {
      fail(
        'defer_not_scheduled',
        dpath,
        `a deferred ${role} needs a phase: list it as a resident in schedule.activation_groups`,
      );
    }
    if (where && !isColocated(mode)) {
      fail(
        'scheduled_role_not_colocated',
        where.path,
        `${role} is in a phase but its deployment is ${mode}; only colocated roles take turns on shared GPUs`,
      );
    }
    if (
      where &&
      spec.deployment.activation_group !== undefined &&
      spec.deployment.activation_group !== where.group
    ) {
      fail(
        'activation_mismatch',
        `${dpath}.activation_group`,
        `the schedule puts ${role} in activation group "${where.group}"`,
      );
    }
    if (
      where &&
      spec.deployment.activation_phase !== undefined &&
      spec.deployment.activation_phase !== where.phase
    ) {
      fail(
        'activation_mismatch',
        `${dpath}.activation_phase`,
        `the schedule puts ${role} in phase "${where.phase}"`,
      );
    }
    if (mode === 'colocated_defer' && where && !ROLE_CAPABILITIES[role].producesSamples) {
      const rollout = residency.get(PRODUCER_ROLE);
      if (rollout && rollout.group === where.group && rollout.index >= where.index) {
        fail(
          'defer_phase_order',
          where.path,
          `deferred ${role} must be in a phase after rollout's phase "${rollout.phase}"`,
        );
      }
      const train = residency.get(TRAIN_PHASE_RESIDENT);
      if (train && train.group === where.group && train.index <= where.index) {
        fail(
          'defer_phase_order',
          where.path,
          `deferred ${role} must score before the trainer's phase "${train.phase}"`,
        );
      }
    }
  }

  // Pools: the actor PG (training + colocated slices), separate critic/reference/actor_fwd PGs, the GPUs
  // reserved for external engines, then one PG per decoupled role.
  const pools = new Map<string, PoolState>();
  const newPool = (name: string, size: number, owner: PgOwner, pgName?: string): PoolState => {
    const state = poolState(name, size, owner, pgName);
    pools.set(name, state);
    return state;
  };
  const criticShares = addTrainingPools(config, anyColocated, newPool);

  const slices = new Map<Role, { start: number; size: number }>();
  let splitCursor = 0;
  for (const { role, spec } of roles) {
    const size = spec.models.reduce((s, m) => s + m.engine_groups.reduce((t, g) => t + g.num_gpus, 0), 0);
    const mode = spec.deployment.mode;
    const start = spec.bundle_offset ?? (mode === 'colocated_split' ? splitCursor : 0);
    if (mode === 'colocated_split') splitCursor = Math.max(splitCursor, start + size);
    slices.set(role, { start, size });
    if (mode === 'decoupled') {
      const owner = spec.deployment.pg_owner ?? 'manager';
      newPool(role, start + size, owner, spec.deployment.pg_name);
    } else if (
      isColocated(mode) &&
      spec.deployment.pg_owner !== undefined &&
      spec.deployment.pg_owner !== 'controller'
    ) {
      fail(
        'pg_owner_invalid',
        `roles.${role}.deployment.pg_owner`,
        'colocated roles live in the actor PG, which the RL controller owns; use pg_owner: controller or omit it',
      );
    }
  }

  // Capacity and bundle -> GPU sites.
  const totalPool = [...pools.values()].reduce((s, p) => s + p.plan.size, 0);
  if (totalPool > inv.total) {
    fail(
      'capacity_exceeded',
      'cluster.nodes',
      `pools need ${totalPool} GPUs (${[...pools.values()].map((p) => `${p.plan.name}=${p.plan.size}`).join(', ')}) but the cluster has ${inv.total}; add nodes or shrink a pool`,
    );
  }
  const bindings = new Map<string, Array<{ site: BundleSite; at: number } | undefined>>();
  for (const [i, b] of config.cluster.bindings.entries()) {
    const path = `cluster.bindings[${i}]`;
    const pool = pools.get(b.pool);
    if (!pool) {
      fail('unknown_pool', `${path}.pool`, `no pool "${b.pool}"; pools are ${[...pools.keys()].join(', ')}`);
      continue;
    }
    if (b.bundle_index >= pool.plan.size) {
      fail(
        'binding_out_of_range',
        `${path}.bundle_index`,
        `pool ${b.pool} has ${pool.plan.size} bundles (0..${pool.plan.size - 1})`,
      );
      continue;
    }
    const node = inv.byName.get(b.node);
    if (node === undefined) {
      fail('unknown_node', `${path}.node`, `node "${b.node}" is not in cluster.nodes`);
      continue;
    }
    if (b.gpu_id >= (inv.gpus[node] ?? 0)) {
      fail('gpu_out_of_range', `${path}.gpu_id`, `node ${b.node} has GPUs 0..${(inv.gpus[node] ?? 0) - 1}`);
      continue;
    }
    const list = bindings.get(b.pool) ?? [];
    bindings.set(b.pool, list);
    if (list[b.bundle_index]) {
      fail('duplicate_binding', `${path}.bundle_index`, `bundle ${b.pool}[${b.bundle_index}] is bound twice`);
      continue;
    }
    list[b.bundle_index] = { site: { node, gpu: b.gpu_id }, at: i };
  }
  // Which bundle holds each cluster GPU (typed arrays: this runs once per GPU of the cluster).
  const ownerPool = new Int32Array(inv.total).fill(-1);
  const ownerBundle = new Int32Array(inv.total);
  const poolNames = [...pools.keys()];
  let cursor = 0;
  // Bound pools first: their GPUs are facts, synthetic pools fill around them.
  const ordered = [...pools.values()].sort(
    (a, b) => Number(bindings.has(b.plan.name)) - Number(bindings.has(a.plan.name)),
  );
  for (const pool of ordered) {
    const bound = bindings.get(pool.plan.name);
    let missing = false;
    if (bound) {
      for (let i = 0; i < pool.plan.size; i++) {
        const b = bound[i];
        if (!b && !missing) {
          missing = true;
          fail(
            'binding_missing',
            'cluster.bindings',
            `pool ${pool.plan.name} binds some bundles but not bundle ${i}; bind all ${pool.plan.size} or none`,
          );
        }
        pool.sites.push(b?.site);
        if (b) {
          const g = inv.global(b.site);
          const other = ownerPool[g] ?? -1;
          if (other >= 0)
            fail(
              'gpu_bound_twice',
              `cluster.bindings[${b.at}]`,
              `${pool.plan.name}[${i}] resolves to GPU ${inv.names[b.site.node]}:${b.site.gpu}, already used by ${poolNames[other]}[${ownerBundle[g]}]`,
            );
          else {
            ownerPool[g] = poolNames.indexOf(pool.plan.name);
            ownerBundle[g] = i;
          }
        }
      }
    } else {
      // Skip GPUs a bound pool already took, so synthetic and bound pools never collide.
      const sites: BundleSite[] = [];
      while (sites.length < pool.plan.size && cursor < inv.total) {
        const g = cursor++;
        if ((ownerPool[g] ?? -1) < 0) {
          ownerPool[g] = poolNames.indexOf(pool.plan.name);
          ownerBundle[g] = sites.length;
          sites.push(inv.site(g));
        }
      }
      pool.sites = sites;
    }
    pool.plan.bundles = pool.sites.flatMap((site, index): Bundle[] =>
      site
        ? [
            {
              index,
              node: inv.names[site.node] ?? '',
              ...(inv.ips[site.node] ? { node_ip: inv.ips[site.node] } : {}),
              gpu_id: site.gpu,
              global_gpu: inv.global(site),
            },
          ]
        : [],
    );
  }

  // Training reservations on the actor pool.
  const reserve = (
    pool: PoolState,
    from: number,
    to: number,
    who: string,
    fraction: number,
    path: string,
  ) => {
    const stop = Math.min(to, pool.reserved.length);
    for (let i = from; i < stop; i++) pool.reserved[i] = (pool.reserved[i] ?? 0) + fraction;
    pool.claims.push({ from, to: stop, who, fraction, path });
  };
  const actorPool = pools.get(ACTOR_POOL);
  if (actorPool) {
    reserve(actorPool, 0, training.actor_gpus, 'actor', RAY_GPU_FRACTION.train, 'training.actor_gpus');
    if (criticShares)
      reserve(actorPool, 0, training.critic_gpus, 'critic', RAY_GPU_FRACTION.train, 'training.critic_gpus');
  }
  const criticPool = pools.get('critic');
  if (criticPool)
    reserve(criticPool, 0, training.critic_gpus, 'critic', RAY_GPU_FRACTION.train, 'training.critic_gpus');

  // Groups.
  const planned: PlannedGroup[] = [];
  const placements: GroupPlacement[] = [];
  for (const { role, spec } of roles) {
    const mode = spec.deployment.mode;
    const poolName = isColocated(mode) || mode === 'shared_coresident' ? ACTOR_POOL : role;
    const pool = pools.get(poolName);
    const where = residency.get(role);
    let start = slices.get(role)?.start ?? 0;
    spec.models.forEach((model, mi) => {
      const mpath = `roles.${role}.models[${mi}]`;
      checkWorkerMix(model.engine_groups, `${mpath}.engine_groups`, fail);
      let replicaIndex = 0;
      model.engine_groups.forEach((g, gi) => {
        const path = `${mpath}.engine_groups[${gi}]`;
        for (const key of Object.keys(g.server_args)) {
          const issue = serverArgIssue(key);
          if (issue) fail(issue.code, `${path}.server_args.${key}`, issue.message);
        }
        const groupStart = start;
        start += g.num_gpus;
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
        planned.push(pg);
        if (!pool || mode === 'shared_coresident') return;
        if (pg.stop > pool.plan.size) {
          fail(
            'pool_capacity_exceeded',
            `${path}.num_gpus`,
            `bundles ${groupStart}..${pg.stop - 1} do not fit the ${poolName} pool of ${pool.plan.size}; shrink the group or grow the pool${poolName === ACTOR_POOL ? ' (training.actor_gpus)' : ''}`,
          );
          return;
        }
        const tp = groupTp(g);
        const bundleIndices = range(groupStart, pg.stop);
        const replicas: ReplicaPlacement[] = [];
        let nodesPerEngine = 1;
        let shapeOk = ok;
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
          const replica = replicaIndex++;
          replicas.push({
            engine_id: engineId(model.name, replica),
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
        if (!shapeOk) return;
        pg.placement = {
          role,
          model: model.name,
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
        placements.push(pg.placement);
      });
    });
  }

  checkOverlaps(planned, pools, fail);

  // Ray reservations: one engine actor per node of each engine, on the first bundle of its node part.
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
      pools: Object.fromEntries([...pools].map(([k, v]) => [k, v.plan])),
      placements,
      activation_groups,
    },
  };
}

type Fail = (code: ErrorCode, path: string, message: string) => void;

const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);
const round = (x: number) => Math.round(x * 1000) / 1000;

function poolState(name: string, size: number, owner: PgOwner, pgName?: string): PoolState {
  return {
    plan: {
      name,
      size,
      owner,
      deleted_by: owner,
      pg_name: pgName ?? `uis-${name}`,
      strategy: 'PACK',
      bundles: [],
    },
    sites: [],
    reserved: new Float64Array(size),
    claims: [],
  };
}

/** The controller's pools: the actor PG (training + colocated slices), a critic PG unless a colocated critic of
 * the actor's size shares it, reference and actor_fwd PGs, and the GPUs it reserves for engines attached by URL
 * (Relax keeps them). Returns whether the critic shares the actor PG. */
function addTrainingPools(
  config: UisConfig,
  anyColocated: boolean,
  newPool: (name: string, size: number, owner: PgOwner, pgName?: string) => unknown,
): boolean {
  const { training } = config;
  if (training.actor_gpus > 0 || anyColocated) newPool(ACTOR_POOL, training.actor_gpus, 'controller');
  const criticShares = anyColocated && training.critic_gpus === training.actor_gpus;
  if (training.critic_gpus > 0 && !criticShares) newPool('critic', training.critic_gpus, 'controller');
  if (training.reference_gpus > 0) newPool('reference', training.reference_gpus, 'controller');
  if (training.actor_fwd_gpus > 0) newPool('actor_fwd', training.actor_fwd_gpus, 'controller');
  for (const { role, spec } of configuredRoles(config)) {
    const reserved = spec.reserved_gpus ?? 0;
    if (spec.external_engine_urls !== undefined && reserved > 0)
      newPool(role, reserved, 'controller', spec.deployment.pg_name);
  }
  return criticShares;
}

/** The job's GPU total: every pool of the plan (Relax's total_required_gpus). */
export function planTotalGpus(plan: { pools: Record<string, { size: number }> }): number {
  return Object.values(plan.pools).reduce((s, p) => s + p.size, 0);
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
