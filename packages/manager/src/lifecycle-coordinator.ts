import {
  type ActivationGroupPlan,
  type Clock,
  type GroupMemoryPlan,
  type Logger,
  scoresDeferred,
  settlesWithin,
  silentLogger,
  systemClock,
  UisError,
} from '@uis/spec';
import { GroupLease, type Phase } from './coordinator/group-lease.ts';
import { decideLeaseRecovery } from './coordinator/lease-recovery.ts';
import { LeaseStore } from './coordinator/lease-store.ts';
import { PhaseTransition } from './coordinator/phase-transition.ts';
import type {
  Lease,
  LeaseStatus,
  PhaseParticipant,
  PhaseTask,
  TransitionResult,
} from './coordinator/types.ts';
import type { AuditEvent, EventLog } from './event-log.ts';
import { OperationLedger } from './operations.ts';
import type { Registry } from './registry.ts';
import { errorMessage } from './runtime.ts';
import type { Db } from './store.ts';

export type {
  Lease,
  LeaseStatus,
  OffloadReport,
  PhaseParticipant,
  PhaseTask,
  TransitionResult,
} from './coordinator/types.ts';

export interface LifecycleCoordinatorOptions {
  groups: ActivationGroupPlan[];
  participants: PhaseParticipant[];
  db: Db;
  events: EventLog;
  registries?: Registry[];
  clock?: Clock;
  logger?: Logger;
  /** A transition (drain + proof + onload + phase tasks) that takes longer blocks the lease. */
  transitionTimeoutMs?: number;
  /** Phases that advance by themselves once their tasks finish. Default: phases resident only to deferred
   * scorers (roles that score deferred batches): the defer transition runs rollout -> scorers -> train without a caller. */
  autoAdvance?: (phase: { name: string; residents: string[] }) => boolean;
  /** The plan's memory model per group: a transition then releases only the tags the next phase cannot keep, and
   * a switch slower than predicted by more than `slowSwitchMargin` (a share, default 0.5, plus 0.2 s) is logged. */
  memory?: GroupMemoryPlan[];
  slowSwitchMargin?: number;
  /** Each role's GPU bundles per activation group: residents of the next phase on GPUs the leaving phase does not
   * use onload while it releases. Without it every onload waits for the release. */
  roleBundles?: Record<string, Record<string, readonly number[]>>;
}

/** Owns phase order on shared GPUs: one resident phase per activation group (the lease), transitions that prove the
 * previous phase released its memory before the next one onloads, trainer barriers, and a durable audit trail. A
 * failed or timed-out transition blocks the lease until an operator resolves it. */
export class LifecycleCoordinator {
  private readonly groups = new Map<string, GroupLease>();
  /** The memory plan in use: the config's, or one sized from the running engines (`useMemory`). */
  #memory: GroupMemoryPlan[] | undefined;
  /** Aborted by `interrupt()`: the service is stopping. Phase tasks of a running transition see it. */
  readonly #stop = new AbortController();
  private readonly participants = new Map<string, PhaseParticipant>();
  private readonly tasks = new Map<string, PhaseTask[]>();
  private readonly ledger: OperationLedger;
  private readonly clock: Clock;
  private readonly timeoutMs: number;
  private readonly autoAdvance: (phase: Phase) => boolean;

  constructor(private readonly opts: LifecycleCoordinatorOptions) {
    this.#memory = opts.memory;
    this.clock = opts.clock ?? systemClock;
    const logger = opts.logger ?? silentLogger;
    this.timeoutMs = opts.transitionTimeoutMs ?? 10 * 60_000;
    this.autoAdvance =
      opts.autoAdvance ?? ((p) => p.residents.length > 0 && p.residents.every(scoresDeferred));
    this.ledger = new OperationLedger(opts.db, this.clock);
    for (const p of opts.participants) this.participants.set(p.role, p);
    const store = new LeaseStore(opts.db);
    for (const plan of opts.groups)
      this.groups.set(plan.name, new GroupLease(plan, store, opts.events, logger, this.clock));
  }

  /** The group a request means: the one it names, else the only one (for audit subjects; undefined if none). */
  groupName(name?: string): string | undefined {
    return name ?? (this.groups.size === 1 ? [...this.groups.keys()][0] : undefined);
  }

