import { type Clock, type GroupMemoryPlan, type Logger, type SchedulePrediction, UisError } from '@uis/spec';
import type { EventLog } from '../event-log.ts';
import type { Registry } from '../registry.ts';
import { errorMessage } from '../runtime.ts';
import type { GroupLease, Phase } from './group-lease.ts';
import type { PhaseParticipant, PhaseTask, TransitionContext, TransitionResult } from './types.ts';

/** What a transition uses of its coordinator. */
export interface TransitionDeps {
  participants: ReadonlyMap<string, PhaseParticipant>;
  tasks: ReadonlyMap<string, PhaseTask[]>;
  registries: readonly Registry[];
  events: EventLog;
  clock: Clock;
  timeoutMs: number;
  autoAdvance: (phase: Phase) => boolean;
  /** Aborted when the service stops. */
  stop: AbortSignal;
  /** The group's memory plan: what each phase keeps on its GPUs and each switch's prediction. */
  memory?: GroupMemoryPlan;
  logger: Logger;
  slowSwitchMargin: number;
  /** The GPU bundles of each role in the group's pool; a role without (the trainer, or unknown) holds every one. */
  bundlesOf?: (role: string) => readonly number[] | undefined;
}

/** Seconds a switch may run over its prediction before it is logged, beside the share of the margin. */
const SLOW_SWITCH_SLACK_S = 0.2;

/** One run of a group from its resident phase to `firstTarget` (and on through auto-advancing phases): each step
 * offloads the leaving roles, requires their proof of released memory, onloads the residents, runs the phase's
 * work. The whole run has one deadline; a failure blocks the lease, a service stop leaves it held. */
export class PhaseTransition {
  readonly #result: TransitionResult;
  readonly #controller = new AbortController();
  readonly #ctx: TransitionContext;
  #target: string;

