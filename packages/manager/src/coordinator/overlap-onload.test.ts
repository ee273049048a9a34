import { waitFor } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import { EventLog } from '../event-log.ts';
import { LifecycleCoordinator, type OffloadReport, type PhaseParticipant } from '../lifecycle-coordinator.ts';
import { openStore } from '../store.ts';
import { outcomeCode } from '../testing.ts';

/** A role whose drain waits until the test lets it go. */
class GatedRole implements PhaseParticipant {
  gate: Promise<void> = Promise.resolve();
  open: () => void = () => undefined;
  released = true;
  constructor(
    readonly role: string,
    private readonly trace: string[],
  ) {}
  hold(): void {
    this.gate = new Promise((resolve) => {
      this.open = resolve;
    });
  }
  async drain(): Promise<OffloadReport> {
    this.trace.push(`${this.role}.drain`);
    await this.gate;
    this.trace.push(`${this.role}.released`);
    return {
      memoryReleased: this.released,
      engines: [{ engine_id: `${this.role}/0`, memory_released: this.released, state: 'sleeping' }],
    };
  }
  async activate(): Promise<void> {
    this.trace.push(`${this.role}.activate`);
  }
}

// rollout on GPUs 0-1; GenRM on 2-3 (none of rollout's); the teacher on 1-2 (one of rollout's).
const BUNDLES = { actor: { rollout: [0, 1], genrm: [2, 3], teacher: [1, 2] } };

async function setup(roleBundles?: typeof BUNDLES) {
  const trace: string[] = [];
  const db = openStore();
  const [rollout, genrm, teacher] = ['rollout', 'genrm', 'teacher'].map((r) => new GatedRole(r, trace)) as [
    GatedRole,
    GatedRole,
    GatedRole,
  ];
  const coordinator = new LifecycleCoordinator({
    groups: [
      {
        name: 'actor',
        pool: 'actor',
        phases: [
          { name: 'rollout', residents: ['rollout'] },
          { name: 'score', residents: ['genrm', 'teacher'] },
        ],
      },
    ],
    participants: [rollout, genrm, teacher],
    db,
    events: new EventLog(db),
    autoAdvance: () => false,
    ...(roleBundles ? { roleBundles } : {}),
  });
  await coordinator.initialize();
  trace.length = 0;
  return { trace, rollout, coordinator };
}

describe('overlapping onloads', () => {
  it('a resident on GPUs the leaving phase does not use onloads during the release; one that shares a GPU after the proof', async () => {
    const { trace, rollout, coordinator } = await setup(BUNDLES);
    rollout.hold();
    const done = coordinator.transition({ to: 'score' });
    await waitFor(() => trace.includes('genrm.activate'), 5_000, 'GenRM onloading during the release');
    expect(trace).toEqual(['genrm.activate', 'rollout.drain']);
    rollout.open();
    await done;
    expect(trace).toEqual(['genrm.activate', 'rollout.drain', 'rollout.released', 'teacher.activate']);
    // Back: rollout shares GPU 1 with the teacher, so it waits for both releases.
    trace.length = 0;
    await coordinator.transition({ to: 'rollout' });
    expect(trace.indexOf('rollout.activate')).toBeGreaterThan(
      Math.max(trace.indexOf('genrm.released'), trace.indexOf('teacher.released')),
    );
  });

  it('without the roles’ GPUs every onload waits for the proof of release', async () => {
    const { trace, rollout, coordinator } = await setup();
    rollout.hold();
    const done = coordinator.transition({ to: 'score' });
    await waitFor(() => trace.includes('rollout.drain'), 5_000, 'rollout draining');
    expect(trace).toEqual(['rollout.drain']);
    rollout.open();
    await done;
    expect(trace.slice(0, 2)).toEqual(['rollout.drain', 'rollout.released']);
  });

  it('a release that is not proven still stops the onloads that share its GPUs', async () => {
    const { trace, rollout, coordinator } = await setup(BUNDLES);
    rollout.released = false;
    expect(await outcomeCode(coordinator.transition({ to: 'score' }))).toBe('transition_failed');
    expect(trace).toContain('genrm.activate');
    expect(trace).not.toContain('teacher.activate');
    expect(coordinator.lease().status).toBe('blocked');
  });
});
