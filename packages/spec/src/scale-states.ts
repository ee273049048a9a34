import { z } from 'zod';

/** A scale operation's state, in Relax's words (its elastic-rollout guide): scale-out `PENDING -> CREATING`
 * (launched here) or `CONNECTING` (engines attached by URL) `-> HEALTH_CHECKING` (the precheck) `-> WEIGHT_SYNCING
 * -> READY -> ACTIVE`; scale-in `PENDING -> DRAINING -> REMOVING -> COMPLETED`; `FAILED` and `CANCELLED` end
 * either; `NOOP` answers a target already met. */
export const ScaleStateSchema = z.enum([
  'PENDING',
  'CREATING',
  'CONNECTING',
  'HEALTH_CHECKING',
  'WEIGHT_SYNCING',
  'READY',
  'ACTIVE',
  'DRAINING',
  'REMOVING',
  'COMPLETED',
  'FAILED',
  'CANCELLED',
  'NOOP',
]);
export type ScaleState = z.infer<typeof ScaleStateSchema>;

export const ScaleKindSchema = z.enum(['scale_out', 'scale_in']);
export type ScaleKind = z.infer<typeof ScaleKindSchema>;

/** The one transition table of a scale operation. A restart may start a scale operation's steps again from
 * `PENDING` (it resumes to its target), so every running state may go back there. */
export const SCALE_TRANSITIONS: Readonly<Record<ScaleState, readonly ScaleState[]>> = {
  PENDING: ['CREATING', 'CONNECTING', 'DRAINING', 'ACTIVE', 'COMPLETED', 'NOOP', 'FAILED', 'CANCELLED'],
  CREATING: ['HEALTH_CHECKING', 'PENDING', 'FAILED', 'CANCELLED'],
  CONNECTING: ['HEALTH_CHECKING', 'PENDING', 'FAILED', 'CANCELLED'],
  HEALTH_CHECKING: ['WEIGHT_SYNCING', 'PENDING', 'FAILED', 'CANCELLED'],
  WEIGHT_SYNCING: ['READY', 'PENDING', 'FAILED', 'CANCELLED'],
  READY: ['ACTIVE', 'PENDING', 'FAILED', 'CANCELLED'],
  DRAINING: ['REMOVING', 'PENDING', 'FAILED'],
  REMOVING: ['COMPLETED', 'PENDING', 'FAILED'],
  ACTIVE: [],
  COMPLETED: [],
  FAILED: [],
  CANCELLED: [],
  NOOP: [],
};

export function canTransitionScale(from: ScaleState, to: ScaleState): boolean {
  return from === to || SCALE_TRANSITIONS[from].includes(to);
}

/** Whether a scale operation has ended (nothing runs for it any more). */
export function scaleFinished(state: ScaleState): boolean {
  return SCALE_TRANSITIONS[state].length === 0;
}

/** One scale operation as stored, listed and answered (Relax's status fields plus the role, kind and options). */
/** What a scale-out does when some of its replicas fail (Relax's `--scale-out-partial-success-policy`):
 * `rollback_all` removes every replica it added; `keep_partial` removes only the failed ones and the rest join. */
export const ScalePartialPolicySchema = z.enum(['rollback_all', 'keep_partial']);
export type ScalePartialPolicy = z.infer<typeof ScalePartialPolicySchema>;

export const ScaleOperationSchema = z.object({
  request_id: z.string(),
  kind: ScaleKindSchema,
  role: z.string(),
  model_name: z.string(),
  status: ScaleStateSchema,
  /** The absolute target (0: by engine URLs). */
  num_replicas: z.number().int().nonnegative(),
  engine_urls: z.array(z.string()),
  /** Engines added (scale-out) or chosen for removal (scale-in). */
  engine_ids: z.array(z.string()),
  failed_engines: z.array(z.object({ engine_id: z.string(), error: z.string() })),
  force: z.boolean(),
  dry_run: z.boolean(),
  timeout_secs: z.number().nullable(),
  /** A scale-out's policy for failed replicas (absent on scale-ins, which never roll back: Relax's rule). */
  partial_success_policy: ScalePartialPolicySchema.optional(),
  /** Who asked: an operator's token, Relax's API, the autoscaler, or `system` (a restart's resume). */
  actor: z.string(),
  created_at: z.number(),
  updated_at: z.number(),
  error_message: z.string().nullable(),
  /** The model's weight version the new replicas were synced to (scale-out). */
  weight_version: z.string().nullable(),
  message: z.string(),
});
export type ScaleOperation = z.infer<typeof ScaleOperationSchema>;
