import { WeightUpdateRequestSchema } from '@uis/manager';
import { admin, modelSubject, RoleModel } from './common.ts';
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
};
