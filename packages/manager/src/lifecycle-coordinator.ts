import type { ActivationGroupPlan } from '@uis/spec';
import { UisError } from '@uis/spec';
import type { AuditEvent, EventLog } from './event-log.ts';
import { OperationLedger } from './operations.ts';
import type { Registry } from './registry.ts';
import { type Clock, errorMessage, type Logger, silentLogger, systemClock } from './runtime.ts';
import type { Db } from './store.ts';

/** What the coordinator needs from a role's manager. `InferenceManager` implements it. */
export interface PhaseParticipant {
  readonly role: string;
  /** Drain + flush + release memory; reports per engine whether memory was reported released. */
  drain(): Promise<OffloadReport>;
  /** Onload (weights first, sync, then KV cache) -> ready. */
  activate(): Promise<unknown>;
  /** Launch the role's engines; with `sleep`, release their memory right after (report returned). */
  start?(opts: { sleep?: boolean }): Promise<OffloadReport | null>;
}

export interface OffloadReport {
  memoryReleased: boolean;
  engines: Array<{ engine_id: string; memory_released: boolean; state: string }>;
}

export type LeaseStatus = 'held' | 'transitioning' | 'blocked';

export interface Lease {
  group: string;
  /** The resident phase (while transitioning: the phase being left). */
  phase: string | null;
  /** Roles holding the GPUs of the group. */
  holder: string[];
  status: LeaseStatus;
  reason: string | null;
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
   * scorers (genrm, teacher): the defer transition runs rollout -> scorers -> train without a caller. */
  autoAdvance?: (phase: { name: string; residents: string[] }) => boolean;
}

const SCORER_ROLES = new Set(['genrm', 'teacher']);

interface GroupState {
  plan: ActivationGroupPlan;
  lease: Lease;
  current: { target: string; promise: Promise<TransitionResult> } | null;
  waiters: Set<() => void>;
}

/** Owns phase order on shared GPUs: one resident phase per activation group (the lease), transitions that prove the
 * previous phase released its memory before the next one onloads, trainer barriers, and a durable audit trail. A
 * failed or timed-out transition blocks the lease until an operator resolves it. */
export class LifecycleCoordinator {
  private readonly groups = new Map<string, GroupState>();
  /** Aborted by `interrupt()`: the service is stopping. Phase tasks of a running transition see it. */
  readonly #stop = new AbortController();
  private readonly participants = new Map<string, PhaseParticipant>();
  private readonly tasks = new Map<string, PhaseTask[]>();
  private readonly ledger: OperationLedger;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly timeoutMs: number;
  private readonly autoAdvance: (phase: { name: string; residents: string[] }) => boolean;

  constructor(private readonly opts: LifecycleCoordinatorOptions) {
    this.clock = opts.clock ?? systemClock;
    this.logger = opts.logger ?? silentLogger;
    this.timeoutMs = opts.transitionTimeoutMs ?? 10 * 60_000;
    this.autoAdvance =
      opts.autoAdvance ?? ((p) => p.residents.length > 0 && p.residents.every((r) => SCORER_ROLES.has(r)));
    this.ledger = new OperationLedger(opts.db, () => this.clock.now());
    for (const p of opts.participants) this.participants.set(p.role, p);
    for (const plan of opts.groups) {
      if (plan.phases.length === 0)
        throw new UisError({
          code: 'invalid_schedule',
          status: 400,
          message: `group ${plan.name} has no phases`,
        });
      this.groups.set(plan.name, {
        plan,
        lease: this.loadLease(plan.name),
        current: null,
        waiters: new Set(),
      });
    }
  }

