import { z } from 'zod';
import { ErrorCodeSchema } from './error-codes.ts';
import { GpuTypeSchema, GroupMemoryPlanSchema } from './memory.ts';
import { DeploymentModeSchema, PgOwnerSchema, RoleSchema, WorkerTypeSchema } from './model.ts';

/** The placement plan: what the planner returns and what launchers, the manager, the gateway and the console
 * consume. GPU ids named `gpu_ids` on a group are cluster-global indices (inventory order: node by node, local GPU
 * ascending); the per-node entries of a replica carry the node's local GPU ids, which is what SGLang and
 * CUDA_VISIBLE_DEVICES see. */

export const PlacementGroupStrategySchema = z.enum(['PACK', 'STRICT_PACK']);

export const BundleSchema = z.object({
  index: z.number().int().nonnegative(),
  node: z.string(),
  node_ip: z.string().optional(),
  /** Local GPU id on the node. */
  gpu_id: z.number().int().nonnegative(),
  /** Cluster-global GPU index. */
  global_gpu: z.number().int().nonnegative(),
});
export type Bundle = z.infer<typeof BundleSchema>;

export const PoolPlanSchema = z.object({
  name: z.string(),
  size: z.number().int().nonnegative(),
  /** Who owns the PG, and who deletes it (RFC "PG ownership"). */
  owner: PgOwnerSchema,
  deleted_by: PgOwnerSchema,
  pg_name: z.string(),
  strategy: PlacementGroupStrategySchema,
  bundles: z.array(BundleSchema),
});
export type PoolPlan = z.infer<typeof PoolPlanSchema>;

export const NodePlacementSchema = z.object({
  node: z.string(),
  node_ip: z.string().optional(),
  node_rank: z.number().int().nonnegative(),
  bundle_indices: z.array(z.number().int().nonnegative()),
  /** Local GPU ids on this node, ascending and contiguous. */
  gpu_ids: z.array(z.number().int().nonnegative()),
  base_gpu_id: z.number().int().nonnegative(),
  gpu_id_step: z.number().int().positive(),
});
export type NodePlacement = z.infer<typeof NodePlacementSchema>;

/** One logical replica: a multi-node TP/PP engine is ONE replica whose head is node-rank 0 (`nodes[0]`). */
export const ReplicaPlacementSchema = z.object({
  engine_id: z.string(),
  /** Replica index within the model (across its groups). */
  replica: z.number().int().nonnegative(),
  group: z.number().int().nonnegative(),
  worker_type: WorkerTypeSchema,
  nnodes: z.number().int().positive(),
  nodes: z.array(NodePlacementSchema).min(1),
});
export type ReplicaPlacement = z.infer<typeof ReplicaPlacementSchema>;

export const GroupPlacementSchema = z.object({
  role: RoleSchema,
  model: z.string(),
  group: z.number().int().nonnegative(),
  worker_type: WorkerTypeSchema,
  num_gpus: z.number().int().positive(),
  gpus_per_engine: z.number().int().positive(),
  tp: z.number().int().positive(),
  pp: z.number().int().positive(),
  dp: z.number().int().positive(),
  ep: z.number().int().positive(),
  bundle_start: z.number().int().nonnegative(),
  bundle_stop: z.number().int().nonnegative(),
  bundle_indices: z.array(z.number().int().nonnegative()),
  gpu_ids: z.array(z.number().int().nonnegative()),
  /** Placeholder groups reserve bundles and have no replicas. */
  replicas: z.array(ReplicaPlacementSchema),
  nodes_per_engine: z.number().int().positive(),
  pool: z.string(),
  owner: PgOwnerSchema,
  deleted_by: PgOwnerSchema,
  activation_group: z.string().nullable(),
  phase: z.string().nullable(),
  deferred: z.boolean(),
  /** Fractional Ray GPU reservation each engine process holds on its bundles. */
  ray_num_gpus: z.number(),
  /** Engines must start with memory saver (their GPUs are shared with another phase or training). */
  offload: z.boolean(),
  /** The GPU type of the group's GPUs, when the config names GPU types (else the built-in H200). */
  gpu_type: GpuTypeSchema.optional(),
});
export type GroupPlacement = z.infer<typeof GroupPlacementSchema>;

export const ActivationGroupPlanSchema = z.object({
  name: z.string(),
  /** Phases in order; each lists its resident roles (`train` is the trainer's phase). */
  phases: z.array(z.object({ name: z.string(), residents: z.array(z.string()) })),
  pool: z.string(),
});
export type ActivationGroupPlan = z.infer<typeof ActivationGroupPlanSchema>;

export const PlanViolationSchema = z.object({
  code: ErrorCodeSchema,
  path: z.string(),
  message: z.string(),
});
export type PlanViolation = z.infer<typeof PlanViolationSchema>;

export const PlacementPlanSchema = z.object({
  mode: DeploymentModeSchema,
  pools: z.record(z.string(), PoolPlanSchema),
  placements: z.array(GroupPlacementSchema),
  activation_groups: z.array(ActivationGroupPlanSchema),
  /** Per activation group: residency per phase and the predicted switches, configured and optimized order. */
  memory: z.array(GroupMemoryPlanSchema).optional(),
});
export type PlacementPlan = z.infer<typeof PlacementPlanSchema>;

export type PlanResult = { ok: true; plan: PlacementPlan } | { ok: false; errors: PlanViolation[] };
