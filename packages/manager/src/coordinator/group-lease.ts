import {
  type ActivationGroupPlan,
  type Clock,
  canMoveLease,
  LEASE_MOVES,
  type LeaseMove,
  type Logger,
  UisError,
} from '@uis/spec';
import type { AuditEventInput, EventLog } from '../event-log.ts';
import type { LeaseStore } from './lease-store.ts';
import type { Lease, TransitionResult } from './types.ts';

export type Phase = { name: string; residents: string[] };

/** What a move may change besides the status (which the move table decides). */
export type LeasePatch = Partial<Pick<Lease, 'phase' | 'holder' | 'reason' | 'target' | 'lastRelease'>>;

/** The audit event a move writes (its subject is the group). */
export type MoveEvent = Omit<AuditEventInput, 'subject'>;

/** One activation group: its phase plan, its lease and the transition running on it. Every change of the lease
 * goes through `move`: checked against the move table, saved, waiters woken, logged. */
export class GroupLease {
  readonly name: string;
  readonly #lease: Lease;
  readonly #waiters = new Set<() => void>();
  /** The transition running on this group, joined by a request for the same target. */
  current: { target: string; promise: Promise<TransitionResult> } | null = null;
  /** A transition the previous process did not finish (it died during it): the phase it was leaving (or had
   * entered) and its target. Set at construction, cleared by the recovery that decides about it. */
  interrupted: { phase: string | null; target: string } | null = null;

  constructor(
    readonly plan: ActivationGroupPlan,
    private readonly store: LeaseStore,
    private readonly events: EventLog,
    private readonly logger: Logger,
    private readonly clock: Clock,
  ) {
    this.name = plan.name;
    if (plan.phases.length === 0)
      throw new UisError({
        code: 'invalid_schedule',
        message: `group ${plan.name} has no phases`,
      });
    const stored = store.load(plan.name);
    this.#lease = {
      group: plan.name,
      phase: stored?.phase ?? null,
      holder: stored?.holder ?? [],
      status: stored?.status ?? 'held',
      reason: stored?.reason ?? null,
      target: stored?.target ?? null,
      lastRelease: null,
      since: stored?.updated_at ?? clock.now(),
    };
    if (this.#lease.status === 'transitioning') {
      // The process died mid-transition: which engines hold memory is not known yet. Block, never guess; the
      // restart's recovery resumes the transition once every engine's memory is known (`LeaseRecovery`).
      const target = this.#lease.target ?? this.#lease.phase ?? (plan.phases[0] as Phase).name;
      this.interrupted = { phase: this.#lease.phase, target };
      const reason = `manager restarted during a transition to ${target}; recovering once every engine's memory is known`;
      this.move('block', { reason, target }, { kind: 'lease.blocked', data: { reason } });
    }
  }

  /** The lease as it is now (read-only view; copy it before handing it out). */
  get lease(): Readonly<Lease> {
    return this.#lease;
  }

  snapshot(): Lease {
    return structuredClone(this.#lease);
  }

  /** The one way the lease changes: refuses a move the table does not allow from the current status, applies
   * the move's status and the patch (a held lease has no reason and no target), saves, wakes the waiters, and
   * writes `event` to the audit log. */
  move(move: LeaseMove, patch: LeasePatch = {}, event?: MoveEvent): void {
    const from = this.#lease.status;
    if (!canMoveLease(from, move))
      throw new UisError({
        code: 'illegal_transition',
        message: `lease of ${this.name}: cannot ${move} a ${from} lease`,
      });
    const to = LEASE_MOVES[move].to;
    Object.assign(this.#lease, patch, { status: to, since: this.clock.now() });
    if (to === 'held') Object.assign(this.#lease, { reason: null, target: null });
    this.store.save(this.#lease, this.#lease.since);
    for (const w of [...this.#waiters]) w();
    const line = { group: this.name, move, from, to, phase: this.#lease.phase, reason: this.#lease.reason };
    if (to === 'blocked') this.logger.error(line, 'lease blocked');
    else this.logger.info(line, 'lease moved');
    if (event) this.events.append({ ...event, subject: this.name });
  }

  /** Calls `check` after every move until the returned function removes it. */
  watch(check: () => void): () => void {
    this.#waiters.add(check);
    return () => {
      this.#waiters.delete(check);
    };
  }

  phase(name: string): Phase {
    const p = this.plan.phases.find((x) => x.name === name);
    if (!p)
      throw new UisError({
        code: 'unknown_phase',
        path: 'phase',
        message: `group ${this.name} has no phase ${JSON.stringify(name)}; phases: ${this.plan.phases.map((x) => x.name).join(' -> ')}`,
      });
    return p;
  }

  /** The phase after `phase` in the group's cycle (the first one after none). */
  nextPhase(phase: string | null): string {
    const phases = this.plan.phases;
    const i = phase === null ? -1 : phases.findIndex((p) => p.name === phase);
    return (phases[(i + 1) % phases.length] as Phase).name;
  }

  /** Whether `role` is resident in any phase of this group (it time-shares the group's GPUs). */
  includes(role: string): boolean {
    return this.plan.phases.some((p) => p.residents.includes(role));
  }
}
