import type { PlacementPlan, PlanViolation } from '@uis/spec';
import { z } from 'zod';
import { checkEngineSites } from './engine-sites.ts';
import type { BundleSite } from './inventory.ts';

/** What a Ray launcher reads back from a placed PG: where each bundle physically landed. */
export const BundleProbeEntrySchema = z
  .object({
    bundle_index: z.number().int().nonnegative(),
    node_id: z.string().min(1),
    node_ip: z.string().min(1).optional(),
    gpu_id: z.number().int().nonnegative(),
  })
  .strict();
export type BundleProbeEntry = z.infer<typeof BundleProbeEntrySchema>;

/** Checks a physical bundle probe of one pool against the plan: every planned bundle is present once, no two
 * bundles resolve to the same GPU, and every engine of the plan still gets ascending contiguous GPUs on one node
 * (or whole, distinct nodes when it is multi-node). Pure; returns every violation. */
export function validateBundleProbe(
  plan: PlacementPlan,
  pool: string,
  probe: readonly BundleProbeEntry[],
): PlanViolation[] {
  const errors: PlanViolation[] = [];
  const poolPlan = plan.pools[pool];
  if (!poolPlan) return [{ code: 'unknown_pool', path: 'pool', message: `the plan has no pool "${pool}"` }];
  const byIndex = new Map<number, BundleProbeEntry>();
  const gpus = new Map<string, number>();
  probe.forEach((entry, i) => {
    const path = `probe[${i}]`;
    if (byIndex.has(entry.bundle_index)) {
      errors.push({
        code: 'duplicate_bundle',
        path: `${path}.bundle_index`,
        message: `bundle ${entry.bundle_index} is reported twice`,
      });
      return;
    }
    byIndex.set(entry.bundle_index, entry);
    const key = `${entry.node_id}:${entry.gpu_id}`;
    const other = gpus.get(key);
    if (other !== undefined) {
      errors.push({
        code: 'gpu_bound_twice',
        path,
        message: `bundles ${other} and ${entry.bundle_index} resolve to the same GPU ${key}`,
      });
    } else gpus.set(key, entry.bundle_index);
  });
  for (let i = 0; i < poolPlan.size; i++) {
    if (!byIndex.has(i))
      errors.push({
        code: 'bundle_missing',
        path: `probe`,
        message: `bundle ${i} of pool ${pool} is missing from the probe`,
      });
  }
  if (errors.length > 0) return errors;
  // Node sizes are unknown to a probe; a node's size is the number of its GPUs the pool holds, which is what an
  // engine may use. Multi-node engines then need every node part to be that whole set.
  const nodeIds = new Map<string, number>();
  const nodeGpus: number[] = [];
  const site = (entry: BundleProbeEntry): BundleSite => {
    let n = nodeIds.get(entry.node_id);
    if (n === undefined) {
      n = nodeGpus.length;
      nodeIds.set(entry.node_id, n);
      nodeGpus.push(0);
    }
    return { node: n, gpu: entry.gpu_id };
  };
  const sites: BundleSite[] = new Array(poolPlan.size);
  for (const [index, entry] of byIndex) {
    const at = site(entry);
    sites[index] = at;
    nodeGpus[at.node] = (nodeGpus[at.node] ?? 0) + 1;
  }
  plan.placements.forEach((g, gi) => {
    if (g.pool !== pool) return;
    // Hoisted per group: one node-size table serves all of the group's engines.
    const perNode = g.gpus_per_engine / g.nodes_per_engine;
    const nodeSizes =
      g.nodes_per_engine > 1
        ? nodeGpus.map(() => perNode)
        : nodeGpus.map((n) => Math.max(n, g.gpus_per_engine));
    const engineSites: BundleSite[] = new Array(g.gpus_per_engine);
    for (let e = 0; e * g.gpus_per_engine < g.num_gpus; e++) {
      const first = g.bundle_start + e * g.gpus_per_engine;
      for (let k = 0; k < g.gpus_per_engine; k++) engineSites[k] = sites[first + k] as BundleSite;
      const checked = checkEngineSites(engineSites, nodeSizes);
      if (!checked.ok) {
        errors.push({
          code: checked.code,
          path: `placements[${gi}]`,
          message: `${g.role}/${g.model} group ${g.group} engine ${e}: ${checked.message}`,
        });
        continue;
      }
      if (checked.chunks.length !== g.nodes_per_engine) {
        errors.push({
          code: 'multinode_shape_changed',
          path: `placements[${gi}]`,
          message: `${g.role}/${g.model} group ${g.group} engine ${e} spans ${checked.chunks.length} nodes, the plan expects ${g.nodes_per_engine}`,
        });
      }
    }
  });
  return errors;
}
