import { ManualClock, waitFor } from '@uis/sglang-engine/testing';
import { deferPhases } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { EventLog } from './event-log.ts';
import { LifecycleCoordinator, type OffloadReport, type PhaseParticipant } from './lifecycle-coordinator.ts';
import { Registry } from './registry.ts';
import { openStore } from './store.ts';
import { outcomeCode } from './testing.ts';

const GROUP = {
  name: 'actor',
  pool: 'actor',
  phases: deferPhases(['genrm']),
};

/** A participant that records calls into a shared trace and can be told to misbehave. */
class FakeRole implements PhaseParticipant {
  resident = true;
  releaseMemory = true;
  failActivate = false;
  hangDrain = false;
  constructor(
    readonly role: string,
    private readonly trace: string[],
  ) {}
  async drain(): Promise<OffloadReport> {
    this.trace.push(`${this.role}.drain`);
    if (this.hangDrain) await new Promise(() => {});
    this.resident = false;
    return {
      memoryReleased: this.releaseMemory,
      engines: [{ engine_id: `${this.role}/0`, memory_released: this.releaseMemory, state: 'sleeping' }],
    };
  }
  async activate(): Promise<void> {
    this.trace.push(`${this.role}.activate`);
    if (this.failActivate) throw new Error('resume_memory_occupation failed');
    this.resident = true;
  }
}

function setup(timeoutMs = 5_000, clock?: ManualClock) {
  const trace: string[] = [];
  const db = openStore();
  const events = new EventLog(db);
  const rollout = new FakeRole('rollout', trace);
  const genrm = new FakeRole('genrm', trace);
  const registry = new Registry({ role: 'genrm' });
  const coordinator = new LifecycleCoordinator({
    groups: [GROUP],
    participants: [rollout, genrm],
    db,
    events,
    registries: [registry],
    transitionTimeoutMs: timeoutMs,
    ...(clock ? { clock } : {}),
  });
  return { trace, db, events, rollout, genrm, registry, coordinator };
}

