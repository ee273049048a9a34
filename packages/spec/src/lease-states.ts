import { z } from 'zod';

/** The activation lease of a group of shared GPUs (DESIGN "Lifecycle"): `held` by the resident phase's roles,
 * `transitioning` while one phase leaves and the next onloads, `blocked` when nobody knows which engines hold
 * memory (a failed or interrupted-by-crash transition) until an operator resolves it. */
export const LeaseStatusSchema = z.enum(['held', 'transitioning', 'blocked']);
export type LeaseStatus = z.infer<typeof LeaseStatusSchema>;

/** Every way a lease moves, and from which status. The coordinator changes a lease only through these. */
export const LEASE_MOVES = {
  /** The group's first phase started resident (`startPhases`). */
  acquire: { from: ['held', 'blocked'], to: 'held' },
  /** A transition step starts (an auto-advanced next step starts from `transitioning`). */
  begin: { from: ['held', 'transitioning'], to: 'transitioning' },
  /** The leaving roles proved their memory released: nobody holds the GPUs. */
  release: { from: ['transitioning'], to: 'transitioning' },
  /** The target phase's roles onloaded: they hold the GPUs, their phase work still runs. */
  onload: { from: ['transitioning'], to: 'transitioning' },
  /** The phase work is done: the target phase is resident. */
  enter: { from: ['transitioning'], to: 'held' },
  /** The stopping service cut a transition short: every engine stops with it, so the last completed phase stays
   * held (a restart resumes there). */
  interrupt: { from: ['held', 'transitioning'], to: 'held' },
  /** A start or transition failed, or a restart found a transition in flight: memory is in doubt. */
  block: { from: ['held', 'transitioning', 'blocked'], to: 'blocked' },
  /** An operator checked the engines and states which phase is resident. */
  resolve: { from: ['blocked'], to: 'held' },
  /** A restart found a transition cut short and every engine's memory known (the durable record and a probe):
   * the lease leaves the block by itself and the transition runs again to its target. */
  recover: { from: ['blocked'], to: 'held' },
} as const satisfies Record<string, { from: readonly LeaseStatus[]; to: LeaseStatus }>;

export type LeaseMove = keyof typeof LEASE_MOVES;

export function canMoveLease(from: LeaseStatus, move: LeaseMove): boolean {
  return (LEASE_MOVES[move].from as readonly LeaseStatus[]).includes(from);
}
