import { waitFor } from '@uis/sglang-engine/testing';
import { deferPhases } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { EventLog } from '../event-log.ts';
import { LifecycleCoordinator, type OffloadReport, type PhaseParticipant } from '../lifecycle-coordinator.ts';
import { openStore } from '../store.ts';
import { outcomeCode } from '../testing.ts';

const GROUP = { name: 'actor', pool: 'actor', phases: deferPhases(['genrm']) };

/** A role whose onload can be held open (the process then "dies" during it) and which can name engines whose memory
 * it does not know. */
class Role implements PhaseParticipant {
  doubts: string[] = [];
  holdActivate = false;
  failActivate = false;
  constructor(
    readonly role: string,
    private readonly trace: string[],
  ) {}
  async drain(): Promise<OffloadReport> {
    this.trace.push(`${this.role}.drain`);
    return {
      memoryReleased: true,
      engines: [{ engine_id: `${this.role}/0`, memory_released: true, state: 'sleeping' }],
    };
  }
  async activate(): Promise<void> {
    this.trace.push(`${this.role}.activate`);
    if (this.holdActivate) await new Promise(() => {});
    if (this.failActivate) throw new Error('resume_memory_occupation failed');
  }
  memoryInDoubt(): string[] {
    return this.doubts;
  }
}

/** A coordinator whose process "dies" while genrm onloads (rollout -> genrm_score), and the restart on its store. */
async function crashDuringOnload() {
  const db = openStore();
  const events = new EventLog(db);
  const before: string[] = [];
  const first = [new Role('rollout', before), new Role('genrm', before)] as const;
  const crashed = new LifecycleCoordinator({ groups: [GROUP], participants: [...first], db, events });
  await crashed.initialize();
  first[1].holdActivate = true;
  void crashed.transition().catch(() => undefined);
  await waitFor(() => before.includes('genrm.activate'), 10_000, 'genrm.activate called');
  expect(crashed.lease()).toMatchObject({ status: 'transitioning', target: 'genrm_score' });
  const trace: string[] = [];
  const roles = [new Role('rollout', trace), new Role('genrm', trace)] as const;
  const restarted = new LifecycleCoordinator({ groups: [GROUP], participants: [...roles], db, events });
  return { restarted, roles, trace, events };
}

describe('lease recovery after a restart mid-transition', () => {
  it('resumes by itself when every engine memory state is known: the transition runs again to its target', async () => {
    const { restarted, trace, events } = await crashDuringOnload();
    // Blocked until the started participants said what they know.
    expect(restarted.lease().status).toBe('blocked');
    expect(await restarted.recoverAfterRestart()).toBe('resumed');
    // Every role not resident in genrm_score drained (with proof) before genrm onloaded; genrm_score then advanced
    // to train by itself, as a defer transition does.
    expect(trace).toEqual(['rollout.drain', 'genrm.activate', 'genrm.drain']);
    expect(restarted.lease()).toMatchObject({ status: 'held', phase: 'train', reason: null });
    const recovered = events.list({ kind: 'lease.recovered', limit: 10 });
    expect(recovered.map((e) => [e.actor, e.data])).toEqual([
      ['system', { phase: 'rollout', target: 'genrm_score' }],
    ]);
    expect(events.list({ kind: 'lease.resolved', limit: 10 })).toEqual([]);
    // Nothing left to recover.
    expect(await restarted.recoverAfterRestart()).toBe('none');
  });

  it('stays blocked, naming each engine to check, when an engine memory state is not known', async () => {
    const { restarted, roles, trace } = await crashDuringOnload();
    roles[1].doubts = ['judge/0 (resuming when the previous control plane stopped)'];
    expect(await restarted.recoverAfterRestart()).toBe('blocked');
    const lease = restarted.lease();
    expect(lease.status).toBe('blocked');
    expect(lease.reason).toContain('transition to genrm_score');
    expect(lease.reason).toContain('genrm judge/0 (resuming when the previous control plane stopped)');
    // Nothing was drained or onloaded on a guess.
    expect(trace).toEqual([]);
    expect(await outcomeCode(restarted.transition())).toBe('lease_blocked');
    // The operator checks the engine and resolves; the schedule goes on from there.
    roles[1].doubts = [];
    // The resolve brings the engines to rollout (GenRM drained with its proof, rollout onloaded) before the lease
    // is held there.
    expect(await restarted.resolve({ phase: 'rollout', actor: 'operator' })).toMatchObject({
      status: 'held',
      phase: 'rollout',
    });
    expect(trace).toEqual(['genrm.drain', 'rollout.activate']);
    await restarted.transition();
    expect(restarted.lease()).toMatchObject({ status: 'held', phase: 'train' });
  });

  it('a resumed transition that fails blocks the lease with its reason instead of failing the start', async () => {
    const { restarted, roles } = await crashDuringOnload();
    roles[1].failActivate = true;
    expect(await restarted.recoverAfterRestart()).toBe('blocked');
    expect(restarted.lease()).toMatchObject({ status: 'blocked', target: 'genrm_score' });
    expect(restarted.lease().reason).toMatch(
      /transition to genrm_score failed: .*resume_memory_occupation failed/,
    );
  });

  it('a lease that was not mid-transition has nothing to recover', async () => {
    const db = openStore();
    const trace: string[] = [];
    const roles = [new Role('rollout', trace), new Role('genrm', trace)];
    const c = new LifecycleCoordinator({
      groups: [GROUP],
      participants: roles,
      db,
      events: new EventLog(db),
    });
    await c.initialize();
    expect(await c.recoverAfterRestart()).toBe('none');
    expect(c.lease()).toMatchObject({ status: 'held', phase: 'rollout' });
  });
});