  private loadLease(group: string): Lease {
    const row = this.opts.db.prepare('SELECT * FROM leases WHERE grp = ?').get(group) as
      | {
          phase: string | null;
          holder: string | null;
          status: LeaseStatus;
          reason: string | null;
          updated_at: number;
        }
      | undefined;
    const lease: Lease = {
      group,
      phase: row?.phase ?? null,
      holder: row?.holder ? (JSON.parse(row.holder) as string[]) : [],
      status: row?.status ?? 'held',
      reason: row?.reason ?? null,
      target: null,
      lastRelease: null,
      since: row?.updated_at ?? this.now(),
    };
    if (lease.status === 'transitioning') {
      // The process died mid-transition: nobody knows which engines hold memory. Block, never guess.
      lease.status = 'blocked';
      lease.reason = 'manager restarted during a transition; verify engine memory and resolve the lease';
      this.persist(lease);
      this.opts.events.append({ kind: 'lease.blocked', subject: group, data: { reason: lease.reason } });
    }
    return lease;
  }

  private now(): number {
    return this.clock.now();
  }

  private persist(lease: Lease): void {
    lease.since = this.now();
    this.opts.db
      .prepare(
        `INSERT INTO leases (grp, phase, holder, status, reason, updated_at) VALUES (@grp, @phase, @holder, @status, @reason, @at)
         ON CONFLICT(grp) DO UPDATE SET phase = @phase, holder = @holder, status = @status, reason = @reason, updated_at = @at`,
      )
      .run({
        grp: lease.group,
        phase: lease.phase,
        holder: JSON.stringify(lease.holder),
        status: lease.status,
        reason: lease.reason,
        at: lease.since,
      });
    for (const w of [...(this.groups.get(lease.group)?.waiters ?? [])]) w();
  }

  /** The group a request means: the one it names, else the only one (for audit subjects; undefined if none). */
  groupName(name?: string): string | undefined {
    return name ?? (this.groups.size === 1 ? [...this.groups.keys()][0] : undefined);
  }

  private group(name?: string): GroupState {
    const known = [...this.groups.keys()];
    if (known.length === 0)
      throw new UisError({
        code: 'no_activation_groups',
        status: 404,
        path: 'group',
        message:
          'this layout has no activation groups: no roles time-share GPUs (no colocated defer schedule), so there are no phases',
      });
    const key = this.groupName(name);
    if (key === undefined)
      throw new UisError({
        code: 'group_required',
        status: 400,
        path: 'group',
        message: `this layout has ${known.length} activation groups (${known.join(', ')}): name one in group`,
      });
    const g = this.groups.get(key);
    if (!g)
      throw new UisError({
        code: 'unknown_activation_group',
        status: 404,
        path: 'group',
        message: `unknown activation group ${JSON.stringify(key)}; known: ${known.join(', ')}`,
      });
    return g;
  }

  private phaseOf(g: GroupState, phase: string): { name: string; residents: string[] } {
    const p = g.plan.phases.find((x) => x.name === phase);
    if (!p)
      throw new UisError({
        code: 'unknown_phase',
        status: 404,
        path: 'phase',
        message: `group ${g.plan.name} has no phase ${JSON.stringify(phase)}; phases: ${g.plan.phases.map((x) => x.name).join(' -> ')}`,
      });
    return p;
  }

  private nextPhase(g: GroupState, phase: string | null): string {
    const phases = g.plan.phases;
    const i = phase === null ? -1 : phases.findIndex((p) => p.name === phase);
    return (phases[(i + 1) % phases.length] as { name: string }).name;
  }

