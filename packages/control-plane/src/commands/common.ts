import { DrainPolicySchema } from '@uis/spec';
import { z } from 'zod';
import { MemoryTagsSchema } from './wire.ts';

/** What the command groups share: the path parameter schemas, audit subjects and permission presets. */

export const Role = z.strictObject({ role: z.string().min(1) });
export const RoleModel = z.strictObject({ role: z.string().min(1), model: z.string().min(1) });
export const None = z.strictObject({});
export const Drain = z.strictObject({
  deadline_ms: z.number().int().nonnegative().optional(),
  policy: DrainPolicySchema.optional(),
});
export const Activate = z.strictObject({ tags: MemoryTagsSchema });
export const Engine = z.strictObject({ engine_id: z.string().min(1) });
export const GroupOf = z.string().min(1).optional();

export const drainOpts = (b: z.infer<typeof Drain>) => ({
  ...(b.deadline_ms === undefined ? {} : { deadlineMs: b.deadline_ms }),
  ...(b.policy === undefined ? {} : { policy: b.policy }),
});
export const roleSubject = { subject: ({ params }: { params: { role: string } }) => params.role };
export const modelSubject = {
  subject: ({ params }: { params: { role: string; model: string } }) => `${params.role}/${params.model}`,
};
export const engineSubject = { subject: ({ input }: { input: { engine_id: string } }) => input.engine_id };
/** Mutations: the admin token. */
export const admin = { permission: 'admin', idempotency: 'keyed' } as const;
/** Reads and waits, which change nothing: the serving token (what rollout workers and the trainer hold) or the
 * admin token; open when no serving token is configured, like discovery. */
export const servingRead = { permission: 'serving', idempotency: 'none', audit: null } as const;
