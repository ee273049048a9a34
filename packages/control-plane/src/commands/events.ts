import { z } from 'zod';
import { None, servingRead } from './common.ts';
import { defineCommand } from './define.ts';
import { AuditEventSchema } from './wire.ts';

/** The audit log. */
export const eventCommands = {
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