  /**
   * The service is about to stop its engines: transitions running now will fail under them. They then leave the
   * lease held at its last completed phase instead of blocking it, and new transitions are refused (503
   * `service_stopping`). Call before shutting the managers down, then `settled()` before closing the store.
   */
  interrupt(): void {
    this.#stop.abort(
      new UisError({ code: 'service_stopping', status: 503, message: 'the service is stopping' }),
    );
  }

  /** Resolves once no transition runs (or after `timeoutMs`). */
  async settled(timeoutMs = 10_000): Promise<void> {
    const running = [...this.groups.values()].flatMap((g) => (g.current ? [g.current.promise] : []));
    if (running.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(running),
      new Promise((r) => {
        timer = setTimeout(r, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
  }

  lease(group?: string): Lease {
    return structuredClone(this.group(group).lease);
  }

  leases(): Lease[] {
    return [...this.groups.values()].map((g) => structuredClone(g.lease));
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
        (l.status === 'transitioning' &&
          l.target !== null &&
          this.phaseOf(g, l.target).residents.includes(role));
      if (staying && l.holder.includes(role)) return null;
      return { group: g.plan.name, phase: l.phase, status: l.status, phases };
    }
    return null;
  }

  /** Every activation group with its phase order and lease (for the admin API and the console). */
  describe(): Array<{ group: string; phases: Array<{ name: string; residents: string[] }>; lease: Lease }> {
    return [...this.groups.values()].map((g) => ({
      group: g.plan.name,
      phases: structuredClone(g.plan.phases),
      lease: structuredClone(g.lease),
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
    const [first, ...later] = g.plan.phases as [
      { name: string; residents: string[] },
      ...Array<{ name: string; residents: string[] }>,
    ];
    const base = { subject: g.plan.name, actor: opts.actor ?? null };
    const t0 = this.now();
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
            status: 409,
            message: `roles of phase ${phase.name} did not report memory released after start: ${held.join(', ')}`,
          });
        this.opts.events.append({
          ...base,
          kind: 'phase.started_asleep',
          data: { phase: phase.name, roles: reports.map((r) => r.role) },
        });
      }
      await startRoles(first.residents, false);
    } catch (e) {
      g.lease.status = 'blocked';
      g.lease.reason = `start of ${g.plan.name} failed: ${errorMessage(e)}`;
      this.persist(g.lease);
      this.opts.events.append({ ...base, kind: 'lease.blocked', data: { reason: g.lease.reason } });
      throw e;
    }
    for (const reg of this.opts.registries ?? []) reg.publish({ phase: first.name });
    g.lease.phase = first.name;
    g.lease.holder = first.residents;
    g.lease.status = 'held';
    g.lease.reason = null;
    this.persist(g.lease);
    this.opts.events.append({
      ...base,
      kind: 'lease.acquired',
      duration_ms: this.now() - t0,
      data: { phase: first.name, holder: first.residents },
    });
    return structuredClone(g.lease);
  }

  /** Brings a group into `phase` (default: its first phase) from an unknown start: every participant not resident
   * there is drained and must report memory released, then the residents onload. */
  async initialize(opts: { group?: string; phase?: string; operationId?: string; actor?: string } = {}) {
    const g = this.group(opts.group);
    const phase = opts.phase ?? (g.plan.phases[0] as { name: string }).name;
    const request = { op: 'initialize', group: g.plan.name, phase };
    const run = () =>
      this.runTransition(g, phase, {
        initial: true,
        actor: opts.actor ?? null,
        operationId: opts.operationId ?? null,
      });
    return opts.operationId ? this.ledger.run(opts.operationId, request, run) : run();
  }

  /** Moves the group to `to` (default: the next phase). Joins a running transition to the same target. */
  async transition(
    opts: { group?: string; to?: string; operationId?: string; actor?: string } = {},
  ): Promise<TransitionResult> {
    const g = this.group(opts.group);
    if (opts.to !== undefined) this.phaseOf(g, opts.to);
    // The fingerprint is what the caller asked ("next" included), so a retry matches its first call even after
    // the lease moved on.
    const request = { op: 'transition', group: g.plan.name, to: opts.to ?? 'next' };
    const run = () =>
      this.runTransition(g, opts.to ?? this.nextPhase(g, g.lease.phase), {
        initial: false,
        actor: opts.actor ?? null,
        operationId: opts.operationId ?? null,
      });
    return opts.operationId ? this.ledger.run(opts.operationId, request, run) : run();
  }

  private runTransition(
    g: GroupState,
    to: string,
    ctx: { initial: boolean; actor: string | null; operationId: string | null },
  ): Promise<TransitionResult> {
    if (g.current) {
      if (g.current.target === to) return g.current.promise;
      return Promise.reject(
        new UisError({
          code: 'transition_in_progress',
          status: 409,
          message: `group ${g.plan.name} is transitioning to ${g.current.target}; wait for it before asking for ${to}`,
        }),
      );
    }
    if (this.#stop.signal.aborted)
      return Promise.reject(
        new UisError({
          code: 'service_stopping',
          status: 503,
          message: `the service is stopping: no new transition of ${g.plan.name}`,
        }),
      );
    if (g.lease.status === 'blocked')
      return Promise.reject(
        new UisError({
          code: 'lease_blocked',
          status: 409,
          message: `activation lease of ${g.plan.name} is blocked: ${g.lease.reason}; an operator must resolve it`,
        }),
      );
    const promise = this.execute(g, to, ctx).finally(() => {
      g.current = null;
    });
    g.current = { target: to, promise };
    return promise;
  }

  private async execute(
    g: GroupState,
    firstTarget: string,
    ctx: { initial: boolean; actor: string | null; operationId: string | null },
  ): Promise<TransitionResult> {
    const started = this.now();
    const from = g.lease.phase;
    const result: TransitionResult = {
      group: g.plan.name,
      from,
      to: firstTarget,
      path: [],
      duration_ms: 0,
      steps: [],
    };
    const controller = new AbortController();
    let target = firstTarget;
    let initial = ctx.initial;
    const base = { subject: g.plan.name, actor: ctx.actor, operation_id: ctx.operationId };
    this.opts.events.append({
      ...base,
      kind: 'transition.started',
      data: { from, to: firstTarget, initial },
    });
    const timeout = this.clock.sleep(this.timeoutMs, controller.signal).then(
      () => {
        throw new UisError({
          code: 'transition_timeout',
          status: 504,
          message: `transition of ${g.plan.name} to ${target} exceeded ${this.timeoutMs} ms`,
        });
      },
      () => undefined,
    );
    try {
      for (;;) {
        await Promise.race([this.step(g, target, initial, result, base, controller.signal), timeout]);
        result.path.push(target);
        const phase = this.phaseOf(g, target);
        if (!this.autoAdvance(phase)) break;
        target = this.nextPhase(g, target);
        result.to = target;
        initial = false;
      }
      result.duration_ms = this.now() - started;
      this.opts.events.append({
        ...base,
        kind: 'transition.completed',
        duration_ms: result.duration_ms,
        data: { from, to: result.to, path: result.path },
      });
      return result;
    } catch (e) {
      if (this.#stop.signal.aborted) {
        // The service stopped its engines under this transition. Every engine stops with the service, so no
        // memory is in doubt: the lease stays held at its last completed phase (a restart resumes there), rather
        // than blocked for an operator.
        const phase = g.lease.phase;
        g.lease.status = 'held';
        g.lease.reason = null;
        g.lease.target = null;
        g.lease.holder = phase === null ? [] : this.phaseOf(g, phase).residents;
        this.persist(g.lease);
        this.logger.info(
          { group: g.plan.name, target, phase, err: errorMessage(e) },
          'transition interrupted: the service is stopping',
        );
        this.opts.events.append({
          ...base,
          kind: 'transition.interrupted',
          duration_ms: this.now() - started,
          data: { from, to: target, phase },
        });
        throw new UisError({
          code: 'service_stopping',
          status: 503,
          message: `transition of ${g.plan.name} to ${target} interrupted: the service is stopping`,
          cause: e,
        });
      }
      g.lease.status = 'blocked';
      g.lease.reason = `transition to ${target} failed: ${errorMessage(e)}`;
      g.lease.target = target;
      this.persist(g.lease);
      this.logger.error(
        { group: g.plan.name, target, err: errorMessage(e) },
        'transition failed; lease blocked',
      );
      this.opts.events.append({
        ...base,
        kind: 'lease.blocked',
        duration_ms: this.now() - started,
        data: { from, to: target, reason: g.lease.reason },
      });
      throw new UisError({
        code:
          e instanceof UisError && e.code === 'transition_timeout'
            ? 'transition_timeout'
            : 'transition_failed',
        relayedStatus: e instanceof UisError ? e.status : undefined,
        message: g.lease.reason,
        cause: e,
      });
    } finally {
      controller.abort();
    }
  }

  private async timed<T>(
    result: TransitionResult,
    base: { subject: string; actor: string | null; operation_id: string | null },
    phase: string,
    step: string,
    fn: () => Promise<T>,
  ): Promise<T> {
    const t0 = this.now();
    const out = await fn();
    const duration_ms = this.now() - t0;
    result.steps.push({ step, phase, duration_ms });
    this.opts.events.append({ ...base, kind: 'transition.step', duration_ms, data: { step, phase } });
    return out;
  }

  private async step(
    g: GroupState,
    to: string,
    initial: boolean,
    result: TransitionResult,
    base: { subject: string; actor: string | null; operation_id: string | null },
    signal: AbortSignal,
  ): Promise<void> {
    const target = this.phaseOf(g, to);
    const residentRoles = new Set(target.residents);
    const leaving = initial
      ? [...this.participants.keys()].filter((r) => !residentRoles.has(r) && this.inGroup(g, r))
      : g.lease.holder.filter((r) => !residentRoles.has(r));
    const from = g.lease.phase;
    g.lease.status = 'transitioning';
    g.lease.target = to;
    this.persist(g.lease);

    // 1+2: leaving roles publish draining, drain, flush and release memory (in parallel across roles).
    const reports = await this.timed(result, base, to, 'offload', () =>
      Promise.all(leaving.map(async (role) => ({ role, report: await this.participant(role)?.drain() }))),
    );
    // 3: the proof. Without every engine reporting its memory released, the next phase must not onload.
    const engines = reports.flatMap((r) => r.report?.engines ?? []);
    const notReleased = engines.filter((e) => !e.memory_released);
    if (reports.some((r) => r.report && !r.report.memoryReleased) || notReleased.length > 0)
      throw new UisError({
        code: 'memory_not_released',
        status: 409,
        message: `engines did not report memory released: ${
          notReleased.map((e) => e.engine_id).join(', ') ||
          reports
            .filter((r) => !r.report?.memoryReleased)
            .map((r) => r.role)
            .join(', ')
        }`,
      });
    g.lease.lastRelease = { phase: from, roles: leaving, engines, at: this.now() };
    g.lease.holder = [];
    this.opts.events.append({
      ...base,
      kind: 'lease.released',
      data: { phase: from, roles: leaving, engines: engines.length },
    });

    // 4: onload the residents of the target phase.
    const incoming = target.residents.filter((r) => this.participants.has(r));
    await this.timed(result, base, to, 'onload', () =>
      Promise.all(incoming.map((r) => (this.participants.get(r) as PhaseParticipant).activate())),
    );
    for (const reg of this.opts.registries ?? []) reg.publish({ phase: to });
    g.lease.phase = to;
    g.lease.holder = target.residents;
    this.opts.events.append({
      ...base,
      kind: 'lease.acquired',
      data: { phase: to, holder: target.residents },
    });

    // 5: phase work (deferred batches) runs while the lease is still marked transitioning: barriers on this phase
    // open only once the work is written back.
    const tasks = this.tasks.get(to) ?? [];
    if (tasks.length > 0)
      await this.timed(result, base, to, 'tasks', () =>
        Promise.all(
          tasks.map((t) =>
            // A stop cuts phase work short with its reason instead of letting it fail under stopped engines.
            t({ group: g.plan.name, phase: to, signal: AbortSignal.any([signal, this.#stop.signal]) }),
          ),
        ),
      );
    g.lease.status = 'held';
    g.lease.reason = null;
    g.lease.target = null;
    this.persist(g.lease);
    this.opts.events.append({ ...base, kind: 'phase.entered', data: { phase: to } });
  }

  private inGroup(g: GroupState, role: string): boolean {
    return g.plan.phases.some((p) => p.residents.includes(role));
  }

  private participant(role: string): PhaseParticipant | undefined {
    return this.participants.get(role);
  }

  /** Trainer barrier: resolves once `phase` is resident and its work is done; 504 on timeout; 409 if the lease
   * gets blocked meanwhile (the caller must not proceed on a half-finished transition). */
  async waitForPhase(phase: string, timeoutMs: number, group?: string, signal?: AbortSignal): Promise<Lease> {
    const g = this.group(group);
    this.phaseOf(g, phase);
    return new Promise((resolve, reject) => {
      const check = () => {
        const l = g.lease;
        if (l.status === 'held' && l.phase === phase) {
          finish();
          resolve(structuredClone(l));
        } else if (l.status === 'blocked') {
          finish();
          reject(
            new UisError({
              code: 'lease_blocked',
              status: 409,
              message: `lease of ${g.plan.name} is blocked: ${l.reason}`,
            }),
          );
        }
      };
      const timer = setTimeout(() => {
        finish();
        reject(
          new UisError({
            code: 'barrier_timeout',
            status: 504,
            message: `phase ${phase} of ${g.plan.name} not reached within ${timeoutMs} ms (now ${g.lease.phase}, ${g.lease.status})`,
          }),
        );
      }, timeoutMs);
      // The waiter went away (its HTTP client disconnected): stop waiting for it now, not at the timeout.
      const onAbort = () => {
        finish();
        reject(
          new UisError({ code: 'client_gone', status: 499, message: `wait for phase ${phase} abandoned` }),
        );
      };
      const finish = () => {
        clearTimeout(timer);
        g.waiters.delete(check);
        signal?.removeEventListener('abort', onAbort);
      };
      if (signal?.aborted) {
        onAbort();
        return;
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      g.waiters.add(check);
      check();
    });
  }

  /** The trainer is done with `phase`: move on to the next one (e.g. train -> rollout wakes rollout). */
  async releasePhase(
    phase: string,
    opts: { group?: string; operationId?: string; actor?: string } = {},
  ): Promise<TransitionResult> {
    const g = this.group(opts.group);
    this.phaseOf(g, phase);
    const to = this.nextPhase(g, phase);
    if (g.lease.phase !== phase && !(g.current?.target === to)) {
      throw new UisError({
        code: 'phase_not_resident',
        status: 409,
        path: 'phase',
        message: `cannot release ${phase}: resident phase of ${g.plan.name} is ${g.lease.phase}`,
      });
    }
    return this.transition({ ...opts, group: g.plan.name, to });
  }

  /** Operator action: unblock a lease after checking the engines by hand, stating which phase is resident. */
  resolve(opts: { group?: string; phase: string; actor: string; note?: string }): Lease {
    const g = this.group(opts.group);
    const p = this.phaseOf(g, opts.phase);
    if (g.lease.status !== 'blocked')
      throw new UisError({
        code: 'lease_not_blocked',
        status: 409,
        message: `lease of ${g.plan.name} is not blocked`,
      });
    const reason = g.lease.reason;
    g.lease.status = 'held';
    g.lease.phase = p.name;
    g.lease.holder = p.residents;
    g.lease.reason = null;
    g.lease.target = null;
    this.persist(g.lease);
    this.opts.events.append({
      kind: 'lease.resolved',
      subject: g.plan.name,
      actor: opts.actor,
      data: { phase: p.name, previous_reason: reason, note: opts.note ?? null },
    });
    return structuredClone(g.lease);
  }
}
