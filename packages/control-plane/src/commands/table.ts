import { BatchKindSchema, OperatorIntentKindSchema, WeightUpdateRequestSchema } from '@uis/manager';
import { UisError } from '@uis/spec';
import { z } from 'zod';
import { ModelReplicaSchema, ModelReplicasSchema, modelReplicas } from '../model-replicas.ts';
import { submitBatch } from '../submit-batch.ts';
import { type AnyCommand, defineCommand } from './define.ts';
import {
  AuditEventSchema,
  BatchInfoSchema,
  LeaseSchema,
  leaseView,
  ManagerSnapshotSchema,
  MemoryTagsSchema,
  OffloadReportSchema,
  offloadView,
  SampleOutputSchema,
  TransitionResultSchema,
  WeightUpdateResultSchema,
} from './wire.ts';

/**
 * Every operator command, once. Add a command here (and a test beside it): the admin REST route, the tRPC
 * procedure, the CLI subcommand, the audit record, idempotency and the OpenAPI entry all follow from the entry.
 */

const Role = z.strictObject({ role: z.string().min(1) });
const RoleModel = z.strictObject({ role: z.string().min(1), model: z.string().min(1) });
const Batch = z.strictObject({ id: z.string().min(1) });
const None = z.strictObject({});
const Drain = z.strictObject({
  deadline_ms: z.number().int().nonnegative().optional(),
  policy: z.enum(['wait', 'abort', 'retract', 'in_place']).optional(),
});
const Activate = z.strictObject({ tags: MemoryTagsSchema });
const Engine = z.strictObject({ engine_id: z.string().min(1) });
const GroupOf = z.string().min(1).optional();

const drainOpts = (b: z.infer<typeof Drain>) => ({
  ...(b.deadline_ms === undefined ? {} : { deadlineMs: b.deadline_ms }),
  ...(b.policy === undefined ? {} : { policy: b.policy }),
});
const roleSubject = { subject: ({ params }: { params: { role: string } }) => params.role };
const modelSubject = {
  subject: ({ params }: { params: { role: string; model: string } }) => `${params.role}/${params.model}`,
};
const engineSubject = { subject: ({ input }: { input: { engine_id: string } }) => input.engine_id };
/** Mutations: the admin token. */
const admin = { permission: 'admin', idempotency: 'keyed' } as const;
/** Reads and waits, which change nothing: the serving token (what rollout workers and the trainer hold) or the
 * admin token; open when no serving token is configured, like discovery. */
const servingRead = { permission: 'serving', idempotency: 'none', audit: null } as const;

