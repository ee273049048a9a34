import type { Lease, OffloadReport } from '@uis/manager';
import { MemoryTagSchema } from '@uis/sglang-engine';
import {
  BatchKindSchema,
  BatchStateSchema,
  LeaseStatusSchema,
  ModelDesireSchema,
  ReplicaStateSchema,
} from '@uis/spec';
import { z } from 'zod';

/** The JSON shapes the operator commands answer with (snake_case throughout), and the views that turn the
 * manager's objects into them. The OpenAPI document is generated from these. */

export const EngineReleaseSchema = z
  .object({
    engine_id: z.string(),
    memory_released: z.boolean(),
    state: z.string(),
  })
  .meta({ title: 'EngineRelease' });

/** A drain or deactivation: whether every engine reported its memory released. */
export const OffloadReportSchema = z
  .object({
    memory_released: z.boolean(),
    engines: z.array(EngineReleaseSchema),
  })
  .meta({ title: 'OffloadReport' });
export function offloadView(r: OffloadReport): z.infer<typeof OffloadReportSchema> {
  return { memory_released: r.memoryReleased, engines: r.engines };
}

export const LeaseSchema = z
  .object({
    group: z.string(),
    /** The resident phase (while transitioning: the phase being left). */
    phase: z.string().nullable(),
    holder: z.array(z.string()),
    status: LeaseStatusSchema,
    reason: z.string().nullable(),
    target: z.string().nullable(),
    /** Proof recorded at the last transition: the roles that left and whether each engine released its memory. */
    last_release: z
      .object({
        phase: z.string().nullable(),
        roles: z.array(z.string()),
        engines: z.array(EngineReleaseSchema),
        at: z.number(),
      })
      .meta({ title: 'ReleaseProof' })
      .nullable(),
    since: z.number(),
  })
  .meta({ title: 'Lease' });
export type LeaseView = z.infer<typeof LeaseSchema>;
export function leaseView(l: Lease): LeaseView {
  return {
    group: l.group,
    phase: l.phase,
    holder: l.holder,
    status: l.status,
    reason: l.reason,
    target: l.target,
    last_release: l.lastRelease,
    since: l.since,
  };
}

export const TransitionResultSchema = z
  .object({
    group: z.string(),
    from: z.string().nullable(),
    to: z.string(),
    /** Every phase entered (auto-advanced scorer phases included), in order. */
    path: z.array(z.string()),
    duration_ms: z.number(),
    steps: z.array(
      z
        .object({ step: z.string(), phase: z.string(), duration_ms: z.number() })
        .meta({ title: 'TransitionStep' }),
    ),
  })
  .meta({ title: 'Transition' });

export const WeightUpdateResultSchema = z
  .object({
    model: z.string(),
    weight_version: z.string().nullable(),
    engines: z.array(
      z
        .object({
          engine_id: z.string(),
          ok: z.boolean(),
          weight_version: z.string().nullable(),
          error: z.string().optional(),
        })
        .meta({ title: 'EngineWeightUpdate' }),
    ),
  })
  .meta({ title: 'WeightUpdate' });

export const ManagerSnapshotSchema = z
  .object({
    role: z.string(),
    started: z.boolean(),
    shutdown: z.boolean(),
    models: z.record(
      z.string(),
      z
        .object({
          desire: ModelDesireSchema,
          held: z.boolean(),
          target_weight_version: z.string().nullable(),
          replicas: z.array(
            z
              .object({
                engine_id: z.string(),
                state: ReplicaStateSchema,
                base_url: z.string().nullable(),
                weight_version: z.string().nullable(),
                /** Its update failed in a weight switch: not routable until an operator restarts it. */
                quarantined: z.boolean(),
                /** The SGLang release the engine reports (server info), once it was healthy. */
                sglang_version: z.string().nullable(),
                generation: z.number().int(),
                memory_released: z.boolean(),
                external: z.boolean(),
                elastic: z.boolean(),
                failures: z.number().int(),
                pids: z.array(z.number().int()),
              })
              .meta({ title: 'ManagedReplica' }),
          ),
        })
        .meta({ title: 'ManagedModel' }),
    ),
    created_pgs: z.array(z.string()),
  })
  .meta({ title: 'ManagerSnapshot' });

export const BatchInfoSchema = z
  .object({
    id: z.string(),
    kind: BatchKindSchema,
    role: z.string(),
    model: z.string().nullable(),
    state: BatchStateSchema,
    reason: z.string().nullable(),
    attempts: z.number().int(),
    samples: z.number().int(),
    results: z.number().int(),
    created_at: z.number(),
    updated_at: z.number(),
    /** When its last run began; null until it first ran. */
    started_at: z.number().nullable(),
    committed_at: z.number().nullable(),
  })
  .meta({ title: 'Batch' });

/** A committed sample's output: a GenRM verdict, or teacher logprobs. */
export const SampleOutputSchema = z.union([
  z.object({ response: z.string(), score: z.number() }).meta({ title: 'GenrmVerdict' }),
  z
    .object({ logprobs: z.array(z.number().nullable()), token_ids: z.array(z.number().int()) })
    .meta({ title: 'TeacherLogprobs' }),
]);

export const AuditEventSchema = z
  .object({
    seq: z.number().int(),
    at: z.number(),
    kind: z.string(),
    subject: z.string(),
    actor: z.string().nullable(),
    operation_id: z.string().nullable(),
    duration_ms: z.number().nullable(),
    data: z.record(z.string(), z.json()),
  })
  .meta({ title: 'Event' });

/** Memory a model onloads: all of it by default. */
export const MemoryTagsSchema = z.array(MemoryTagSchema).min(1).optional();
