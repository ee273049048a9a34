import { type BundleProbeEntry, validateBundleProbe } from '@uis/planner';
import { type PlacementPlan, type PoolPlan, UisError } from '@uis/spec';
import type { PlacementGroups } from '../placement-groups.ts';
import type { RayBridge } from './ray-bridge.ts';

/** A pool as it physically landed: every planned bundle's node and GPU, checked against the plan. */
export interface ProbedPool {
  pool: PoolPlan;
  /** By bundle index. */
  bundles: ReadonlyMap<number, BundleProbeEntry>;
  /** True when this manager created the PG (and so is the one to remove it). */
  created: boolean;
  /** Config node name of each Ray node id the pool landed on, where one can be told (see `rayNodeNames`). */
  nodeNames: ReadonlyMap<string, string>;
}

/** Names the Ray nodes of a probe after the config's nodes. A Ray node whose IP is the configured `ip` of exactly
 * one planned node is that node. Otherwise, when every bundle Ray put on it was planned on one node, and no other Ray
 * node of the probe maps to that node, it is that node (the pool itself is the correspondence: config names are
 * not Ray identities). Anything else stays unnamed (the caller shows the Ray node id). */
export function rayNodeNames(pool: PoolPlan, probe: readonly BundleProbeEntry[]): Map<string, string> {
  const planned = new Map(pool.bundles.map((b) => [b.index, b]));
  const byIp = new Map<string, Set<string>>();
  for (const b of pool.bundles)
    if (b.node_ip) byIp.set(b.node_ip, (byIp.get(b.node_ip) ?? new Set()).add(b.node));
  const candidates = new Map<string, Set<string>>();
  const ipName = new Map<string, string>();
  for (const e of probe) {
    const plannedNode = planned.get(e.bundle_index)?.node;
    if (plannedNode !== undefined)
      candidates.set(e.node_id, (candidates.get(e.node_id) ?? new Set()).add(plannedNode));
    const named = e.node_ip ? byIp.get(e.node_ip) : undefined;
    if (named?.size === 1) ipName.set(e.node_id, [...named][0] as string);
  }
  const out = new Map(ipName);
  const claims = new Map<string, number>();
  for (const names of candidates.values())
    if (names.size === 1) {
      const n = [...names][0] as string;
      claims.set(n, (claims.get(n) ?? 0) + 1);
    }
  for (const [id, names] of candidates) {
    if (out.has(id) || names.size !== 1) continue;
    const n = [...names][0] as string;
    if (claims.get(n) === 1 && ![...out.values()].includes(n)) out.set(id, n);
  }
  return out;
}

export interface RayPlacementGroupsOptions {
  /** How long a PG may take to be placed. Default 60 s. */
  readyTimeoutS?: number;
}

/** Ray placement groups with the RFC's ownership: pools the manager owns are created here and removed here; PGs
 * of an external service or of the RL controller are only looked up by name and never removed. Every pool is
 * probed (node id, node IP and GPU of each bundle) and the probe goes through the planner's physical validation
 * before any engine may use it. */
export class RayPlacementGroups implements PlacementGroups {
  private readonly resolved = new Map<string, Promise<ProbedPool>>();
  private readonly created = new Set<string>();

  constructor(
    private readonly bridge: RayBridge,
    private readonly plan: PlacementPlan,
    private readonly opts: RayPlacementGroupsOptions = {},
  ) {}

  /** PG names this instance created and has not removed yet. */
  get owned(): string[] {
    return [...this.created];
  }

  async create(pool: PoolPlan): Promise<void> {
    if (pool.owner !== 'manager')
      throw new UisError({
        code: 'pg_not_manager_owned',
        path: `pools.${pool.name}.owner`,
        message: `pool ${pool.name} is owned by ${pool.owner}; the manager only creates its own PGs`,
      });
    await this.bridge.createPg(
      pool.pg_name,
      pool.bundles.map(() => ({ GPU: 1, CPU: 1 })),
      pool.strategy,
      this.opts.readyTimeoutS ?? 60,
    );
    this.created.add(pool.pg_name);
    const probing = this.probeAndValidate(pool, true);
    this.resolved.set(pool.name, probing);
    try {
      await probing;
    } catch (e) {
      // A PG that contradicts the plan is given back at once: nothing may run on it.
      this.resolved.delete(pool.name);
      this.created.delete(pool.pg_name);
      await this.bridge.removePg(pool.pg_name).catch(() => undefined);
      throw e;
    }
  }

  async remove(pgName: string): Promise<void> {
    if (!this.created.has(pgName))
      throw new UisError({
        code: 'pg_not_owned',
        path: 'pg_name',
        message: `placement group ${pgName} was not created by this manager and is never removed by it`,
      });
    await this.bridge.removePg(pgName);
    this.created.delete(pgName);
    for (const [name, pool] of Object.entries(this.plan.pools))
      if (pool.pg_name === pgName) this.resolved.delete(name);
  }

  exists(pgName: string): Promise<boolean> {
    return this.bridge.pgExists(pgName);
  }

  /** The validated bundles of a plan pool: from `create` for ours, else the named PG looked up (never created). */
  resolve(poolName: string): Promise<ProbedPool> {
    const cached = this.resolved.get(poolName);
    if (cached) return cached;
    const pool = this.plan.pools[poolName];
    if (!pool)
      return Promise.reject(
        new UisError({
          code: 'unknown_pool',
          path: 'pool',
          message: `the plan has no pool ${poolName}`,
        }),
      );
    const p = this.probeAndValidate(pool, false);
    this.resolved.set(poolName, p);
    p.catch(() => this.resolved.delete(poolName));
    return p;
  }

  private async probeAndValidate(pool: PoolPlan, created: boolean): Promise<ProbedPool> {
    if (!created) {
      const info = await this.bridge
        .getPg(pool.pg_name, this.opts.readyTimeoutS ?? 60)
        .catch((e: unknown) => {
          if (e instanceof UisError && e.code === 'pg_not_found')
            throw new UisError({
              code: 'pg_not_found',
              path: `pools.${pool.name}.pg_name`,
              message: `pool ${pool.name} expects the ${pool.owner}'s placement group "${pool.pg_name}", which does not exist (the ${pool.owner} creates it)`,
              cause: e,
            });
          throw e;
        });
      if (info.bundle_count < pool.size)
        throw new UisError({
          code: 'pg_too_small',
          path: `pools.${pool.name}.size`,
          message: `placement group ${pool.pg_name} has ${info.bundle_count} bundles; the plan needs ${pool.size}`,
        });
    }
    const probe = (await this.bridge.probe(pool.pg_name)).filter((b) => b.bundle_index < pool.size);
    const violations = validateBundleProbe(this.plan, pool.name, probe);
    if (violations.length > 0)
      throw new UisError({
        code: 'bundle_probe_rejected',
        path: `pools.${pool.name}`,
        message: `placement group ${pool.pg_name} landed where the plan cannot use it: ${violations
          .map((v) => `${v.code} (${v.message})`)
          .join('; ')}`,
        details: { violations, probe },
      });
    return {
      pool,
      bundles: new Map(probe.map((b) => [b.bundle_index, b])),
      created,
      nodeNames: rayNodeNames(pool, probe),
    };
  }
}