const roleCommands = {
  activate: defineCommand({
    ...admin,
    name: 'activate',
    summary: "Onload every model of a role (409 phase_not_resident outside the role's phase)",
    method: 'POST',
    path: '/roles/:role/activate',
    params: Role,
    input: Activate,
    output: z.null(),
    audit: roleSubject,
    handler: async (plane, { params, input }) => {
      await plane.activateRole(params.role, input.tags);
      return null;
    },
  }),
  drain: defineCommand({
    ...admin,
    name: 'drain',
    summary:
      "Drain every model of a role: stop new work, wait for in-flight work, release GPU memory; in force (across a restart too) until the role's next activation",
    method: 'POST',
    path: '/roles/:role/drain',
    params: Role,
    input: Drain,
    output: OffloadReportSchema,
    audit: roleSubject,
    handler: async (plane, { params, input }, ctx) => {
      const manager = plane.managerOf(params.role);
      plane.intents.roleDrained(params.role, ctx);
      return offloadView(await manager.drain(drainOpts(input)));
    },
  }),
  deactivate: defineCommand({
    ...admin,
    name: 'deactivate',
    summary: 'Sleep every model of a role now, aborting in-flight work',
    method: 'POST',
    path: '/roles/:role/deactivate',
    params: Role,
    input: None,
    output: OffloadReportSchema,
    audit: roleSubject,
    handler: async (plane, { params }, ctx) => {
      const manager = plane.managerOf(params.role);
      plane.intents.roleDrained(params.role, ctx);
      return offloadView(await manager.deactivate());
    },
  }),
  activate_model: defineCommand({
    ...admin,
    name: 'activate_model',
    summary:
      "Onload one model; outside its phase only an operator's hold is lifted (it onloads with its phase)",
    method: 'POST',
    path: '/roles/:role/models/:model/activate',
    params: RoleModel,
    input: Activate,
    output: z.object({
      onloaded: z.boolean(),
      waits_for: z
        .object({ group: z.string(), phase: z.string().nullable(), phases: z.array(z.string()) })
        .optional(),
    }),
    audit: modelSubject,
    handler: (plane, { params, input }) => plane.activateModel(params.role, params.model, input.tags),
  }),
  drain_model: defineCommand({
    ...admin,
    name: 'drain_model',
    summary: 'Drain one model and hold it asleep across phase changes and restarts until it is activated',
    method: 'POST',
    path: '/roles/:role/models/:model/drain',
    params: RoleModel,
    input: Drain,
    output: OffloadReportSchema,
    audit: modelSubject,
    handler: async (plane, { params, input }, ctx) => {
      const manager = plane.managerOf(params.role);
      plane.intents.modelHeld(params.role, params.model, ctx);
      return offloadView(await manager.drainModel(params.model, drainOpts(input)));
    },
  }),
  deactivate_model: defineCommand({
    ...admin,
    name: 'deactivate_model',
    summary: 'Sleep one model now, aborting in-flight work instead of waiting for it',
    method: 'POST',
    path: '/roles/:role/models/:model/deactivate',
    params: RoleModel,
    input: None,
    output: OffloadReportSchema,
    audit: modelSubject,
    handler: async (plane, { params }, ctx) => {
      const manager = plane.managerOf(params.role);
      plane.intents.modelHeld(params.role, params.model, ctx);
      return offloadView(await manager.drainModel(params.model, { policy: 'abort', deadlineMs: 0 }));
    },
  }),
  update_weights: defineCommand({
    ...admin,
    name: 'update_weights',
    summary: 'Load new weights into every replica of a model (disk, a version tag, or NCCL from the trainer)',
    method: 'POST',
    path: '/roles/:role/models/:model/weights',
    params: RoleModel,
    input: WeightUpdateRequestSchema,
    output: WeightUpdateResultSchema,
    audit: modelSubject,
    handler: (plane, { params, input }) => plane.managerOf(params.role).updateWeights(params.model, input),
  }),
  register_external: defineCommand({
    ...admin,
    name: 'register_external',
    summary: 'Attach an engine started elsewhere to a model, by URL',
    method: 'POST',
    path: '/roles/:role/models/:model/engines',
    params: RoleModel,
    input: z.strictObject({ url: z.string().min(1) }),
    output: z.object({ engine_id: z.string() }),
    audit: modelSubject,
    handler: (plane, { params, input }) =>
      plane.managerOf(params.role).registerExternal(params.model, input.url),
  }),
  unregister_external: defineCommand({
    ...admin,
    name: 'unregister_external',
    summary: 'Detach an external engine (it keeps running)',
    method: 'POST',
    path: '/roles/:role/engines/unregister',
    params: Role,
    input: Engine,
    output: z.object({ engine_id: z.string(), unregistered: z.literal(true) }),
    audit: engineSubject,
    handler: async (plane, { params, input }) => {
      await plane.managerOf(params.role).unregisterExternal(input.engine_id);
      return { engine_id: input.engine_id, unregistered: true as const };
    },
  }),
  restart_replica: defineCommand({
    ...admin,
    name: 'restart_replica',
    summary: 'Stop and relaunch one replica (a sleeping model relaunches it when it onloads)',
    method: 'POST',
    path: '/roles/:role/engines/restart',
    params: Role,
    input: Engine,
    output: z.object({ engine_id: z.string(), restarted: z.boolean(), deferred: z.string().optional() }),
    audit: engineSubject,
    handler: async (plane, { params, input }) => {
      const r = await plane.managerOf(params.role).restartReplica(input.engine_id);
      return {
        engine_id: input.engine_id,
        restarted: r.restarted,
        ...(r.restarted
          ? {}
          : { deferred: 'the model is asleep: the replica relaunches when the model onloads' }),
      };
    },
  }),
  list_replicas: defineCommand({
    ...servingRead,
    name: 'list_replicas',
    summary: "A model's replicas with URL, state, version, TP/PP and each rank's node and GPU id",
    method: 'GET',
    path: '/roles/:role/models/:model/replicas',
    params: RoleModel,
    input: None,
    output: ModelReplicasSchema,
    handler: (plane, { params }) => modelReplicas(plane, params.role, params.model),
  }),
  get_replica: defineCommand({
    ...servingRead,
    name: 'get_replica',
    summary: 'One replica by engine id: URL, state, weight version, ranks and GPUs',
    method: 'GET',
    path: '/roles/:role/engines/:engine_id',
    params: z.strictObject({ role: z.string().min(1), engine_id: z.string().min(1) }),
    input: None,
    output: ModelReplicaSchema.extend({ role: z.string(), model: z.string() }),
    handler: (plane, { params }) => {
      const models = plane.managerOf(params.role).snapshot().models;
      for (const [model, m] of Object.entries(models))
        if (m.replicas.some((r) => r.engine_id === params.engine_id)) {
          const replica = modelReplicas(plane, params.role, model).replicas.find(
            (r) => r.engine_id === params.engine_id,
          );
          if (replica) return { ...replica, role: params.role, model };
        }
      throw new UisError({
        code: 'unknown_engine',
        path: 'engine_id',
        message: `role ${params.role} has no replica ${JSON.stringify(params.engine_id)}`,
      });
    },
  }),
  list_roles: defineCommand({
    ...servingRead,
    name: 'list_roles',
    summary: "Every role's manager state: models, desire, holds, replicas",
    method: 'GET',
    path: '/roles',
    params: None,
    input: None,
    output: z.object({ roles: z.record(z.string(), ManagerSnapshotSchema) }),
    handler: (plane) => ({
      roles: Object.fromEntries([...plane.managers].map(([role, m]) => [role, m.snapshot()])),
    }),
  }),
  list_intents: defineCommand({
    ...servingRead,
    name: 'list_intents',
    summary: "The operator's standing drains and holds: what a restart re-applies before it serves",
    method: 'GET',
    path: '/intents',
    params: None,
    input: None,
    output: z.object({
      intents: z.array(
        z.object({
          role: z.string(),
          model: z.string(),
          intent: OperatorIntentKindSchema,
          actor: z.string().nullable(),
          operation_id: z.string().nullable(),
          at: z.number(),
        }),
      ),
    }),
    handler: (plane) => ({ intents: plane.intents.list() }),
  }),
};

