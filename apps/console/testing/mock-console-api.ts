import {
  type ActivationGroupView,
  type Clock,
  type ConsoleState,
  type EventView,
  systemClock,
} from '@uis/spec';
import { DEMO_GROUPS, DEMO_PHASES, type DemoOptions, demoState } from './demo-state.ts';
import type { ConsoleApiImpl } from './mock-router.ts';

/** An in-memory stand-in for the gateway behind the console contract: the demo state advances a phase on each
 * `tick()`, operator actions change it, and every change is pushed to subscribers. For component development,
 * screenshots and client tests while (or where) the real gateway is not running. The clock is a parameter. */
export class MockConsoleApi implements ConsoleApiImpl {
  readonly adminToken: string;
  readonly servingToken?: string;
  private phase = 0;
  private readonly drained = new Set<string>();
  private readonly restarted: Record<string, number> = {};
  private readonly events: EventView[] = [];
  private readonly transitions: ActivationGroupView['transitions'] = [];
  private readonly listeners = new Set<() => void>();
  private readonly clock: Clock;
  private readonly moved: DemoOptions['moved'];
  /** Why the lease is blocked (as after a failed transition), or null. */
  private blocked: string | null = null;

  constructor(options: {
    adminToken: string;
    servingToken?: string | undefined;
    clock?: Clock;
    moved?: DemoOptions['moved'];
  }) {
    this.adminToken = options.adminToken;
    if (options.servingToken !== undefined) this.servingToken = options.servingToken;
    this.clock = options.clock ?? systemClock;
    this.moved = options.moved;
    this.record('system', 'service.start', 'uis', 'mock gateway started');
  }

  state(): ConsoleState {
    return demoState({
      now: this.clock.now(),
      phase: this.phase,
      drained: [...this.drained],
      restarted: this.restarted,
      events: this.events.slice(-200),
      transitions: this.transitions.slice(-50),
      weightVersion: 3 + Math.floor(this.phase / DEMO_PHASES.length),
      moved: this.moved,
      blocked: this.blocked,
    });
  }

  async *changes(signal: AbortSignal): AsyncIterable<ConsoleState> {
    let changed = true;
    let wake: (() => void) | null = null;
    const listener = () => {
      changed = true;
      wake?.();
    };
    this.listeners.add(listener);
    const onAbort = () => wake?.();
    signal.addEventListener('abort', onAbort);
    try {
      while (!signal.aborted) {
        if (changed) {
          changed = false;
          yield this.state();
          continue;
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = null;
      }
    } finally {
      this.listeners.delete(listener);
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Moves the lease to the next phase (what the demo's RL loop does); a blocked lease stays where it is. */
  tick(): void {
    if (this.blocked === null) this.advance(null, 'driver');
  }

  /** Blocks the lease as a failed transition does, until an operator resolves it. */
  block(reason: string): void {
    this.blocked = reason;
    this.record('system', 'lease.blocked', 'actor', reason);
  }

  async drainModel(input: { role: string; model: string }) {
    this.model(input);
    this.drained.add(input.model);
    this.record('console', 'admin.drain', `${input.role}/${input.model}`, 'drained by operator');
    const engines = this.state()
      .replicas.filter((r) => r.model === input.model)
      .map((r) => ({ engine_id: r.engine_id, memory_released: true, state: 'sleeping' }));
    return { memory_released: true, engines };
  }

  async activateModel(input: { role: string; model: string }) {
    this.model(input);
    this.drained.delete(input.model);
    this.record('console', 'admin.activate', `${input.role}/${input.model}`, 'activated by operator');
    return { onloaded: true };
  }

  async advancePhase(input: { group: string; to?: string }) {
    this.group(input.group);
    if (input.to !== undefined) this.phaseIndex(input.to);
    if (this.blocked !== null) {
      throw new Error(`activation lease of actor is blocked: ${this.blocked}; an operator must resolve it`);
    }
    const from = DEMO_PHASES[this.phase % DEMO_PHASES.length]?.name ?? null;
    const started = this.clock.now();
    const to = this.advance(input.to ?? null, 'console');
    return { group: 'actor', from, to, path: [to], duration_ms: this.clock.now() - started, steps: [] };
  }

  async resolveLease(input: { group: string; phase: string; note?: string }) {
    this.group(input.group);
    const index = this.phaseIndex(input.phase);
    if (this.blocked === null) throw new Error('lease of actor is not blocked');
    this.blocked = null;
    while (this.phase % DEMO_PHASES.length !== index) this.phase++;
    const note = input.note ? `: ${input.note}` : '';
    this.record('console', 'lease.resolved', 'actor', `resolved at ${input.phase}${note}`);
    const residents = DEMO_PHASES[index]?.residents ?? [];
    return {
      group: 'actor',
      phase: input.phase,
      holder: [...residents],
      status: 'held' as const,
      reason: null,
      target: null,
      last_release: null,
      since: this.clock.now(),
    };
  }

  async restartReplica(input: { role: string; engine_id: string }) {
    const known = this.state().replicas.some((r) => r.engine_id === input.engine_id);
    if (!known) throw new Error(`unknown engine "${input.engine_id}"`);
    this.restarted[input.engine_id] = (this.restarted[input.engine_id] ?? 0) + 1;
    this.record('console', 'admin.restart', input.engine_id, 'restarted by operator');
    return { engine_id: input.engine_id, restarted: true };
  }

  private group(name: string): void {
    if (name !== 'actor') throw new Error(`unknown activation group "${name}"; known: actor`);
  }

  private phaseIndex(name: string): number {
    const i = DEMO_PHASES.findIndex((p) => p.name === name);
    if (i === -1)
      throw new Error(`unknown phase "${name}"; phases: ${DEMO_PHASES.map((p) => p.name).join(', ')}`);
    return i;
  }

  private model(input: { role: string; model: string }): void {
    if (!DEMO_GROUPS.some((g) => g.role === input.role && g.model === input.model)) {
      throw new Error(`unknown model ${input.role}/${input.model}`);
    }
  }

  private advance(to: string | null, actor: string): string {
    const from = DEMO_PHASES[this.phase % DEMO_PHASES.length]!.name;
    let next = this.phase + 1;
    if (to !== null) while (DEMO_PHASES[next % DEMO_PHASES.length]!.name !== to) next++;
    this.phase = next;
    const target = DEMO_PHASES[next % DEMO_PHASES.length]!.name;
    const at = this.clock.now();
    const duration = 400 + ((next * 379) % 1700);
    this.transitions.push({
      id: `t${next}`,
      from,
      to: target,
      started_at: at - duration,
      ended_at: at,
      duration_ms: duration,
      status: 'ok',
      error: null,
    });
    this.record(actor, 'phase.transition', 'actor', `${from} -> ${target}`);
    return target;
  }

  private record(actor: string, kind: string, subject: string, message: string): void {
    this.events.push({ id: this.events.length + 1, at: this.clock.now(), kind, actor, subject, message });
    for (const listener of this.listeners) listener();
  }
}
