/** Wire schemas of SGLang's control endpoints: abort, pause/continue, memory release/resume, weight updates.
 * Re-exported by protocol.ts. */
import { z } from 'zod';

// ---------------------------------------------------------------------------------------------------------------
// Control: abort, pause, memory, weights

export const AbortRequestSchema = z
  .looseObject({ rid: z.string().optional(), abort_all: z.boolean().optional() })
  .refine((r) => r.rid !== undefined || r.abort_all === true, {
    message: 'give a rid or abort_all: true',
    path: ['rid'],
  });
export type AbortRequest = z.infer<typeof AbortRequestSchema>;

/** abort: drop running requests; retract: move them back to the queue; in_place: freeze them where they are. */
export const PauseModeSchema = z.enum(['abort', 'retract', 'in_place']);
export type PauseMode = z.infer<typeof PauseModeSchema>;
export const PauseGenerationRequestSchema = z.looseObject({ mode: PauseModeSchema.optional() });
export type PauseGenerationRequest = z.infer<typeof PauseGenerationRequestSchema>;

/** `{message, status: "ok"}` of /pause_generation and /continue_generation. */
export const StatusMessageSchema = z.looseObject({ message: z.string(), status: z.string() });
export type StatusMessage = z.infer<typeof StatusMessageSchema>;

/** What the memory saver can release; `cuda_graph` is honoured when SGLANG_MEMORY_SAVER_CUDA_GRAPH is set. */
export const MemoryTagSchema = z.enum(['weights', 'kv_cache', 'cuda_graph']);
export type MemoryTag = z.infer<typeof MemoryTagSchema>;
export const MEMORY_TAGS: readonly MemoryTag[] = MemoryTagSchema.options;

/** tags null or absent = all. */
export const MemoryOccupationRequestSchema = z.looseObject({ tags: z.array(MemoryTagSchema).nullish() });
export type MemoryOccupationRequest = z.infer<typeof MemoryOccupationRequestSchema>;

export const UpdateWeightsFromDiskRequestSchema = z.looseObject({
  model_path: z.string().min(1),
  load_format: z.string().nullish(),
  abort_all_requests: z.boolean().optional(),
  weight_version: z.string().nullish(),
  is_async: z.boolean().optional(),
  torch_empty_cache: z.boolean().optional(),
  keep_pause: z.boolean().optional(),
});
export type UpdateWeightsFromDiskRequest = z.infer<typeof UpdateWeightsFromDiskRequestSchema>;

export const UpdateWeightsFromDiskResponseSchema = z.looseObject({
  success: z.boolean(),
  message: z.string(),
  // Older engines leave it out; their `{success: false}` must still read as a failure, not a bad answer.
  num_paused_requests: z.number().int().nonnegative().optional(),
});
export type UpdateWeightsFromDiskResponse = z.infer<typeof UpdateWeightsFromDiskResponseSchema>;

/** `{success, message}` of the weight-update-group endpoints. */
export const SuccessMessageSchema = z.looseObject({ success: z.boolean(), message: z.string() });
export type SuccessMessage = z.infer<typeof SuccessMessageSchema>;

export const DEFAULT_WEIGHT_UPDATE_GROUP = 'weight_update_group';

export const InitWeightsUpdateGroupRequestSchema = z.looseObject({
  master_address: z.string().min(1),
  master_port: z.number().int().min(1).max(65535),
  rank_offset: z.number().int().nonnegative(),
  world_size: z.number().int().positive(),
  group_name: z.string().optional(),
  backend: z.string().optional(),
});
export type InitWeightsUpdateGroupRequest = z.infer<typeof InitWeightsUpdateGroupRequestSchema>;

export const DestroyWeightsUpdateGroupRequestSchema = z.looseObject({ group_name: z.string().optional() });
export type DestroyWeightsUpdateGroupRequest = z.infer<typeof DestroyWeightsUpdateGroupRequestSchema>;

export const UpdateWeightsFromDistributedRequestSchema = z
  .looseObject({
    names: z.array(z.string()).min(1),
    dtypes: z.array(z.string()),
    shapes: z.array(z.array(z.number().int().nonnegative())),
    group_name: z.string().optional(),
    flush_cache: z.boolean().optional(),
    abort_all_requests: z.boolean().optional(),
    weight_version: z.string().nullish(),
    load_format: z.string().nullish(),
  })
  .refine((r) => r.dtypes.length === r.names.length && r.shapes.length === r.names.length, {
    message: 'names, dtypes and shapes must have the same length',
    path: ['dtypes'],
  });
export type UpdateWeightsFromDistributedRequest = z.infer<typeof UpdateWeightsFromDistributedRequestSchema>;

export const UpdateWeightsFromTensorRequestSchema = z.looseObject({
  serialized_named_tensors: z.array(z.unknown()),
  load_format: z.string().nullish(),
  flush_cache: z.boolean().optional(),
  abort_all_requests: z.boolean().optional(),
  weight_version: z.string().nullish(),
});
export type UpdateWeightsFromTensorRequest = z.infer<typeof UpdateWeightsFromTensorRequestSchema>;

export const UpdateWeightVersionRequestSchema = z.looseObject({
  new_version: z.string().min(1),
  abort_all_requests: z.boolean().optional(),
});
export type UpdateWeightVersionRequest = z.infer<typeof UpdateWeightVersionRequestSchema>;

export const UpdateWeightVersionResponseSchema = z.looseObject({
  success: z.boolean(),
  message: z.string(),
  new_version: z.string().optional(),
});
export type UpdateWeightVersionResponse = z.infer<typeof UpdateWeightVersionResponseSchema>;

/** The plain-text bodies SGLang answers /flush_cache with (200 and 400 carry the same text). */
export const FLUSH_CACHE_TEXT =
  'Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n';
