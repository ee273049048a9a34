import { createHash } from 'node:crypto';
import type { WeightUpdate } from '@uis/sglang-engine';
import { UisError } from '@uis/spec';
import { z } from 'zod';

/** A string as SGLang's base64 decoding with validate=True takes it (standard alphabet, padded); anything else
 * raises in its scheduler before 0.5.15, which takes the engine down. */
const Base64Schema = z
  .string()
  .min(4)
  .regex(/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$/, {
    message: 'not base64 (standard alphabet, padded)',
  });

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

/** SGLang's update_weights_from_tensor for every replica of a switch: per TP rank one payload, base64 of what
 * SGLang's MultiprocessingSerializer made of the rank's named tensors (their bytes, or CUDA IPC handles of tensors
 * a co-located trainer holds: then each replica needs its own). Either one list for every replica or one per
 * replica (`per_engine`, by engine id, naming each replica of the switch). */
const TensorUpdateSchema = z
  .strictObject({
    source: z.literal('tensor'),
    weight_version: z.string().min(1),
    serialized_named_tensors: z.array(Base64Schema).min(1).optional(),
    per_engine: z.record(z.string().min(1), z.array(Base64Schema).min(1)).optional(),
    load_format: z.string().min(1).optional(),
    flush_cache: z.boolean().default(true),
  })
  .refine((r) => (r.serialized_named_tensors === undefined) !== (r.per_engine === undefined), {
    path: ['serialized_named_tensors'],
    message:
      'give serialized_named_tensors (the same for every replica) or per_engine (one list per replica)',
  });
export type TensorWeightUpdate = z.infer<typeof TensorUpdateSchema>;

/** The admin API's weight update body (parsed at the edge). `distributed` is SGLang's NCCL protocol in three
 * calls: init the group, update (names/dtypes/shapes of tensors the trainer broadcasts), destroy. */
export const WeightUpdateRequestSchema = z.discriminatedUnion('source', [
  DiskUpdateSchema,
  VersionUpdateSchema,
  TensorUpdateSchema,
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
 * trainer pushed, NCCL over a group already initialised, or serialized tensors). */
export const VersionedWeightUpdateSchema = z.discriminatedUnion('source', [
  DiskUpdateSchema,
  VersionUpdateSchema,
  DistributedUpdateSchema,
  TensorUpdateSchema,
]);
export type WeightUpdateRequest = z.input<typeof WeightUpdateRequestSchema>;
export type ParsedWeightUpdate = z.infer<typeof WeightUpdateRequestSchema>;
/** The updates that set a version on every replica (not the group's init/destroy). */
export type VersionedWeightUpdate = Extract<ParsedWeightUpdate, { weight_version: string }>;
/** The updates a replica can load by itself later (a distributed one needs the trainer): what replicas asleep at an
 * update load when they onload. Tensors only from update_weights (a co-located trainer keeps its buffers until the
 * replicas report the version); a switch keeps none. */
export type ReplayableWeightUpdate = Extract<ParsedWeightUpdate, { source: 'disk' | 'version' | 'tensor' }>;

/** The engine call of a versioned update, for a live update and for a replay alike; a tensor update's payload is
 * the replica's own under `per_engine` (checked present before the switch touches any replica). */
export function engineWeightUpdate(
  req: VersionedWeightUpdate | TensorWeightUpdate,
  engineId?: string,
): WeightUpdate {
  switch (req.source) {
    case 'tensor':
      return {
        source: 'tensor',
        weightVersion: req.weight_version,
        serializedNamedTensors:
          req.serialized_named_tensors ??
          (engineId === undefined ? undefined : req.per_engine?.[engineId]) ??
          [],
        flushCache: req.flush_cache,
        ...(req.load_format ? { loadFormat: req.load_format } : {}),
      };
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

/** Refuses a tensor update some replica of the switch (or of update_weights: every replica of the model, at `body`)
 * cannot take, before any replica is touched: `per_engine`
 * naming another engine or missing one, a replica with data parallelism (SGLang asserts dp_size 1), or a payload
 * list that is not one entry per TP rank (SGLang's rank r reads entry r: too few raises in its scheduler, which
 * takes the engine down). Paths are the body's (`update.…`). */
export function checkTensorUpdate(
  req: TensorWeightUpdate,
  replicas: Array<{ engineId: string; tp: number; dp: number }>,
  at = 'update',
): void {
  const bad = (path: string, message: string) =>
    new UisError({ code: 'invalid_weight_update', path: `${at}.${path}`, message });
  const ids = new Set(replicas.map((r) => r.engineId));
  for (const id of Object.keys(req.per_engine ?? {}))
    if (!ids.has(id)) throw bad(`per_engine.${id}`, `${id} is not a replica this switch updates`);
  for (const r of replicas) {
    if (r.dp > 1)
      throw bad('source', `${r.engineId} runs dp ${r.dp}: SGLang updates weights from tensors only at dp 1`);
    const list = req.serialized_named_tensors ?? req.per_engine?.[r.engineId];
    const path = req.serialized_named_tensors ? 'serialized_named_tensors' : `per_engine.${r.engineId}`;
    if (list === undefined) throw bad(path, `no payload for ${r.engineId}`);
    if (list.length !== r.tp)
      throw bad(
        path,
        `${r.engineId} has tp ${r.tp}: give one payload per TP rank (${r.tp}), not ${list.length}`,
      );
  }
}

/** What names an update in the operation queue (equal updates join) and in its audit event: the request itself,
 * but a tensor update's payload (gigabytes of base64 at real sizes) only by its SHA-256. */
export function weightUpdateKey(req: ParsedWeightUpdate): string {
  if (req.source !== 'tensor') return JSON.stringify(req);
  const digest = createHash('sha256').update(JSON.stringify(req)).digest('hex').slice(0, 16);
  return JSON.stringify({ source: 'tensor', weight_version: req.weight_version, sha256: digest });
}