const phaseCommands = {
  list_phases: defineCommand({
    ...servingRead,
    name: 'list_phases',
    summary: 'The activation lease of every group',
    method: 'GET',
    path: '/phases',
    params: None,
    input: None,
    output: z.object({ leases: z.array(LeaseSchema) }),
    handler: (plane) => ({ leases: plane.coordinator.leases().map(leaseView) }),
  }),
  advance_phase: defineCommand({
    ...admin,
    name: 'advance_phase',
    summary: 'Move an activation group to its next phase (or to `to`): drain, release memory, onload',
    method: 'POST',
    path: '/phases/advance',
    params: None,
    input: z.strictObject({ group: GroupOf, to: z.string().min(1).optional() }),
    output: TransitionResultSchema,
    audit: { subject: ({ input }, plane) => plane.coordinator.groupName(input.group) ?? 'default' },
    handler: (plane, { input }, ctx) =>
      plane.coordinator.transition({
        ...(input.group === undefined ? {} : { group: input.group }),
        ...(input.to === undefined ? {} : { to: input.to }),
        actor: ctx.actor,
      }),
  }),
  resolve_lease: defineCommand({
    ...admin,
    name: 'resolve_lease',
    summary: 'Unblock a blocked lease: the operator attests which phase really holds the GPUs',
    method: 'POST',
    path: '/phases/resolve',
    params: None,
    input: z.strictObject({ group: GroupOf, phase: z.string().min(1), note: z.string().optional() }),
    output: LeaseSchema,
    audit: { subject: ({ input }, plane) => plane.coordinator.groupName(input.group) ?? 'default' },
    handler: (plane, { input }, ctx) =>
      leaseView(
        plane.coordinator.resolve({
          phase: input.phase,
          actor: ctx.actor,
          ...(input.group === undefined ? {} : { group: input.group }),
          ...(input.note === undefined ? {} : { note: input.note }),
        }),
      ),
  }),
  wait_barrier: defineCommand({
    ...servingRead,
    name: 'wait_barrier',
    summary: 'Wait (up to timeout_s) until `phase` is resident; the trainer blocks here',
    method: 'POST',
    path: '/barriers/wait',
    params: None,
    input: z.strictObject({
      phase: z.string().min(1),
      group: GroupOf,
      timeout_s: z.number().positive().max(3600).default(600),
    }),
    output: LeaseSchema,
    handler: async (plane, { input }, ctx) =>
      leaseView(
        await plane.barriers.wait(input.group ?? null, input.phase, () =>
          // A trainer that gives up (disconnects) stops counting as a waiter at once.
          plane.coordinator.waitForPhase(input.phase, input.timeout_s * 1000, input.group, ctx.signal),
        ),
      ),
  }),
  release_barrier: defineCommand({
    ...admin,
    name: 'release_barrier',
    summary: 'The trainer is done with `phase`: move the group on (e.g. train -> rollout)',
    method: 'POST',
    path: '/barriers/release',
    params: None,
    input: z.strictObject({ phase: z.string().min(1), group: GroupOf }),
    output: TransitionResultSchema,
    audit: {
      subject: ({ input }, plane) =>
        `${plane.coordinator.groupName(input.group) ?? 'default'}/${input.phase}`,
    },
    handler: (plane, { input }, ctx) =>
      plane.coordinator.releasePhase(input.phase, {
        ...(input.group === undefined ? {} : { group: input.group }),
        actor: ctx.actor,
      }),
  }),
};