  constructor(
    private readonly deps: TransitionDeps,
    private readonly g: GroupLease,
    firstTarget: string,
    private initial: boolean,
    who: { actor: string | null; operationId: string | null },
  ) {
    this.#target = firstTarget;
    this.#ctx = { subject: g.name, actor: who.actor, operation_id: who.operationId };
    this.#result = {
      group: g.name,
      from: g.lease.phase,
      to: firstTarget,
      path: [],
      duration_ms: 0,
      steps: [],
    };
  }

  async run(): Promise<TransitionResult> {
    const { clock, events } = this.deps;
    const started = clock.now();
    const from = this.#result.from;
    events.append({
      ...this.#ctx,
      kind: 'transition.started',
      data: { from, to: this.#target, initial: this.initial },
    });
    const timeout = clock.sleep(this.deps.timeoutMs, this.#controller.signal).then(
      () => {
        throw new UisError({
          code: 'transition_timeout',
          message: `transition of ${this.g.name} to ${this.#target} exceeded ${this.deps.timeoutMs} ms`,
        });
      },
      () => undefined,
    );
    try {
      for (;;) {
        await Promise.race([this.step(this.#target), timeout]);
        this.#result.path.push(this.#target);
        if (!this.deps.autoAdvance(this.g.phase(this.#target))) break;
        this.#target = this.g.nextPhase(this.#target);
        this.#result.to = this.#target;
        this.initial = false;
      }
      this.#result.duration_ms = clock.now() - started;
      events.append({
        ...this.#ctx,
        kind: 'transition.completed',
        duration_ms: this.#result.duration_ms,
        data: { from, to: this.#result.to, path: this.#result.path },
      });
      return this.#result;
    } catch (e) {
      throw this.failed(e, clock.now() - started);
    } finally {
      this.#controller.abort();
    }
  }

  /** Moves the lease after a failed run and answers the error the caller sees. */
  private failed(e: unknown, durationMs: number): UisError {
    const { g } = this;
    const from = this.#result.from;
    const target = this.#target;
    if (this.deps.stop.aborted) {
      // The service stopped its engines under this transition. Every engine stops with the service, so no memory
      // is in doubt: the lease stays held at its last completed phase (a restart resumes there), rather than
      // blocked for an operator.
      const phase = g.lease.phase;
      g.move(
        'interrupt',
        { holder: phase === null ? [] : g.phase(phase).residents },
        {
          ...this.#ctx,
          kind: 'transition.interrupted',
          duration_ms: durationMs,
          data: { from, to: target, phase, error: errorMessage(e) },
        },
      );
      return new UisError({
        code: 'service_stopping',
        message: `transition of ${g.name} to ${target} interrupted: the service is stopping`,
        cause: e,
      });
    }
    const reason = `transition to ${target} failed: ${errorMessage(e)}`;
    g.move(
      'block',
      { reason, target },
      { ...this.#ctx, kind: 'lease.blocked', duration_ms: durationMs, data: { from, to: target, reason } },
    );
    return new UisError({
      code:
        e instanceof UisError && e.code === 'transition_timeout' ? 'transition_timeout' : 'transition_failed',
      relayedStatus: e instanceof UisError ? e.status : undefined,
      message: reason,
      cause: e,
    });
  }

  private async timed<T>(phase: string, step: string, fn: () => Promise<T>): Promise<T> {
    const t0 = this.deps.clock.now();
    const out = await fn();
    const duration_ms = this.deps.clock.now() - t0;
    this.#result.steps.push({ step, phase, duration_ms });
    this.deps.events.append({ ...this.#ctx, kind: 'transition.step', duration_ms, data: { step, phase } });
    return out;
  }

  /** The order in use of the group's memory plan; none when a model of the group is not sized (its bytes unknown,
   * every switch releases everything as without a plan). */
  private prediction(): SchedulePrediction | undefined {
    const m = this.deps.memory;
    if (m === undefined || m.unsized.length > 0) return undefined;
    return m.order === 'optimized' ? m.optimized : m.configured;
  }

  /** Logs (and records) a switch that ran over its prediction by more than the margin, with its parts. */
  private checkSwitchTime(prediction: SchedulePrediction | undefined, from: string | null, to: string): void {
    const predicted = prediction?.switches.find((s) => s.from === from && s.to === to);
    if (predicted === undefined) return;
    const steps = this.#result.steps.filter((s) => s.phase === to);
    const measured = (step: string) => (steps.findLast((s) => s.step === step)?.duration_ms ?? 0) / 1000;
    const release = measured('offload');
    const onload = measured('onload');
    const limit = predicted.predicted_s * (1 + this.deps.slowSwitchMargin) + SLOW_SWITCH_SLACK_S;
    if (release + onload <= limit) return;
    const data = {
      from,
      to,
      predicted_s: predicted.predicted_s,
      measured_s: Math.round((release + onload) * 1000) / 1000,
      parts: {
        release: { predicted_s: predicted.release_s, measured_s: release },
        onload: { predicted_s: predicted.resume_s + predicted.weight_sync_s, measured_s: onload },
      },
      bytes_moved: predicted.bytes_moved,
    };
    this.deps.events.append({ ...this.#ctx, kind: 'transition.slow_switch', data });
    this.deps.logger.warn(data, 'switch slower than predicted');
  }

  /** The roles of `incoming` whose bundles no role of `others` holds (a role without known bundles holds all). */
  private disjointFrom(incoming: readonly string[], others: readonly string[]): string[] {
    const of = this.deps.bundlesOf;
    if (of === undefined) return [];
    const taken = new Set<number>();
    for (const r of others) {
      const b = of(r);
      if (b === undefined) return [];
      for (const x of b) taken.add(x);
    }
    return incoming.filter((r) => of(r)?.every((x) => !taken.has(x)) ?? false);
  }

  private async step(to: string): Promise<void> {
    const { g, deps } = this;
    const target = g.phase(to);
    const residentRoles = new Set(target.residents);
    const prediction = this.prediction();
    // With a memory plan every role of the group outside the phase is drained: one asleep may still hold tags the
    // last phase kept and the next one has no room for.
    const keep = prediction?.phases.find((p) => p.name === to)?.resident_tags;
    const leaving =
      this.initial || keep !== undefined
        ? [...deps.participants.keys()].filter((r) => !residentRoles.has(r) && g.includes(r))
        : g.lease.holder.filter((r) => !residentRoles.has(r));
    const from = g.lease.phase;
    g.move('begin', { target: to });

    // Residents whose GPUs no leaving role (nor the trainer leaving) touches onload at once, beside the release: no
    // memory of theirs waits on it. The rest onload only after the proof.
    const incomingRoles = target.residents.filter((r) => deps.participants.has(r));
    const early = this.disjointFrom(
      incomingRoles,
      from === null ? leaving : [...leaving, ...g.phase(from).residents],
    );
    const started = early.map((r) => deps.participants.get(r)?.activate());
    const onloads = Promise.all(started);
    onloads.catch(() => undefined);

    // 1+2: leaving roles publish draining, drain, flush and release memory (all of it, or what the next phase
    // cannot keep), in parallel across roles.
    const reports = await this.timed(to, 'offload', () =>
      Promise.all(
        leaving.map(async (role) => ({
          role,
          report: await deps.participants.get(role)?.drain(keep === undefined ? undefined : { keep }),
        })),
      ),
    );
    // 3: the proof. Without every engine reporting its memory released, the next phase must not onload.
    const engines = reports.flatMap((r) => r.report?.engines ?? []);
    const notReleased = engines.filter((e) => !e.memory_released);
    if (reports.some((r) => r.report && !r.report.memoryReleased) || notReleased.length > 0)
      throw new UisError({
        code: 'memory_not_released',
        message: `engines did not report memory released: ${
          notReleased.map((e) => e.engine_id).join(', ') ||
          reports
            .filter((r) => !r.report?.memoryReleased)
            .map((r) => r.role)
            .join(', ')
        }`,
      });
    g.move(
      'release',
      { holder: [], lastRelease: { phase: from, roles: leaving, engines, at: deps.clock.now() } },
      {
        ...this.#ctx,
        kind: 'lease.released',
        data: { phase: from, roles: leaving, engines: engines.length },
      },
    );

    // 4: onload the residents of the target phase (those already onloading finish).
    const rest = incomingRoles
      .filter((r) => !early.includes(r))
      .flatMap((r) => deps.participants.get(r) ?? []);
    await this.timed(to, 'onload', () => Promise.all([onloads, ...rest.map((p) => p.activate())]));
    for (const reg of deps.registries) reg.publish({ phase: to });
    this.checkSwitchTime(prediction, from, to);
    g.move(
      'onload',
      { phase: to, holder: target.residents },
      { ...this.#ctx, kind: 'lease.acquired', data: { phase: to, holder: target.residents } },
    );

    // 5: phase work (deferred batches) runs while the lease is still marked transitioning: barriers on this phase
    // open only once the work is written back.
    const tasks = deps.tasks.get(to) ?? [];
    // A stop cuts phase work short with its reason instead of letting it fail under stopped engines.
    const signal = AbortSignal.any([this.#controller.signal, deps.stop]);
    if (tasks.length > 0)
      await this.timed(to, 'tasks', () =>
        Promise.all(tasks.map((t) => t({ group: g.name, phase: to, signal }))),
      );
    g.move('enter', {}, { ...this.#ctx, kind: 'phase.entered', data: { phase: to } });
  }
}
