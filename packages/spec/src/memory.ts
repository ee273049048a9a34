import { z } from 'zod';

/** The memory model: what each model holds on each GPU by SGLang memory tag, what each GPU type holds and how fast
 * it copies, and what the planner derives from them (per phase residency, per switch the tags released and
 * resumed, bytes moved and predicted seconds). Bytes are integers so the residency rule is exact to the byte. */

/** SGLang's memory tags (`sglang/srt/constants.py` GPU_MEMORY_ALL_TYPES), in the order a switch resumes them:
 * weights first (synced to the target version before anything else takes memory: the known OOM trap), then the KV
 * cache, then CUDA graphs. */
export const RESUME_ORDER = ['weights', 'kv_cache', 'cuda_graph'] as const;
export const ResidentTagSchema = z.enum(RESUME_ORDER);
export type ResidentTag = z.infer<typeof ResidentTagSchema>;

/** Bytes of one parameter per dtype. */
export const DTYPE_BYTES = { fp32: 4, bf16: 2, fp16: 2, fp8: 1, int8: 1, int4: 0.5 } as const;
export const DtypeSchema = z.enum(['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4']);
export type Dtype = z.infer<typeof DtypeSchema>;

const GB = 1e9;

/** A GPU type: its memory and its host <-> GPU copy speeds. Defaults are an H200's measured figures: 51.5 GB/s
 * from pinned host memory (16 GB in 0.31 s), 9.0 GB/s from pageable memory, a KV-cache-sized cudaMalloc + free in
 * 0.03 s. */
export const GpuTypeSchema = z
  .object({
    /** Memory per GPU in GB (1e9 bytes). */
    memory_gb: z.number().positive().max(100_000).default(141),
    /** Pinned host <-> GPU copy speed in GB/s (CPU weight backup: offload and onload of weights). */
    pinned_gbps: z.number().positive().default(51.5),
    /** Pageable host -> GPU copy speed in GB/s (weights loaded from disk or pushed by the trainer). */
    pageable_gbps: z.number().positive().default(9.0),
    /** Seconds of one allocation + free of a tag's region (the KV cache's cudaMalloc + free). */
    alloc_free_s: z.number().nonnegative().default(0.03),
  })
  .strict();
export type GpuType = z.infer<typeof GpuTypeSchema>;

/** The GPU type every node has unless it names another (`cluster.gpu_types` may redefine it). */
export const DEFAULT_GPU_TYPE = 'h200';
export const H200: GpuType = GpuTypeSchema.parse({});

/** What one model holds per GPU. Weight bytes come from `parameters` x the dtype's bytes (or `weight_gb`), split
 * evenly over the GPUs of an engine (tp x pp); the KV cache is a share of each GPU's memory. */
export const ModelMemorySchema = z
  .object({
    /** Parameter count (e.g. 8.2e9). */
    parameters: z.number().positive().optional(),
    dtype: DtypeSchema.default('bf16'),
    /** Weight bytes of the whole model in GB, instead of parameters x dtype (e.g. read from the engine). */
    weight_gb: z.number().positive().optional(),
    /** Share of each GPU's memory the KV cache takes. */
    kv_cache_share: z.number().min(0).max(1).default(0.3),
    /** CUDA-graph reserve per GPU in GB. */
    cuda_graph_gb: z.number().nonnegative().default(1),
  })
  .strict()
  .refine((m) => m.parameters !== undefined || m.weight_gb !== undefined, {
    message: 'give parameters (with dtype) or weight_gb',
    path: ['parameters'],
  });
export type ModelMemory = z.infer<typeof ModelMemorySchema>;

/** Who chooses the order of the deferred phases: as written, or the planner (it may merge phases whose residents
 * fit together) to minimise the predicted bubble per step. */
export const DeferOrderSchema = z.enum(['configured', 'optimized']);
export type DeferOrder = z.infer<typeof DeferOrderSchema>;