const MAX_RESULTS = 1000;
const batchCommands = {
  submit_batch: defineCommand({
    ...admin,
    name: 'submit_batch',
    summary: 'Create, fill and seal a deferred batch (GenRM messages or teacher token ids per sample)',
    method: 'POST',
    path: '/batches',
    params: None,
    input: z.strictObject({
      kind: BatchKindSchema,
      model: z.string().min(1).nullish(),
      /** `{sample_id, input}`; each input is checked against the batch kind's schema. */
      samples: z.array(z.json()).min(1),
    }),
    output: BatchInfoSchema,
    // A batch may hold thousands of samples: the audit record and its log line keep their count, the batch store
    // keeps the samples.
    audit: {
      subject: ({ input }) => input.kind,
      request: ({ input }) => ({
        kind: input.kind,
        model: input.model ?? null,
        samples: input.samples.length,
      }),
    },
    handler: (plane, { input }) => submitBatch(plane, input.kind, input.model ?? null, input.samples),
  }),
  list_batches: defineCommand({
    ...servingRead,
    name: 'list_batches',
    summary: 'Deferred batches, by state and role',
    method: 'GET',
    path: '/batches',
    params: None,
    input: z.object({
      state: z.enum(['open', 'sealed', 'running', 'committed', 'failed']).optional(),
      role: z.string().min(1).optional(),
    }),
    output: z.object({ batches: z.array(BatchInfoSchema) }),
    handler: (plane, { input }) => ({ batches: plane.store.list(input) }),
  }),
  get_batch: defineCommand({
    ...servingRead,
    name: 'get_batch',
    summary: 'One batch and, once committed, its outputs page by page (`after` a sample_id, at most `limit`)',
    method: 'GET',
    path: '/batches/:id',
    params: Batch,
    input: z.object({
      after: z.string().min(1).optional(),
      limit: z.coerce.number().int().positive().max(MAX_RESULTS).default(MAX_RESULTS),
    }),
    output: z.object({
      batch: BatchInfoSchema,
      /** Present once the batch is committed. */
      samples: z.array(z.object({ sample_id: z.string(), output: SampleOutputSchema.nullable() })).optional(),
      /** The cursor of the next page; null at the end (and before the batch is committed). */
      next_after: z.string().nullable(),
    }),
    handler: (plane, { params, input }) => {
      const batch = plane.store.get(params.id);
      if (batch.state !== 'committed') return { batch, next_after: null };
      const all = plane.store.samples(params.id);
      const start = input.after === undefined ? 0 : all.findIndex((s) => s.sample_id === input.after) + 1;
      if (start === 0 && input.after !== undefined)
        throw new UisError({
          code: 'invalid_input',
          path: 'query.after',
          message: `batch ${params.id} has no sample ${JSON.stringify(input.after)}; pass the last sample_id of a page`,
        });
      const page = all.slice(start, start + input.limit);
      const more = start + page.length < all.length;
      return {
        batch,
        samples: page.map((s) => ({ sample_id: s.sample_id, output: s.output })) as never,
        next_after: more ? (page.at(-1)?.sample_id ?? null) : null,
      };
    },
  }),
  list_events: defineCommand({
    ...servingRead,
    name: 'list_events',
    summary: 'The audit log: transitions, leases, operator commands, replica deaths',
    method: 'GET',
    path: '/events',
    params: None,
    input: z.object({
      after: z.coerce.number().int().nonnegative().optional(),
      limit: z.coerce.number().int().positive().max(1000).default(200),
      kind: z.string().min(1).optional(),
      subject: z.string().min(1).optional(),
    }),
    output: z.object({ events: z.array(AuditEventSchema) }),
    handler: (plane, { input }) => ({
      events: plane.events.list({
        limit: input.limit,
        ...(input.after === undefined ? {} : { afterSeq: input.after }),
        ...(input.kind === undefined ? {} : { kind: input.kind }),
        ...(input.subject === undefined ? {} : { subject: input.subject }),
      }) as never,
    }),
  }),
};

/** The command table. */
export const COMMAND_TABLE = { ...roleCommands, ...phaseCommands, ...batchCommands };

/** The table's commands in order. */
export const COMMANDS: readonly AnyCommand[] = Object.values(COMMAND_TABLE);
