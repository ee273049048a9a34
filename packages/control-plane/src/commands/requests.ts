import { AbortRequestInputSchema, AbortResultSchema } from '@uis/manager';
import { admin, Role } from './common.ts';
import { defineCommand } from './define.ts';

/** Requests in flight: aborts (the serving token's door is the role's own `/<role>/abort_request`). */
export const requestCommands = {
  abort_request: defineCommand({
    ...admin,
    name: 'abort_request',
    summary:
      'Abort a request by rid at the replica that holds it, or abort_all of a model or role; each caller gets its partial output (finish_reason abort). 404 unknown_rid when the rid is not in flight through the gateway',
    method: 'POST',
    path: '/roles/:role/abort_request',
    params: Role,
    input: AbortRequestInputSchema,
    output: AbortResultSchema,
    audit: {
      subject: ({ params, input }) =>
        input.rid !== undefined ? `${params.role}/rid:${input.rid}` : `${params.role}/${input.model ?? '*'}`,
    },
    handler: (plane, { params, input }) => plane.managerOf(params.role).abortRequests(input),
  }),
};
