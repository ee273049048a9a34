import type { LeaseStatus, ResidentTag } from '@uis/spec';

/** Per model, the memory tags that stay on its GPUs through a drain (the memory plan's residency of the next
 * phase); a model not named releases everything. */
export type KeepTags = Readonly<Record<string, readonly ResidentTag[]>>;

/** What the coordinator needs from a role's manager. `InferenceManager` implements it. */
export interface PhaseParticipant {
  readonly role: string;
  /** Drain + flush + release memory (all of it, or all but `keep`, also on replicas already asleep); reports per
   * engine whether the memory that had to go was reported released, and which tags are released. */
  drain(opts?: { keep?: KeepTags }): Promise<OffloadReport>;
  /** Onload (weights first, sync, then KV cache) -> ready. */
  activate(): Promise<unknown>;
  /** Launch the role's engines; with `sleep`, release their memory right after (report returned). */
  start?(opts: { sleep?: boolean }): Promise<OffloadReport | null>;
  /** After a restart: the role's engines whose GPU memory is not known, each with why (empty or absent: all
   * known). A transition the restart found cut short resumes only when no role of its group names one. */
  memoryInDoubt?(): string[];
}

export interface OffloadReport {
  memoryReleased: boolean;
  engines: Array<{
    engine_id: string;
    memory_released: boolean;
    state: string;
    /** Tags not on the engine's GPUs after the drain (with a keep, the rest stayed on purpose). */
    released_tags?: ResidentTag[];
  }>;
}

export type { LeaseStatus };

export interface Lease {
  group: string;
  /** The resident phase (while transitioning: the phase being left). */
  phase: string | null;
  /** Roles holding the GPUs of the group. */
  holder: string[];
  status: LeaseStatus;
  reason: string | null;
  /** The phase a transition was bringing the group to (null when none ran). */
  target: string | null;
  /** Proof recorded at the last transition: the roles that left and that each reported memory released. */
  lastRelease: {
    phase: string | null;
    roles: string[];
    engines: OffloadReport['engines'];
    at: number;
  } | null;
  since: number;
}

export interface TransitionResult {
  group: string;
  from: string | null;
  to: string;
  /** Every phase entered (auto-advanced scorer phases included), in order. */
  path: string[];
  duration_ms: number;
  steps: Array<{ step: string; phase: string; duration_ms: number }>;
}

export type PhaseTask = (ctx: { group: string; phase: string; signal: AbortSignal }) => Promise<void>;

/** Who asked for a transition, carried into every audit event it writes. */
export interface TransitionContext {
  subject: string;
  actor: string | null;
  operation_id: string | null;
}