describe('LifecycleCoordinator', () => {
  it('runs the defer transition in order: offload (with proof) before onload, scorer auto-advances to train', async () => {
    const { trace, coordinator, registry, genrm, events } = setup();
    await coordinator.initialize();
    expect(trace).toEqual(['genrm.drain', 'rollout.activate']);
    trace.length = 0;
    let taskRan = false;
    coordinator.registerPhaseTask('genrm_score', async () => {
      expect(genrm.resident).toBe(true);
      taskRan = true;
    });
    const barrier = coordinator.waitForPhase('train', 5_000);
    const r = await coordinator.transition();
    expect(r.path).toEqual(['genrm_score', 'train']);
    expect(trace).toEqual(['rollout.drain', 'genrm.activate', 'genrm.drain']);
    expect(taskRan).toBe(true);
    expect((await barrier).phase).toBe('train');
    expect(registry.snapshot().phase).toBe('train');
    const lease = coordinator.lease();
    expect(lease.lastRelease?.roles).toEqual(['genrm']);
    expect(lease.lastRelease?.engines.every((e) => e.memory_released)).toBe(true);
    // Trainer done: releasing `train` wakes rollout.
    trace.length = 0;
    await coordinator.releasePhase('train');
    expect(trace).toEqual(['rollout.activate']);
    expect(coordinator.lease().phase).toBe('rollout');
    const kinds = events.list().map((e) => e.kind);
    expect(kinds).toContain('lease.released');
    expect(events.list({ kind: 'transition.step' }).every((e) => typeof e.duration_ms === 'number')).toBe(
      true,
    );
  });

  it('blocks the lease when memory was not reported released, and never onloads the next phase', async () => {
    const { trace, coordinator, rollout, genrm } = setup();
    await coordinator.initialize();
    rollout.releaseMemory = false;
    trace.length = 0;
    expect(await outcomeCode(coordinator.transition())).toBe('transition_failed');
    expect(trace).toEqual(['rollout.drain']);
    expect(genrm.resident).toBe(false);
    const lease = coordinator.lease();
    expect(lease.status).toBe('blocked');
    expect(lease.reason).toMatch(/memory released/);
    expect(await outcomeCode(coordinator.transition())).toBe('lease_blocked');
    expect(await outcomeCode(coordinator.waitForPhase('train', 1_000))).toBe('lease_blocked');
    // Resolving to the phase the engines cannot reach (rollout still holds its memory) is refused, naming the
    // engine, and the lease stays blocked: never held over engines that contradict it.
    trace.length = 0;
    const refused = coordinator.resolve({ phase: 'genrm_score', actor: 'ops' });
    await expect(refused).rejects.toMatchObject({ code: 'transition_failed' });
    await expect(refused).rejects.toThrow(/rollout\/0/);
    expect(trace).toEqual(['rollout.drain']);
    expect(genrm.resident).toBe(false);
    expect(coordinator.lease().status).toBe('blocked');
    // Resolving to rollout moves the engines there: genrm drained with its proof, rollout onloaded.
    trace.length = 0;
    const resolved = await coordinator.resolve({
      phase: 'rollout',
      actor: 'ops',
      note: 'checked nvidia-smi',
    });
    expect(resolved).toMatchObject({ status: 'held', phase: 'rollout', holder: ['rollout'] });
    expect(trace).toEqual(['genrm.drain', 'rollout.activate']);
    expect(rollout.resident).toBe(true);
  });

  it('resolving a lease opens no barrier before the engines are in the phase', async () => {
    const { coordinator, rollout } = setup();
    await coordinator.initialize();
    rollout.releaseMemory = false;
    await outcomeCode(coordinator.transition());
    rollout.releaseMemory = true;
    rollout.resident = false;
    const seen: string[] = [];
    const off = coordinator.subscribe((e) => {
      if (e.kind === 'lease.resolved' || e.kind === 'phase.entered' || e.kind === 'lease.acquired')
        seen.push(`${e.kind}:${coordinator.lease().status}:${coordinator.lease().phase}`);
    });
    const resolving = coordinator.resolve({ phase: 'rollout', actor: 'ops' });
    // Held by nobody while the engines move: a barrier on any phase waits.
    expect(coordinator.lease()).toMatchObject({ phase: null, holder: [] });
    await resolving;
    off();
    expect(seen[0]).toBe('lease.resolved:held:null');
    expect(coordinator.lease()).toMatchObject({ status: 'held', phase: 'rollout' });
    expect(rollout.resident).toBe(true);
  });

  it('a timed-out transition blocks the lease with the reason, at its deadline and not before', async () => {
    const clock = new ManualClock();
    const { coordinator, rollout } = setup(100, clock);
    await coordinator.initialize();
    rollout.hangDrain = true;
    const outcome = outcomeCode(coordinator.transition());
    await clock.untilPending();
    await clock.advance(99);
    expect(coordinator.lease().status).toBe('transitioning');
    await clock.advance(1);
    expect(await outcome).toBe('transition_timeout');
    expect(coordinator.lease().status).toBe('blocked');
    expect(coordinator.lease().reason).toMatch(/exceeded 100 ms/);
  });

  it('operation ids: a repeated id joins, a different request under the same id is refused (409)', async () => {
    const { trace, coordinator } = setup();
    await coordinator.initialize();
    trace.length = 0;
    const a = coordinator.transition({ operationId: 'op-1', to: 'genrm_score' });
    const b = coordinator.transition({ operationId: 'op-1', to: 'genrm_score' });
    const [ra, rb] = await Promise.all([a, b]);
    expect(rb).toEqual(ra);
    expect(trace.filter((t) => t === 'rollout.drain')).toHaveLength(1);
    // After completion the stored result is returned, nothing runs again.
    expect(await coordinator.transition({ operationId: 'op-1', to: 'genrm_score' })).toEqual(ra);
    expect(await outcomeCode(coordinator.transition({ operationId: 'op-1', to: 'rollout' }))).toBe(
      'operation_id_conflict',
    );
  });

  it('a transition to another phase while one runs is refused (409); the same target joins', async () => {
    const { coordinator } = setup();
    await coordinator.initialize();
    const running = coordinator.transition({ to: 'genrm_score' });
    expect(await outcomeCode(coordinator.transition({ to: 'rollout' }))).toBe('transition_in_progress');
    const joined = coordinator.transition({ to: 'genrm_score' });
    const [a, b] = await Promise.all([running, joined]);
    expect(b).toBe(a);
  });

  it('a restart in the middle of a transition leaves the lease blocked, not guessed', async () => {
    // The transition's own timeout stays far away: it must still run when the lease is read.
    const { trace, db, events, coordinator, rollout, genrm } = setup();
    await coordinator.initialize();
    trace.length = 0;
    rollout.hangDrain = true;
    void coordinator.transition().catch(() => undefined);
    await waitFor(() => trace.includes('rollout.drain'), 10_000, 'rollout.drain called');
    expect(coordinator.lease().status).toBe('transitioning');
    const restarted = new LifecycleCoordinator({
      groups: [GROUP],
      participants: [rollout, genrm],
      db,
      events,
    });
    expect(restarted.lease().status).toBe('blocked');
    expect(restarted.lease().reason).toMatch(/restarted during a transition/);
  });

  it('a transition the stopping service interrupts leaves the lease held at its last phase, not blocked', async () => {
    const { coordinator, genrm } = setup();
    await coordinator.initialize();
    genrm.failActivate = true; // the engines go away under the onload
    coordinator.interrupt();
    expect(await outcomeCode(coordinator.transition({ to: 'genrm_score' }))).toBe('service_stopping');
    expect(coordinator.lease().status).toBe('held');
    // Nothing ran: a stopping service starts no transition.
    expect(genrm.resident).toBe(false);

    const second = setup();
    await second.coordinator.initialize();
    second.genrm.failActivate = true;
    const running = second.coordinator.transition({ to: 'genrm_score' });
    second.coordinator.interrupt();
    expect(await outcomeCode(running)).toBe('service_stopping');
    await second.coordinator.settled();
    const lease = second.coordinator.lease();
    expect(lease).toMatchObject({ status: 'held', phase: 'rollout', reason: null, holder: ['rollout'] });
    expect(second.events.list({ limit: 50 }).map((e) => e.kind)).toContain('transition.interrupted');
    // A restart on the same store resumes at that phase; no operator has to resolve anything.
    const restarted = new LifecycleCoordinator({
      groups: [GROUP],
      participants: [second.rollout, second.genrm],
      db: second.db,
      events: second.events,
    });
    expect(restarted.lease()).toMatchObject({ status: 'held', phase: 'rollout' });
  });

  it('barrier times out with 504 and unknown phases are 404', async () => {
    const clock = new ManualClock();
    const { coordinator } = setup(5_000, clock);
    await coordinator.initialize();
    let settled = false;
    const barrier = outcomeCode(coordinator.waitForPhase('train', 30)).finally(() => {
      settled = true;
    });
    await clock.advance(29);
    expect(settled).toBe(false);
    await clock.advance(1);
    expect(await barrier).toBe('barrier_timeout');
    // The barrier's timer is gone once it answered: nothing keeps sleeping on its behalf.
    expect(clock.pending).toBe(0);
    expect(await outcomeCode(coordinator.waitForPhase('nope', 30))).toBe('unknown_phase');
    expect(await outcomeCode(coordinator.releasePhase('train'))).toBe('phase_not_resident');
    // A waiter that goes away stops waiting at once, long before its timeout.
    const abandon = new AbortController();
    const waiting = outcomeCode(coordinator.waitForPhase('train', 60_000, undefined, abandon.signal));
    abandon.abort();
    expect(await waiting).toBe('client_gone');
    expect(await outcomeCode(coordinator.waitForPhase('train', 60_000, undefined, abandon.signal))).toBe(
      'client_gone',
    );
    expect(coordinator.describe().map((d) => [d.group, d.phases.map((p) => p.name), d.lease.phase])).toEqual([
      ['actor', ['rollout', 'genrm_score', 'train'], 'rollout'],
    ]);
  });

  it('a request without a group: the only group, else a 400 naming the groups; no groups is its own 404', async () => {
    const db = openStore();
    const none = new LifecycleCoordinator({ groups: [], participants: [], db, events: new EventLog(db) });
    const noGroups = await none.transition().catch((e: unknown) => e);
    expect(noGroups).toMatchObject({ code: 'no_activation_groups', status: 404, path: 'group' });
    expect(none.groupName()).toBeUndefined();

    const two = new LifecycleCoordinator({
      groups: [GROUP, { ...GROUP, name: 'critic', pool: 'critic' }],
      participants: [],
      db: openStore(),
      events: new EventLog(openStore()),
    });
    const unnamed = await two.transition().catch((e: unknown) => e);
    expect(unnamed).toMatchObject({ code: 'group_required', status: 400, path: 'group' });
    expect((unnamed as Error).message).toContain('actor, critic');
    expect(await outcomeCode(two.transition({ group: 'nope' }))).toBe('unknown_activation_group');

    const { coordinator } = setup();
    expect(coordinator.groupName()).toBe('actor');
    await coordinator.initialize();
    // Who may hold GPU memory now: the resident phase's roles, and roles outside every group.
    expect(coordinator.notResident('rollout')).toBeNull();
    expect(coordinator.notResident('teacher')).toBeNull();
    expect(coordinator.notResident('genrm')).toEqual({
      group: 'actor',
      phase: 'rollout',
      status: 'held',
      phases: ['genrm_score'],
    });
    expect(coordinator.groupName('critic')).toBe('critic');
  });
  it('a role may onload while its phase does its work, not while it is being drained out of the GPUs', async () => {
    const trace: string[] = [];
    let openDrain!: () => void;
    const drainGate = new Promise<void>((r) => {
      openDrain = r;
    });
    /** Rollout's drain waits for the test: the transition stays in its offload step meanwhile. */
    class GatedRole extends FakeRole {
      override async drain(): Promise<OffloadReport> {
        if (trace.includes('rollout.activate')) await drainGate;
        return super.drain();
      }
    }
    const rollout = new GatedRole('rollout', trace);
    const db = openStore();
    const coordinator = new LifecycleCoordinator({
      groups: [GROUP],
      participants: [rollout, new FakeRole('genrm', trace)],
      db,
      events: new EventLog(db),
    });
    // The scorer phase's work (deferred batches) runs while the lease is still transitioning: an operator who
    // activates a GenRM model then must get it onloaded now, not at the next RL step.
    let duringWork: ReturnType<LifecycleCoordinator['notResident']> | undefined;
    coordinator.registerPhaseTask('genrm_score', async () => {
      duringWork = coordinator.notResident('genrm');
    });
    await coordinator.initialize();
    const transition = coordinator.transition();
    await waitFor(() => coordinator.lease().status === 'transitioning', 10_000, 'the lease transitioning');
    // Rollout is being drained out of the GPUs: activating it would onload it beside GenRM.
    expect(coordinator.notResident('rollout')).toMatchObject({ status: 'transitioning', phase: 'rollout' });
    expect(coordinator.notResident('genrm')).toMatchObject({ status: 'transitioning', phase: 'rollout' });
    openDrain();
    expect((await transition).path).toEqual(['genrm_score', 'train']);
    expect(duringWork).toBeNull();
  });
});