export const gbToBytes = (gb: number): number => Math.round(gb * GB);
export const formatBytes = (bytes: number): string => `${(bytes / GB).toFixed(1)} GB`;

/** Whole-model weight bytes. */
export function modelWeightBytes(m: ModelMemory): number {
  if (m.weight_gb !== undefined) return gbToBytes(m.weight_gb);
  return Math.round((m.parameters ?? 0) * DTYPE_BYTES[m.dtype]);
}

/** Per GPU bytes of each tag of one engine of `gpusPerEngine` GPUs on a GPU of `gpuBytes`. */
export function perGpuTagBytes(
  m: ModelMemory,
  gpusPerEngine: number,
  gpuBytes: number,
): Record<ResidentTag, number> {
  return {
    weights: Math.ceil(modelWeightBytes(m) / gpusPerEngine),
    kv_cache: Math.floor(m.kv_cache_share * gpuBytes),
    cuda_graph: gbToBytes(m.cuda_graph_gb),
  };
}

/** One model's move at a switch: the tags it releases and resumes (resume in RESUME_ORDER). */
export const ModelMoveSchema = z.object({
  role: z.string(),
  model: z.string(),
  release: z.array(ResidentTagSchema),
  resume: z.array(ResidentTagSchema),
  /** Weights brought to the model's new version after they resume (or while they stay). */
  weight_sync: z.boolean(),
});
export type ModelMove = z.infer<typeof ModelMoveSchema>;

/** One switch between phases of an activation group. Bytes and seconds are the busiest GPU's. */
export const SwitchPlanSchema = z.object({
  from: z.string(),
  to: z.string(),
  moves: z.array(ModelMoveSchema),
  /** Bytes copied between host and GPU on the busiest GPU (weights with a CPU backup, weight syncs). */
  bytes_moved: z.number().int().nonnegative(),
  release_s: z.number().nonnegative(),
  resume_s: z.number().nonnegative(),
  weight_sync_s: z.number().nonnegative(),
  /** release + resume + weight sync (the coordinator proves the release before anything onloads). */
  predicted_s: z.number().nonnegative(),
});
export type SwitchPlan = z.infer<typeof SwitchPlanSchema>;

export const PhaseMemorySchema = z.object({
  name: z.string(),
  residents: z.array(z.string()),
  /** Models whose weights are on their GPUs during the phase (the residents' and those kept across it). */
  resident_weights: z.array(z.string()),
  /** Per model, the tags on its GPUs during the phase (the coordinator keeps these when the phase comes). */
  resident_tags: z.record(z.string(), z.array(ResidentTagSchema)),
  /** The fullest GPU's bytes in this phase, and its capacity. */
  peak_bytes: z.number().int().nonnegative(),
  capacity_bytes: z.number().int().nonnegative(),
});
export type PhaseMemory = z.infer<typeof PhaseMemorySchema>;

/** One order of a group's phases with its predicted switches. */
export const SchedulePredictionSchema = z.object({
  phases: z.array(PhaseMemorySchema),
  switches: z.array(SwitchPlanSchema),
  /** Predicted seconds per step spent switching (every switch of one cycle). */
  bubble_s: z.number().nonnegative(),
});
export type SchedulePrediction = z.infer<typeof SchedulePredictionSchema>;

export const GroupMemoryPlanSchema = z.object({
  group: z.string(),
  order: DeferOrderSchema,
  configured: SchedulePredictionSchema,
  optimized: SchedulePredictionSchema,
  /** The configured order when every switch releases everything and onloads everything (no memory model): the
   * reference the savings are measured against. */
  release_all: SchedulePredictionSchema,
  /** Models the memory model could not size (no `memory` in their config): they release every tag at every switch
   * and their bytes are not counted. */
  unsized: z.array(z.string()),
});
export type GroupMemoryPlan = z.infer<typeof GroupMemoryPlanSchema>;
