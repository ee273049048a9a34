import { BundleProbeEntrySchema } from '@uis/planner';
import { z } from 'zod';

/** Lines the Python bridge (`python/uis_ray_bridge.py`) writes on stdout. A line with an `id` answers the request
 * with that id; a line with `event` and no id is pushed (readiness, actor exits). */

export const BridgeErrorBodySchema = z.object({
  code: z.string(),
  message: z.string(),
  path: z.string().nullish(),
});

export const BridgeResponseSchema = z.discriminatedUnion('ok', [
  z.object({ id: z.number().int(), ok: z.literal(true), result: z.unknown() }),
  z.object({ id: z.number().int().nullable(), ok: z.literal(false), error: BridgeErrorBodySchema }),
]);
export type BridgeResponse = z.infer<typeof BridgeResponseSchema>;

export const BridgeEventSchema = z.discriminatedUnion('event', [
  z.object({
    event: z.literal('ready'),
    ray_version: z.string(),
    namespace: z.string(),
    nodes: z.number().int(),
  }),
  z.object({ event: z.literal('fatal'), code: z.string(), message: z.string() }),
  z.object({
    event: z.literal('actor_exit'),
    handle: z.string(),
    code: z.number().int().nullable(),
    signal: z.string().nullable(),
    reason: z.string(),
    /** Last output lines of the process (empty when the actor itself died). */
    tail: z.array(z.string()).default([]),
  }),
  z.object({ event: z.literal('closed') }),
]);
export type BridgeEvent = z.infer<typeof BridgeEventSchema>;
export type ActorExitEvent = Extract<BridgeEvent, { event: 'actor_exit' }>;

export const PgInfoSchema = z.object({
  name: z.string(),
  id: z.string(),
  bundle_count: z.number().int().nonnegative(),
  owned: z.boolean().optional(),
});
export type PgInfo = z.infer<typeof PgInfoSchema>;

/** The bridge reports -1 for a bundle without a GPU; the planner's schema wants a GPU id, so such entries are
 * refused as a protocol error before validation. */
export const ProbeResultSchema = z.object({ bundles: z.array(BundleProbeEntrySchema) });

export const FreePortsSchema = z.object({ ports: z.array(z.number().int().positive()) });

export const StartedProcessSchema = z.object({
  handle: z.string(),
  actor_name: z.string(),
  pid: z.number().int().positive(),
  node_id: z.string(),
  node_ip: z.string(),
  gpu_ids: z.array(z.number().int()),
});
export type StartedProcess = z.infer<typeof StartedProcessSchema>;

export const StopResultSchema = z.object({ stopped: z.string(), known: z.boolean() });
export const RemoveResultSchema = z.object({ removed: z.string() });
export const ExistsResultSchema = z.object({ exists: z.boolean() });
export const TailSchema = z.object({ lines: z.array(z.string()) });

export const RayStateSchema = z.object({
  placement_groups: z.array(z.object({ name: z.string(), state: z.string() })),
  actors: z.array(z.object({ name: z.string(), state: z.string() })),
});
export type RayState = z.infer<typeof RayStateSchema>;
