import { type Bundle, configuredRoles, type PgOwner, type Role, type UisConfig } from '@uis/spec';
import type { BundleSite } from './inventory.ts';
import { ACTOR_POOL, isColocated, type PlanCtx, type PoolState, RAY_GPU_FRACTION } from './plan-parts.ts';

/** The pools (Ray placement groups) of the plan and each role's slice start. */
export function createPools(
  { config, roles, fail }: PlanCtx,
  anyColocated: boolean,
): {
  pools: Map<string, PoolState>;
  slices: Map<Role, { start: number; size: number }>;
  criticShares: boolean;
} {
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
  return { pools, slices, criticShares };
}

/** Capacity, then each bundle's GPU site: bound pools take their bindings, the others fill the free GPUs. */
export function bindSites(ctx: PlanCtx, pools: Map<string, PoolState>): void {
  const { inv, fail } = ctx;
  const totalPool = [...pools.values()].reduce((s, p) => s + p.plan.size, 0);
  if (totalPool > inv.total) {
    fail(
      'capacity_exceeded',
      'cluster.nodes',
      `pools need ${totalPool} GPUs (${[...pools.values()].map((p) => `${p.plan.name}=${p.plan.size}`).join(', ')}) but the cluster has ${inv.total}; add nodes or shrink a pool`,
    );
  }
  const bindings = readBindings(ctx, pools);
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
}

/** The cluster's bundle bindings per pool, each checked against the pools and the inventory. */
function readBindings(
  { config, inv, fail }: PlanCtx,
  pools: Map<string, PoolState>,
): Map<string, Array<{ site: BundleSite; at: number } | undefined>> {
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
  return bindings;
}

/** Adds a Ray GPU reservation of `fraction` on bundles [from, to) of `pool`. */
export function reserve(
  pool: PoolState,
  from: number,
  to: number,
  who: string,
  fraction: number,
  path: string,
): void {
  const stop = Math.min(to, pool.reserved.length);
  for (let i = from; i < stop; i++) pool.reserved[i] = (pool.reserved[i] ?? 0) + fraction;
  pool.claims.push({ from, to: stop, who, fraction, path });
}

/** The trainer's reservations on the actor pool (and the critic's, on the actor pool it shares or its own). */
export function reserveTraining(
  { config }: PlanCtx,
  pools: Map<string, PoolState>,
  criticShares: boolean,
): void {
  const { training } = config;
  const actorPool = pools.get(ACTOR_POOL);
  if (actorPool) {
    reserve(actorPool, 0, training.actor_gpus, 'actor', RAY_GPU_FRACTION.train, 'training.actor_gpus');
    if (criticShares)
      reserve(actorPool, 0, training.critic_gpus, 'critic', RAY_GPU_FRACTION.train, 'training.critic_gpus');
  }
  const criticPool = pools.get('critic');
  if (criticPool)
    reserve(criticPool, 0, training.critic_gpus, 'critic', RAY_GPU_FRACTION.train, 'training.critic_gpus');
}

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
