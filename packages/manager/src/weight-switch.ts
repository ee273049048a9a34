import { z } from 'zod';
import { VersionedWeightUpdateSchema } from './weight-update.ts';

/** How a switch treats the requests a replica holds while its weights change:
 * - `drain`: stop admitting, let the requests in flight through the gateway finish (up to the deadline), update,
 *   readmit (a direct client's request, which the gateway does not see end, is paused in place like the rest);
 * - `pause_in_place`: pause_generation(in_place), update, continue: running requests keep their KV cache and
 *   finish on the new weights (their answers say both versions);
 * - `abort`: pause_generation(abort): in-flight requests end with their partial output (finish_reason abort). */
export const WeightSwitchModeSchema = z.enum(['drain', 'pause_in_place', 'abort']);
export type WeightSwitchMode = z.infer<typeof WeightSwitchModeSchema>;

/** The admin API's weight switch body (parsed at the edge). */
export const WeightSwitchRequestSchema = z.strictObject({
  mode: WeightSwitchModeSchema,
  /** `forbid` (default): no replica generates at the new version while another still generates at the old one
   * (each replica is paused before its update, and none continues before every update is read back). `allow`:
   * each replica continues as soon as its own update is read back. */
  mixed_versions: z.enum(['forbid', 'allow']).default('forbid'),
  /** A replica whose update fails is quarantined either way; `quarantine` (default): the others finish on the new
   * version; `rollback`: the others go back to the version they served. */
  on_failure: z.enum(['quarantine', 'rollback']).default('quarantine'),
  /** `drain`: how long in-flight requests may take to finish before the engines are paused in place (default:
   * the manager's drain deadline). */
  deadline_ms: z.number().int().nonnegative().optional(),
  update: VersionedWeightUpdateSchema,
});
export type WeightSwitchRequest = z.input<typeof WeightSwitchRequestSchema>;
export type ParsedWeightSwitch = z.infer<typeof WeightSwitchRequestSchema>;

/** What a switch ended as: every replica on the new version, some quarantined and the rest on it, every replica
 * back on the old version, or nothing changed (every update failed). */
export const WeightSwitchOutcomeSchema = z.enum(['switched', 'quarantined', 'rolled_back', 'failed']);
export type WeightSwitchOutcome = z.infer<typeof WeightSwitchOutcomeSchema>;

export const WeightSwitchEngineSchema = z
  .object({
    engine_id: z.string(),
    ok: z.boolean(),
    /** The version the engine reported when read back after the switch (null: it did not answer). */
    weight_version: z.string().nullable(),
    quarantined: z.boolean(),
    /** This engine's own update, in milliseconds (null: not updated). */
    update_ms: z.number().nonnegative().nullable(),
    error: z.string().optional(),
  })
  .meta({ title: 'WeightSwitchEngine' });

/** One switch as it ended: the answer of the command and a row of the model's switch timeline. */
export const WeightSwitchRecordSchema = z
  .object({
    id: z.number().int().nonnegative(),
    model: z.string(),
    mode: WeightSwitchModeSchema,
    mixed_versions: z.enum(['forbid', 'allow']),
    on_failure: z.enum(['quarantine', 'rollback']),
    from_version: z.string().nullable(),
    to_version: z.string(),
    /** The model's version after the switch. */
    weight_version: z.string().nullable(),
    outcome: WeightSwitchOutcomeSchema,
    started_at: z.number(),
    duration_ms: z.number().nonnegative(),
    /** The slowest single engine's update (its update call and its version read back), in milliseconds: the
     * floor of `duration_ms`. */
    slowest_update_ms: z.number().nonnegative(),
    /** When each phase ended, in milliseconds from the command (the last member's, for a per-member phase): every
     * member stopped (drained and paused), its update answered, its version read back; the commit (versions,
     * quarantines, target); the topology published (the whole model on its new version: what the switch's time
     * is measured to); every member continued (after the publication with `mixed_versions: forbid`). Where a
     * switch's time went. */
    phases_ms: z.object({
      stopped: z.number().nonnegative(),
      loaded: z.number().nonnegative(),
      read_back: z.number().nonnegative(),
      committed: z.number().nonnegative(),
      continued: z.number().nonnegative(),
      published: z.number().nonnegative(),
    }),
    /** The discovery revision the switch published (once, at its end). */
    topology_revision: z.number().int().nonnegative(),
    quarantined: z.array(z.string()),
    engines: z.array(WeightSwitchEngineSchema),
  })
  .meta({ title: 'WeightSwitch' });
export type WeightSwitchRecord = z.infer<typeof WeightSwitchRecordSchema>;