  private group(name?: string): GroupLease {
    const known = [...this.groups.keys()];
    if (known.length === 0)
      throw new UisError({
        code: 'no_activation_groups',
        path: 'group',
        message:
          'this layout has no activation groups: no roles time-share GPUs (no colocated defer schedule), so there are no phases',
      });
    const key = this.groupName(name);
    if (key === undefined)
      throw new UisError({
        code: 'group_required',
        path: 'group',
        message: `this layout has ${known.length} activation groups (${known.join(', ')}): name one in group`,
      });
    const g = this.groups.get(key);
    if (!g)
      throw new UisError({
        code: 'unknown_activation_group',
        path: 'group',
        message: `unknown activation group ${JSON.stringify(key)}; known: ${known.join(', ')}`,
      });
    return g;
  }

  /**
   * The service is about to stop its engines: transitions running now will fail under them. They then leave the
   * lease held at its last completed phase instead of blocking it, and new transitions are refused (503
   * `service_stopping`). Call before shutting the managers down, then `settled()` before closing the store.
   */
  interrupt(): void {
    this.#stop.abort(new UisError({ code: 'service_stopping', message: 'the service is stopping' }));
  }

  /** Resolves once no transition runs (or after `timeoutMs`). */
  async settled(timeoutMs = 10_000): Promise<void> {
    const running = [...this.groups.values()].flatMap((g) => (g.current ? [g.current.promise] : []));
    if (running.length === 0) return;
    await settlesWithin(this.clock, Promise.allSettled(running), timeoutMs);
  }

  lease(group?: string): Lease {
    return this.group(group).snapshot();
  }

  leases(): Lease[] {
    return [...this.groups.values()].map((g) => g.snapshot());
  }

  /** Transitions from now on execute `memory` (the plan sized from the running engines). */
  useMemory(memory: GroupMemoryPlan[]): void {
    this.#memory = memory;
  }

  /** Why `role` may not hold GPU memory now, or null when it may: a role outside every activation group always
   * may; a role that time-shares GPUs only while it holds the lease and no transition is draining it out (it
   * stays resident in the target: e.g. while its phase's work runs). Operator activations check this, so they
   * never onload a role onto GPUs another phase holds. */
  notResident(
    role: string,
  ): { group: string; phase: string | null; status: LeaseStatus; phases: string[] } | null {
    for (const g of this.groups.values()) {
      const phases = g.plan.phases.filter((p) => p.residents.includes(role)).map((p) => p.name);
      if (phases.length === 0) continue;
      const l = g.lease;
      const staying =
        l.status === 'held' ||
        (l.status === 'transitioning' && l.target !== null && g.phase(l.target).residents.includes(role));
      if (staying && l.holder.includes(role)) return null;
      return { group: g.name, phase: l.phase, status: l.status, phases };
    }
    return null;
  }

  /** Every activation group with its phase order and lease (for the admin API and the console). */
  describe(): Array<{ group: string; phases: Array<{ name: string; residents: string[] }>; lease: Lease }> {
    return [...this.groups.values()].map((g) => ({
      group: g.name,
      phases: structuredClone(g.plan.phases),
      lease: g.snapshot(),
    }));
  }

  /** Runs when a phase becomes resident (e.g. a deferred batch run for a scorer phase). */
  registerPhaseTask(phase: string, task: PhaseTask): () => void {
    const list = this.tasks.get(phase) ?? [];
    list.push(task);
    this.tasks.set(phase, list);
    return () => {
      const l = this.tasks.get(phase);
      if (l) l.splice(l.indexOf(task), 1);
    };
  }

  subscribe(listener: (e: AuditEvent) => void): () => void {
    return this.opts.events.subscribe(listener);
  }

