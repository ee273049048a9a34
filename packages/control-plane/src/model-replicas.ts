import { EngineWorkerTypeSchema, ReplicaStateSchema, UisError } from '@uis/spec';
import { z } from 'zod';
import type { ControlPlane } from './control-plane.ts';

/** One GPU of a replica, in tensor-parallel rank order (rank i gets `serialized_named_tensors[i]` of SGLang's
 * `update_weights_from_tensor`). */
export const ReplicaRankSchema = z
  .object({
    rank: z.number().int().nonnegative(),
    node: z.string(),
    node_ip: z.string().nullable(),
    node_rank: z.number().int().nonnegative(),
    gpu_id: z.number().int().nonnegative(),
  })
  .meta({ title: 'ReplicaRank' });

export const ModelReplicaSchema = z
  .object({
    engine_id: z.string(),
    /** Replica index within the model; the engine's ranks in a weight-update group start at `rank_offset + replica *
     * gpus_per_engine`. */
    replica: z.number().int().nonnegative(),
    group: z.number().int().nonnegative(),
    worker_type: EngineWorkerTypeSchema,
    url: z.string().nullable(),
    state: ReplicaStateSchema,
    weight_version: z.string().nullable(),
    tp: z.number().int().positive(),
    pp: z.number().int().positive(),
    gpus_per_engine: z.number().int().positive(),
    /** Where the plan puts each rank; `actual_gpus` is where the launcher reports it runs (null: unknown). */
    ranks: z.array(ReplicaRankSchema),
    actual_gpus: z
      .array(z.object({ node: z.string(), gpu_ids: z.array(z.number().int()) }).meta({ title: 'ActualGpus' }))
      .nullable(),
  })
  .meta({ title: 'ModelReplica' });
export type ModelReplica = z.infer<typeof ModelReplicaSchema>;

export const ModelReplicasSchema = z
  .object({
    role: z.string(),
    model: z.string(),
    /** The model's target version (what replicas converge to). */
    weight_version: z.string().nullable(),
    replicas: z.array(ModelReplicaSchema),
  })
  .meta({ title: 'ModelReplicas' });
export type ModelReplicas = z.infer<typeof ModelReplicasSchema>;

/** A model's replicas as a trainer that pushes weights itself needs them (the colocated path of slime, verl and
 * Relax: `update_weights_from_tensor` to every engine): URL, state and version from the manager, ranks with their
 * nodes and GPU ids from the placement plan, the launcher's actual GPUs when it knows them. */
export function modelReplicas(plane: ControlPlane, role: string, model: string): ModelReplicas {
  const manager = plane.managerOf(role);
  const live = manager.snapshot().models[model];
  if (live === undefined) {
    throw new UisError({
      code: 'unknown_model',
      path: 'model',
      message: `role ${role} has no model ${JSON.stringify(model)}; models: ${Object.keys(manager.snapshot().models).join(', ')}`,
    });
  }
  // Placeholder groups only reserve bundles for scaling: no engine runs there.
  const groups = plane.plan.placements.filter(
    (p) => p.role === role && p.model === model && p.worker_type !== 'placeholder',
  );
  const replicas: ModelReplica[] = [];
  for (const g of groups) {
    for (const placed of g.replicas) {
      const r = live.replicas.find((x) => x.engine_id === placed.engine_id);
      let rank = 0;
      const ranks = placed.nodes.flatMap((n) =>
        n.gpu_ids.map((gpu_id) => ({
          rank: rank++,
          node: n.node,
          node_ip: n.node_ip ?? null,
          node_rank: n.node_rank,
          gpu_id,
        })),
      );
      replicas.push({
        engine_id: placed.engine_id,
        replica: placed.replica,
        group: placed.group,
        worker_type: placed.worker_type as ModelReplica['worker_type'],
        url: r?.base_url ?? null,
        state: r?.state ?? 'dead',
        weight_version: r?.weight_version ?? null,
        tp: g.tp,
        pp: g.pp,
        gpus_per_engine: g.gpus_per_engine,
        ranks,
        actual_gpus: plane.actualPlacement(placed.engine_id),
      });
    }
  }
  replicas.sort((a, b) => a.replica - b.replica);
  return { role, model, weight_version: live.target_weight_version, replicas };
}
