import {
  type ErrorCode,
  engineId,
  type GroupPlacement,
  type NodePlacement,
  type PoolPlan,
  type ReplicaPlacement,
} from '@uis/spec';
import { checkEngineSites } from './engine-sites.ts';

export interface ReservedReplicasInput {
  model: string;
  /** The placement of the model's regular group the new replicas join. */
  base: GroupPlacement;
  /** The index of that group in the model's engine groups. */
  group: number;
  gpusPerEngine: number;
  /** Bundle indices the plan reserved for the model (its placeholder groups), in plan order. */
  reserved: readonly number[];
  /** Bundles live replicas hold now. */
  used: ReadonlySet<number>;
  /** Replica index of the first new replica (the next ones count up). */
  firstIndex: number;
  count: number;
  /** The pool of `base` (bundle -> node and GPU); without it a bundle index is its GPU on the base's node. */
  pool: PoolPlan | undefined;
}

/** One reason a scale-out cannot be placed. */
export interface ReservedViolation {
  code: ErrorCode;
  path: string;
  message: string;
}

export type ReservedReplicasResult =
  | { ok: true; replicas: ReplicaPlacement[] }
  | { ok: false; errors: ReservedViolation[] };

/** Elastic scale-up: `count` more replicas on the free reserved bundles, in plan order, each checked with the
 * engine-site rule (one node, ascending contiguous local GPUs; a multi-node engine takes whole nodes) before
 * anything starts. Every replica, or every violation: a reserve too small, and each replica the free bundles
 * would hold but that breaks the site rule. */
export function placeReservedReplicas(input: ReservedReplicasInput): ReservedReplicasResult {
  const free = input.reserved.filter((b) => !input.used.has(b));
  const need = input.count * input.gpusPerEngine;
  const errors: ReservedViolation[] = [];
  if (free.length < need)
    errors.push({
      code: 'no_reserved_bundles',
      path: 'replicas',
      message: `scaling ${input.model} by ${input.count} needs ${need} reserved bundles; ${free.length} are free in its placeholder groups`,
    });
  const replicas: ReplicaPlacement[] = [];
  const fits = Math.min(input.count, Math.floor(free.length / input.gpusPerEngine));
  for (let k = 0; k < fits; k++) {
    const bundles = free.slice(k * input.gpusPerEngine, (k + 1) * input.gpusPerEngine);
    const placed = placeOne(input, input.firstIndex + k, bundles);
    if (placed.ok) replicas.push(placed.replica);
    else errors.push(placed.error);
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, replicas };
}

function placeOne(
  input: ReservedReplicasInput,
  index: number,
  bundles: number[],
): { ok: true; replica: ReplicaPlacement } | { ok: false; error: ReservedViolation } {
  const { pool, base } = input;
  const sites = bundles.map((b) => {
    const bundle = pool?.bundles.find((x) => x.index === b);
    return {
      bundle: b,
      node: bundle?.node ?? base.replicas[0]?.nodes[0]?.node ?? 'node-0',
      gpu: bundle?.gpu_id ?? b,
    };
  });
  const nodeNames = [...new Set(sites.map((s) => s.node))];
  const nodeGpus = nodeNames.map((n) =>
    pool ? pool.bundles.filter((b) => b.node === n).length : Number.MAX_SAFE_INTEGER,
  );
  const check = checkEngineSites(
    sites.map((s) => ({ node: nodeNames.indexOf(s.node), gpu: s.gpu })),
    nodeGpus,
  );
  if (!check.ok)
    return {
      ok: false,
      error: {
        code: check.code,
        path: `${input.model}.replicas`,
        message: `${engineId(input.model, index)}: ${check.message}`,
      },
    };
  const nodes: NodePlacement[] = check.chunks.map((c, rank) => ({
    node: nodeNames[c.node] as string,
    node_rank: rank,
    bundle_indices: c.positions.map((p) => (sites[p] as { bundle: number }).bundle),
    gpu_ids: c.gpus,
    base_gpu_id: c.gpus[0] ?? 0,
    gpu_id_step: 1,
  }));
  return {
    ok: true,
    replica: {
      engine_id: engineId(input.model, index),
      replica: index,
      group: input.group,
      worker_type: 'regular',
      nnodes: nodes.length,
      nodes,
    },
  };
}