  /** Starts a group's roles so that only one phase is ever resident on its GPUs: the roles of every later phase
   * start and release their memory (one phase at a time, each proven released), then the first phase's roles
   * start resident and take the lease. Roles outside the group are not touched. */
  async startPhases(opts: { group?: string; actor?: string } = {}): Promise<Lease> {
    const g = this.group(opts.group);
    const [first, ...later] = g.plan.phases as [Phase, ...Phase[]];
    const actor = opts.actor ?? null;
    const t0 = this.clock.now();
    const startRoles = async (roles: string[], sleep: boolean) =>
      Promise.all(
        roles.map(async (role) => {
          const p = this.participants.get(role);
          if (!p?.start) return null;
          return { role, report: await p.start({ sleep }) };
        }),
      );
    try {
      for (const phase of later) {
        const reports = (await startRoles(phase.residents, true)).filter((r) => r !== null);
        const held = reports.filter((r) => r.report && !r.report.memoryReleased).map((r) => r.role);
        if (held.length > 0)
          throw new UisError({
            code: 'memory_not_released',
            message: `roles of phase ${phase.name} did not report memory released after start: ${held.join(', ')}`,
          });
        this.opts.events.append({
          subject: g.name,
          actor,
          kind: 'phase.started_asleep',
          data: { phase: phase.name, roles: reports.map((r) => r.role) },
        });
      }
      await startRoles(first.residents, false);
    } catch (e) {
      const reason = `start of ${g.name} failed: ${errorMessage(e)}`;
      g.move('block', { reason }, { actor, kind: 'lease.blocked', data: { reason } });
      throw e;
    }
    for (const reg of this.opts.registries ?? []) reg.publish({ phase: first.name });
    g.move(
      'acquire',
      { phase: first.name, holder: first.residents },
      {
        actor,
        kind: 'lease.acquired',
        duration_ms: this.clock.now() - t0,
        data: { phase: first.name, holder: first.residents },
      },
    );
    return g.snapshot();
  }

  /** Brings a group into `phase` (default: its first phase) from an unknown start: every participant not resident
   * there is drained and must report memory released, then the residents onload. */
  async initialize(opts: { group?: string; phase?: string; operationId?: string; actor?: string } = {}) {
    const g = this.group(opts.group);
    const phase = opts.phase ?? (g.plan.phases[0] as Phase).name;
    const request = { op: 'initialize', group: g.name, phase };
    const run = () => this.runTransition(g, phase, true, opts);
    return opts.operationId ? this.ledger.run(opts.operationId, request, run) : run();
  }

  /** Moves the group to `to` (default: the next phase). Joins a running transition to the same target. */
  async transition(
    opts: { group?: string; to?: string; operationId?: string; actor?: string } = {},
  ): Promise<TransitionResult> {
    const g = this.group(opts.group);
    if (opts.to !== undefined) g.phase(opts.to);
    // The fingerprint is what the caller asked ("next" included), so a retry matches its first call even after
    // the lease moved on.
    const request = { op: 'transition', group: g.name, to: opts.to ?? 'next' };
    const run = () => this.runTransition(g, opts.to ?? g.nextPhase(g.lease.phase), false, opts);
    return opts.operationId ? this.ledger.run(opts.operationId, request, run) : run();
  }

