import type { WeightUpdate } from '@uis/sglang-engine';
import { z } from 'zod';

const DiskUpdateSchema = z.strictObject({
  source: z.literal('disk'),
  model_path: z.string().min(1),
  weight_version: z.string().min(1),
  load_format: z.string().optional(),
});
const VersionUpdateSchema = z.strictObject({
  source: z.literal('version'),
  weight_version: z.string().min(1),
});
const DistributedUpdateSchema = z
  .strictObject({
    source: z.literal('distributed'),
    action: z.literal('update'),
    weight_version: z.string().min(1),
    names: z.array(z.string().min(1)).min(1),
    dtypes: z.array(z.string().min(1)).min(1),
    shapes: z.array(z.array(z.number().int().nonnegative())).min(1),
    group_name: z.string().min(1).default('weight_update_group'),
    flush_cache: z.boolean().default(true),
  })
  .refine((r) => r.names.length === r.dtypes.length && r.names.length === r.shapes.length, {
    path: ['names'],
    message: 'names, dtypes and shapes must have the same length',
  });

/** The admin API's weight update body (parsed at the edge). `distributed` is SGLang's NCCL protocol in three
 * calls: init the group, update (names/dtypes/shapes of tensors the trainer broadcasts), destroy. */
export const WeightUpdateRequestSchema = z.discriminatedUnion('source', [
  DiskUpdateSchema,
  VersionUpdateSchema,
  z.discriminatedUnion('action', [
    z.strictObject({
      source: z.literal('distributed'),
      action: z.literal('init'),
      master_address: z.string().min(1),
      master_port: z.number().int().min(1).max(65535),
      /** Rank of the first engine rank; engine i gets rank_offset + i * gpus_per_engine. Default 1 (trainer = 0). */
      rank_offset: z.number().int().nonnegative().default(1),
      world_size: z.number().int().positive(),
      group_name: z.string().min(1).default('weight_update_group'),
      backend: z.string().default('nccl'),
    }),
    DistributedUpdateSchema,
    z.strictObject({
      source: z.literal('distributed'),
      action: z.literal('destroy'),
      group_name: z.string().min(1).default('weight_update_group'),
    }),
  ]),
]);
/** An update that sets a version on every replica: what a weight switch loads (disk, a relabel after tensors the
 * trainer pushed, or NCCL over a group already initialised). */
export const VersionedWeightUpdateSchema = z.discriminatedUnion('source', [
  DiskUpdateSchema,
  VersionUpdateSchema,
  DistributedUpdateSchema,
]);
export type WeightUpdateRequest = z.input<typeof WeightUpdateRequestSchema>;
export type ParsedWeightUpdate = z.infer<typeof WeightUpdateRequestSchema>;
/** The updates that set a version on every replica (not the group's init/destroy). */
export type VersionedWeightUpdate = Extract<ParsedWeightUpdate, { weight_version: string }>;
/** The updates a replica that comes back can replay by itself (a distributed one needs the trainer). */
export type ReplayableWeightUpdate = Extract<ParsedWeightUpdate, { source: 'disk' | 'version' }>;

/** The engine call of a versioned update, for a live update and for a replay alike. */
export function engineWeightUpdate(req: VersionedWeightUpdate): WeightUpdate {
  switch (req.source) {
    case 'disk':
      return {
        source: 'disk',
        modelPath: req.model_path,
        weightVersion: req.weight_version,
        ...(req.load_format ? { loadFormat: req.load_format } : {}),
      };
    case 'version':
      return { source: 'version', weightVersion: req.weight_version };
    case 'distributed':
      return {
        source: 'distributed',
        weightVersion: req.weight_version,
        names: req.names,
        dtypes: req.dtypes,
        shapes: req.shapes,
        groupName: req.group_name,
        flushCache: req.flush_cache,
      };
  }
}

export interface WeightUpdateResult {
  model: string;
  /** The model's target version after the call (unchanged by init/destroy). */
  weight_version: string | null;
  engines: Array<{ engine_id: string; ok: boolean; weight_version: string | null; error?: string }>;
}
