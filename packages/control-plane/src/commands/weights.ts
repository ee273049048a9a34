import { WeightSwitchRecordSchema, WeightSwitchRequestSchema, WeightUpdateRequestSchema } from '@uis/manager';
import { z } from 'zod';
import { admin, modelSubject, None, RoleModel, servingRead } from './common.ts';
import { defineCommand } from './define.ts';
import { WeightUpdateResultSchema } from './wire.ts';

/** New weights into every replica of a model. */
export const weightCommands = {
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
  switch_weights: defineCommand({
    ...admin,
    name: 'switch_weights',
    summary:
      'Switch every replica of a model to new weights as one step (mode drain, pause_in_place or abort); failed replicas are quarantined',
    method: 'POST',
    path: '/roles/:role/models/:model/weights/switch',
    params: RoleModel,
    input: WeightSwitchRequestSchema,
    output: WeightSwitchRecordSchema,
    audit: modelSubject,
    // An idempotency key queues this switch behind a running one; without one a concurrent switch is 409.
    handler: (plane, { params, input }, ctx) =>
      plane.managerOf(params.role).switchWeights(params.model, input, { queued: ctx.operationId !== null }),
  }),
  weight_switches: defineCommand({
    ...servingRead,
    name: 'weight_switches',
    summary: "A model's weight switches, oldest first: mode, duration, outcome and each replica's version",
    method: 'GET',
    path: '/roles/:role/models/:model/weights/switches',
    params: RoleModel,
    input: None,
    output: z
      .object({ model: z.string(), switching: z.boolean(), switches: z.array(WeightSwitchRecordSchema) })
      .meta({ title: 'WeightSwitches' }),
    handler: (plane, { params }) => {
      const manager = plane.managerOf(params.role);
      return {
        model: params.model,
        switches: manager.weightSwitches(params.model),
        switching: manager.switching(params.model),
      };
    },
  }),
};
