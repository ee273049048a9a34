import { z } from 'zod';

/** Replica lifecycle of the RFC, lowercase as in the discovery example. */
export const ReplicaStateSchema = z.enum(['starting', 'ready', 'draining', 'sleeping', 'onloading', 'dead']);
export type ReplicaState = z.infer<typeof ReplicaStateSchema>;
export const REPLICA_STATES = ReplicaStateSchema.options;

/** The one transition table. `starting -> ready -> draining -> sleeping -> onloading -> ready`; any state -> dead.
 * `dead -> starting` is the restart of recovery (a new incarnation of the same replica slot); it is not in the
 * RFC's diagram, which only shows `[*] -> STARTING`, but a restarted replica must pass through STARTING again. */
export const REPLICA_TRANSITIONS: Readonly<Record<ReplicaState, readonly ReplicaState[]>> = {
  starting: ['ready', 'dead'],
  ready: ['draining', 'dead'],
  draining: ['sleeping', 'dead'],
  sleeping: ['onloading', 'dead'],
  onloading: ['ready', 'dead'],
  dead: ['starting'],
};

/** What the manager drives a model toward: serving (`active`) or released for another phase (`sleeping`). */
export const ModelDesireSchema = z.enum(['active', 'sleeping']);
export type ModelDesire = z.infer<typeof ModelDesireSchema>;

/** How a replica is drained: `wait` for its in-flight requests, or pause its generation the SGLang way (`abort`,
 * `retract`, `in_place`: SGLang's pause modes). */
export const DrainPolicySchema = z.enum(['wait', 'abort', 'retract', 'in_place']);
export type DrainPolicy = z.infer<typeof DrainPolicySchema>;

export function canTransition(from: ReplicaState, to: ReplicaState): boolean {
  return REPLICA_TRANSITIONS[from].includes(to);
}

export class IllegalTransitionError extends Error {
  readonly code = 'illegal_transition';
  readonly from: ReplicaState;
  readonly to: ReplicaState;
  constructor(from: ReplicaState, to: ReplicaState, subject = 'replica') {
    super(
      `${subject}: illegal transition ${from} -> ${to}; allowed from ${from}: ${REPLICA_TRANSITIONS[from].join(', ') || 'none'}`,
    );
    this.from = from;
    this.to = to;
  }
}

/** The guard: returns `to` or throws; callers log the refusal and keep the old state. */
export function transition(from: ReplicaState, to: ReplicaState, subject?: string): ReplicaState {
  if (!canTransition(from, to)) throw new IllegalTransitionError(from, to, subject);
  return to;
}

/** Model state from its replicas: ready if any replica can serve; otherwise the state closest to serving
 * (onloading, starting), then draining, sleeping; dead when every replica is dead or there is none. */
const MODEL_STATE_PRECEDENCE: readonly ReplicaState[] = [
  'ready',
  'onloading',
  'starting',
  'draining',
  'sleeping',
  'dead',
];

export function deriveModelState(replicaStates: Iterable<ReplicaState>): ReplicaState {
  const seen = new Set(replicaStates);
  for (const state of MODEL_STATE_PRECEDENCE) if (seen.has(state)) return state;
  return 'dead';
}

/** Seconds a caller should wait before retrying a model in this state, and why. `held`: an operator drained the
 * model, so no phase change brings it back. */
export function retryGuidance(
  state: ReplicaState,
  held = false,
): { retryAfterSeconds: number; reason: string } {
  if (held && state !== 'ready' && state !== 'dead')
    return {
      retryAfterSeconds: 30,
      reason: `model is ${state}: an operator drained it; it serves again once an operator activates it`,
    };
  switch (state) {
    case 'sleeping':
      return {
        retryAfterSeconds: 30,
        reason: 'model is sleeping: its GPUs belong to another phase; it is not woken by requests',
      };
    case 'draining':
      return {
        retryAfterSeconds: 10,
        reason: 'model is draining: it finishes in-flight work and accepts nothing new',
      };
    case 'onloading':
      return { retryAfterSeconds: 5, reason: 'model is onloading: weights and KV cache are being restored' };
    case 'starting':
      return { retryAfterSeconds: 5, reason: 'model is starting: engines are launching' };
    case 'dead':
      return {
        retryAfterSeconds: 15,
        reason: 'model has no live replica: engines are dead or being recovered',
      };
    case 'ready':
      return { retryAfterSeconds: 1, reason: 'model is ready' };
  }
}
