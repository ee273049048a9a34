import { ScaleKindSchema, ScaleOperationSchema, ScaleStateSchema } from '@uis/spec';
import { z } from 'zod';
import { ScaleInInputSchema, ScaleOutInputSchema } from '../scale-inputs.ts';
import { admin, None, Role, roleSubject, servingRead } from './common.ts';
import { defineCommand } from './define.ts';

const Request = z.strictObject({ request_id: z.string().min(1) });

/** Elastic scale: operations that add replicas (launched on reserved bundles, or attached by URL) or remove them,
 * each with its durable state; listed, read and cancelled by request id. */
export const scaleCommands = {
  scale_out: defineCommand({
    ...admin,
    name: 'scale_out',
    summary:
      "Scale a model out to num_replicas (absolute; NOOP when met) or attach engine_urls; new replicas join prechecked at the model's weight version",
    method: 'POST',
    path: '/roles/:role/scale_out',
    params: Role,
    input: ScaleOutInputSchema,
    output: ScaleOperationSchema,
    audit: roleSubject,
    handler: (plane, { params, input }, ctx) => plane.scale.scaleOut(params.role, input, ctx.actor),
  }),
  scale_in: defineCommand({
    ...admin,
    name: 'scale_in',
    summary:
      'Scale a model in to num_replicas or remove engine_urls: newest first, drained (timeout_secs), initial replicas only with force; dry_run previews',
    method: 'POST',
    path: '/roles/:role/scale_in',
    params: Role,
    input: ScaleInInputSchema,
    output: ScaleOperationSchema,
    audit: roleSubject,
    handler: (plane, { params, input }, ctx) => plane.scale.scaleIn(params.role, input, ctx.actor),
  }),
  list_scale_ops: defineCommand({
    ...servingRead,
    name: 'list_scale_ops',
    summary: 'Scale operations, newest first, by role, kind, status and model',
    method: 'GET',
    path: '/scale_ops',
    params: None,
    input: z.object({
      role: z.string().min(1).optional(),
      kind: ScaleKindSchema.optional(),
      status: ScaleStateSchema.optional(),
      model_name: z.string().min(1).optional(),
    }),
    output: z.object({ operations: z.array(ScaleOperationSchema) }),
    handler: (plane, { input }) => ({ operations: plane.scale.list(input) }),
  }),
  get_scale_op: defineCommand({
    ...servingRead,
    name: 'get_scale_op',
    summary: 'One scale operation by request id: its state, engines, failures and weight version',
    method: 'GET',
    path: '/scale_ops/:request_id',
    params: Request,
    input: None,
    output: ScaleOperationSchema,
    handler: (plane, { params }) => plane.scale.get(params.request_id),
  }),
  cancel_scale_op: defineCommand({
    ...admin,
    name: 'cancel_scale_op',
    summary: 'Cancel a running scale-out: every replica it added is stopped and removed',
    method: 'POST',
    path: '/scale_ops/:request_id/cancel',
    params: Request,
    input: None,
    output: ScaleOperationSchema,
    audit: { subject: ({ params }) => params.request_id },
    handler: (plane, { params }) => plane.scale.cancel(params.request_id),
  }),
};
