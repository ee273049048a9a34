import { z } from 'zod';
import { BatchStageSchema } from './batch-states.ts';
import { CircuitStateSchema, DiscoverySnapshotSchema } from './discovery.ts';
import { EngineWorkerTypeSchema, RoleSchema } from './model.ts';
import { PlacementPlanSchema } from './plan.ts';
import { ReplicaStateSchema } from './states.ts';

/** The operator console's view of the whole service, as the gateway's tRPC `state` query and `changes`
 * subscription deliver it. One schema so the gateway (producer) and the console (consumer) cannot drift. Times are
 * epoch milliseconds. */

export const GpuRefSchema = z.object({ node: z.string(), gpu_ids: z.array(z.number().int().nonnegative()) });
export type GpuRef = z.infer<typeof GpuRefSchema>;

export const HealthSampleSchema = z.object({
  at: z.number(),
  ok: z.boolean(),
  latency_ms: z.number().nullable(),
  error: z.string().nullable(),
});
export type HealthSample = z.infer<typeof HealthSampleSchema>;

export const ReplicaViewSchema = z.object({
  role: RoleSchema,
  model: z.string(),
  engine_id: z.string(),
  group: z.number().int().nonnegative(),
  worker_type: EngineWorkerTypeSchema,
  base_url: z.string().nullable(),
  state: ReplicaStateSchema,
  direct_eligible: z.boolean(),
  weight_version: z.string().nullable(),
  /** The SGLang release the engine reports (null until it was healthy once). */
  sglang_version: z.string().nullable(),
  inflight: z.number().int().nonnegative(),
  /** The gateway's circuit breaker of this replica; null when the model is routed by an SGLang router. */
  circuit: CircuitStateSchema.nullable(),
  generation: z.number().int().nonnegative(),
  /** Where the plan put it, and where it actually runs (null while unknown); a mismatch stands out. */
  planned: z.array(GpuRefSchema),
  actual: z.array(GpuRefSchema).nullable(),
  health: z.array(HealthSampleSchema),
});
export type ReplicaView = z.infer<typeof ReplicaViewSchema>;

export const PhaseTransitionViewSchema = z.object({
  id: z.string(),
  from: z.string().nullable(),
  to: z.string(),
  started_at: z.number(),
  ended_at: z.number().nullable(),
  duration_ms: z.number().nullable(),
  status: z.enum(['running', 'ok', 'failed']),
  error: z.string().nullable(),
});
export type PhaseTransitionView = z.infer<typeof PhaseTransitionViewSchema>;

export const ActivationGroupViewSchema = z.object({
  name: z.string(),
  pool: z.string(),
  phases: z.array(z.object({ name: z.string(), residents: z.array(z.string()) })),
  current_phase: z.string().nullable(),
  lease_holder: z.string().nullable(),
  blocked: z.object({ reason: z.string(), at: z.number() }).nullable(),
  barriers: z.array(
    z.object({ phase: z.string(), waiting: z.number().int().nonnegative(), since: z.number() }),
  ),
  transitions: z.array(PhaseTransitionViewSchema),
});
export type ActivationGroupView = z.infer<typeof ActivationGroupViewSchema>;

export const BatchViewSchema = z.object({
  id: z.string(),
  /** The role that scores it (`scorerOf(batch kind)`). */
  kind: RoleSchema,
  state: BatchStageSchema,
  size: z.number().int().nonnegative(),
  created_at: z.number(),
  started_at: z.number().nullable(),
  ended_at: z.number().nullable(),
  /** Why it failed; for a queued batch, why its last run was put back (it runs again in the next scorer phase, or
   * after a backoff for a role without a defer schedule). */
  failure: z.string().nullable(),
});
export type BatchView = z.infer<typeof BatchViewSchema>;

export const EventViewSchema = z.object({
  id: z.number().int().nonnegative(),
  at: z.number(),
  /** e.g. `replica.transition`, `phase.transition`, `admin.drain`, `batch.committed`. */
  kind: z.string(),
  /** `system`, or who did it (`admin`, `console`, `driver`). */
  actor: z.string(),
  subject: z.string(),
  message: z.string(),
});
export type EventView = z.infer<typeof EventViewSchema>;

export const ConsoleStateSchema = z.object({
  generated_at: z.number(),
  cluster: z.object({ nodes: z.array(z.object({ name: z.string(), gpus: z.number().int().nonnegative() })) }),
  plan: PlacementPlanSchema,
  roles: z.array(DiscoverySnapshotSchema),
  replicas: z.array(ReplicaViewSchema),
  activation_groups: z.array(ActivationGroupViewSchema),
  batches: z.array(BatchViewSchema),
  /** Newest last; bounded. */
  events: z.array(EventViewSchema),
});
export type ConsoleState = z.infer<typeof ConsoleStateSchema>;