  private runTransition(
    g: GroupLease,
    to: string,
    initial: boolean,
    who: { actor?: string; operationId?: string },
  ): Promise<TransitionResult> {
    if (g.current) {
      if (g.current.target === to) return g.current.promise;
      return Promise.reject(
        new UisError({
          code: 'transition_in_progress',
          message: `group ${g.name} is transitioning to ${g.current.target}; wait for it before asking for ${to}`,
        }),
      );
    }
    if (this.#stop.signal.aborted)
      return Promise.reject(
        new UisError({
          code: 'service_stopping',
          message: `the service is stopping: no new transition of ${g.name}`,
        }),
      );
    if (g.lease.status === 'blocked')
      return Promise.reject(
        new UisError({
          code: 'lease_blocked',
          message: `activation lease of ${g.name} is blocked: ${g.lease.reason}; an operator must resolve it`,
        }),
      );
    const deps = {
      participants: this.participants,
      tasks: this.tasks,
      registries: this.opts.registries ?? [],
      events: this.opts.events,
      clock: this.clock,
      timeoutMs: this.timeoutMs,
      autoAdvance: this.autoAdvance,
      stop: this.#stop.signal,
      memory: this.#memory?.find((m) => m.group === g.name),
      logger: this.opts.logger ?? silentLogger,
      slowSwitchMargin: this.opts.slowSwitchMargin ?? 0.5,
      bundlesOf: (role: string) => this.opts.roleBundles?.[g.name]?.[role],
    };
    const run = new PhaseTransition(deps, g, to, initial, {
      actor: who.actor ?? null,
      operationId: who.operationId ?? null,
    });
    const promise = run.run().finally(() => {
      g.current = null;
    });
    g.current = { target: to, promise };
    return promise;
  }

  /** Trainer barrier: resolves once `phase` is resident and its work is done; 504 on timeout; 409 if the lease
   * gets blocked meanwhile (the caller must not proceed on a half-finished transition). */
  async waitForPhase(phase: string, timeoutMs: number, group?: string, signal?: AbortSignal): Promise<Lease> {
    const g = this.group(group);
    g.phase(phase);
    const done = new AbortController();
    return new Promise<Lease>((resolve, reject) => {
      let unwatch = () => {};
      const finish = (outcome: () => void) => {
        unwatch();
        done.abort();
        signal?.removeEventListener('abort', onAbort);
        outcome();
      };
      const check = () => {
        const l = g.lease;
        if (l.status === 'held' && l.phase === phase) finish(() => resolve(g.snapshot()));
        else if (l.status === 'blocked')
          finish(() =>
            reject(
              new UisError({
                code: 'lease_blocked',
                message: `lease of ${g.name} is blocked: ${l.reason}`,
              }),
            ),
          );
      };
      // The waiter went away (its HTTP client disconnected): stop waiting for it now, not at the timeout.
      const onAbort = () =>
        finish(() =>
          reject(new UisError({ code: 'client_gone', message: `wait for phase ${phase} abandoned` })),
        );
      if (signal?.aborted) {
        onAbort();
        return;
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.clock.sleep(timeoutMs, done.signal).then(
        () =>
          finish(() =>
            reject(
              new UisError({
                code: 'barrier_timeout',
                message: `phase ${phase} of ${g.name} not reached within ${timeoutMs} ms (now ${g.lease.phase}, ${g.lease.status})`,
              }),
            ),
          ),
        () => undefined,
      );
      unwatch = g.watch(check);
      check();
    });
  }

  /** The trainer is done with `phase`: move on to the next one (e.g. train -> rollout wakes rollout). */
  async releasePhase(
    phase: string,
    opts: { group?: string; operationId?: string; actor?: string } = {},
  ): Promise<TransitionResult> {
    const g = this.group(opts.group);
    g.phase(phase);
    const to = g.nextPhase(phase);
    if (g.lease.phase !== phase && !(g.current?.target === to)) {
      throw new UisError({
        code: 'phase_not_resident',
        path: 'phase',
        message: `cannot release ${phase}: resident phase of ${g.name} is ${g.lease.phase}`,
      });
    }
    return this.transition({ ...opts, group: g.name, to });
  }

  /** After a restart, once the participants started (and adopted what they could): a transition the previous
   * process left unfinished runs again to its target by itself when every engine of the group's roles has a known
   * memory state; otherwise the lease stays blocked, its reason naming the engines to check (`blocked` also when
   * the resumed transition fails: it blocks the lease with its reason). `none` when the group found no unfinished
   * transition. */
  async recoverAfterRestart(opts: { group?: string } = {}): Promise<'none' | 'resumed' | 'blocked'> {
    const g = this.group(opts.group);
    const decided = decideLeaseRecovery(g, this.participants);
    if (decided.outcome !== 'resume') return decided.outcome;
    try {
      await this.initialize({ group: g.name, phase: decided.target, actor: 'system' });
      return 'resumed';
    } catch (e) {
      // The resumed transition failed and blocked the lease with its reason (as any transition does): the service
      // still starts, its lease waiting for an operator, as after any failed transition.
      if (g.lease.status === 'blocked') return 'blocked';
      throw e;
    }
  }

  /** Operator action: unblock a lease by naming the phase that should hold the GPUs. The engines are moved there,
   * not taken at the operator's word: the lease leaves the block held by nobody (no barrier of any phase opens on
   * it) and a transition from an unknown start brings the group to `phase` (every other role drained with the
   * proof of released memory, the residents onloaded). Resolves with the lease once there; if the engines cannot
   * be brought there the lease is blocked again and the error names each engine that contradicts the phase. */
  async resolve(opts: { group?: string; phase: string; actor: string; note?: string }): Promise<Lease> {
    const g = this.group(opts.group);
    const p = g.phase(opts.phase);
    if (g.lease.status !== 'blocked')
      throw new UisError({
        code: 'lease_not_blocked',
        message: `lease of ${g.name} is not blocked`,
      });
    const previous = g.lease.reason;
    g.move(
      'resolve',
      { phase: null, holder: [] },
      {
        kind: 'lease.resolved',
        actor: opts.actor,
        data: { phase: p.name, previous_reason: previous, note: opts.note ?? null },
      },
    );
    await this.initialize({ group: g.name, phase: p.name, actor: opts.actor });
    return g.snapshot();
  }
}
