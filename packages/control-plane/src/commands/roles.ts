import { OperatorIntentKindSchema } from '@uis/manager';
import { z } from 'zod';
import {
  Activate,
  admin,
  Drain,
  drainOpts,
  modelSubject,
  None,
  Role,
  RoleModel,
  roleSubject,
  servingRead,
} from './common.ts';
import { defineCommand } from './define.ts';
import { ManagerSnapshotSchema, OffloadReportSchema, offloadView } from './wire.ts';

/** A role's and a model's lifecycle (activate, drain, deactivate), the managers' state and the operator's standing
 * intents. */
export const roleCommands = {
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
    output: z
      .object({
        onloaded: z.boolean(),
        waits_for: z
          .object({ group: z.string(), phase: z.string().nullable(), phases: z.array(z.string()) })
          .meta({ title: 'ActivationWait' })
          .optional(),
      })
      .meta({ title: 'ModelActivation' }),
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
        z
          .object({
            role: z.string(),
            model: z.string(),
            intent: OperatorIntentKindSchema,
            actor: z.string().nullable(),
            operation_id: z.string().nullable(),
            at: z.number(),
          })
          .meta({ title: 'Intent' }),
      ),
    }),
    handler: (plane) => ({ intents: plane.intents.list() }),
  }),
};
