import { ManualClock } from '@uis/sglang-engine/testing';
import type { GroupMemoryPlan, SchedulePrediction } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { EventLog } from '../event-log.ts';
import { LifecycleCoordinator, type OffloadReport, type PhaseParticipant } from '../lifecycle-coordinator.ts';
import { MemoryLogger } from '../runtime.ts';
import { openStore } from '../store.ts';

/** A role whose release and onload take set times on the injected clock (none: at once). */
class TimedRole implements PhaseParticipant {
  drainMs = 0;
  activateMs = 0;
  constructor(
    readonly role: string,
    private readonly clock: ManualClock,
  ) {}
  async drain(): Promise<OffloadReport> {
    if (this.drainMs > 0) await this.clock.sleep(this.drainMs);
    return {
      memoryReleased: true,
      engines: [{ engine_id: `${this.role}/0`, memory_released: true, state: 'sleeping' }],
    };
  }
  async activate(): Promise<void> {
    if (this.activateMs > 0) await this.clock.sleep(this.activateMs);
  }
}

const phase = (name: string, residents: string[]) => ({
  name,
  residents,
  resident_weights: [],
  resident_tags: {},
  peak_bytes: 0,
  capacity_bytes: 141e9,
});
const sw = (from: string, to: string, release_s: number, resume_s: number) => ({
  from,
  to,
  moves: [],
  bytes_moved: 16_400_000_000,
  release_s,
  resume_s,
  weight_sync_s: 0,
  predicted_s: release_s + resume_s,
});
const schedule: SchedulePrediction = {
  phases: [phase('rollout', ['rollout']), phase('genrm_score', ['genrm'])],
  // rollout -> genrm_score: 0.2 s to release, 0.3 s to resume: the log's limit is 0.5 x 1.5 + 0.2 = 0.95 s.
  switches: [sw('rollout', 'genrm_score', 0.2, 0.3), sw('genrm_score', 'rollout', 0.1, 0.1)],
  bubble_s: 0.7,
};
const memory: GroupMemoryPlan = {
  group: 'actor',
  order: 'configured',
  configured: schedule,
  optimized: schedule,
  release_all: schedule,
  unsized: [],
};

async function setup() {
  const clock = new ManualClock();
  const db = openStore();
  const events = new EventLog(db);
  const logger = new MemoryLogger();
  const rollout = new TimedRole('rollout', clock);
  const genrm = new TimedRole('genrm', clock);
  const coordinator = new LifecycleCoordinator({
    groups: [
      {
        name: 'actor',
        pool: 'actor',
        phases: [
          { name: 'rollout', residents: ['rollout'] },
          { name: 'genrm_score', residents: ['genrm'] },
        ],
      },
    ],
    participants: [rollout, genrm],
    db,
    events,
    clock,
    logger,
    memory: [memory],
    autoAdvance: () => false,
  });
  await coordinator.initialize();
  /** rollout -> genrm_score with the release and onload taking `drainMs` and `activateMs`. */
  const switchTimed = async (drainMs: number, activateMs: number) => {
    rollout.drainMs = drainMs;
    genrm.activateMs = activateMs;
    const done = coordinator.transition({ to: 'genrm_score' });
    // Pending: the transition's deadline and the step's own sleep.
    await clock.untilPending(2);
    await clock.advance(drainMs);
    await clock.untilPending(2);
    await clock.advance(activateMs);
    await done;
    genrm.drainMs = 0;
    rollout.activateMs = 0;
    await coordinator.transition({ to: 'rollout' });
    return events.list({ kind: 'transition.slow_switch' });
  };
  return { switchTimed, logger };
}

describe('the slow-switch log', () => {
  it('records a switch slower than its prediction by more than the margin, with its parts; not one at the limit', async () => {
    const { switchTimed, logger } = await setup();
    // As predicted, and exactly at the limit (0.95 s): nothing logged.
    expect(await switchTimed(200, 300)).toEqual([]);
    expect(await switchTimed(200, 750)).toEqual([]);
    // One millisecond over the limit: recorded with the predicted and measured parts.
    const [slow] = await switchTimed(200, 751);
    expect(slow?.subject).toBe('actor');
    expect(slow?.data).toEqual({
      from: 'rollout',
      to: 'genrm_score',
      predicted_s: 0.5,
      measured_s: 0.951,
      parts: {
        release: { predicted_s: 0.2, measured_s: 0.2 },
        onload: { predicted_s: 0.3, measured_s: 0.751 },
      },
      bytes_moved: 16_400_000_000,
    });
    expect(logger.lines.filter((l) => l.msg === 'switch slower than predicted')).toHaveLength(1);
    // A slow release counts as well.
    expect(await switchTimed(800, 300)).toHaveLength(2);
  });
});
