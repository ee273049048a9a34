import { ManualClock } from '@uis/sglang-engine/testing';
import { afterEach, describe, expect, it } from 'vitest';
import type { InferenceManager } from '../inference-manager.ts';
import { type LaunchRequest, SimLauncher } from '../launchers.ts';
import { simRolloutManager } from '../testing.ts';

/** Launches sim engines, or refuses while `refuse` is set (a node that lost its GPUs). */
class FlakyLauncher extends SimLauncher {
  refuse = false;
  launches = 0;
  override async create(req: LaunchRequest) {
    this.launches++;
    if (this.refuse) throw new Error('launch refused: no GPU on this node');
    return super.create(req);
  }
}

let manager: InferenceManager | undefined;
afterEach(async () => {
  await manager?.shutdown();
  manager = undefined;
});

const HOUR = 3_600_000;

/** Resolves when the registry publishes policy's first replica ready. */
function readyPublished(m: InferenceManager): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (m.registry.snapshot().models.policy?.engines[0]?.state !== 'ready') return;
      off();
      resolve();
    };
    const off = m.registry.subscribe(check);
    check();
  });
}

/** The shortest pending sleep: the restart backoff (the health loop sleeps an hour in these tests). */
const nextDelay = (clock: ManualClock) => Math.min(...clock.pendingDelays());

describe('recovery on the injected clock', { timeout: 60_000 }, () => {
  it('restarts a dead replica with exponential backoff capped at the maximum, then recovers', async () => {
    const clock = new ManualClock();
    const launcher = new FlakyLauncher();
    manager = simRolloutManager(
      {
        name: 'policy',
        weight_source: 'disk',
        fault_tolerance_enabled: true,
        engine_groups: [{ num_gpus: 1, gpus_per_engine: 1 }],
      },
      {
        clock,
        launcher,
        options: { healthIntervalMs: HOUR, restartBackoffMs: 100, restartBackoffMaxMs: 300 },
      },
    );
    await manager.start();
    launcher.refuse = true;
    const replica = () => manager?.snapshot().models.policy?.replicas[0];
    process.kill(replica()?.pids[0] as number, 'SIGKILL');
    // Each failed attempt waits on the clock: 100, 200, then the 300 cap, and nothing relaunches in between.
    const waits: number[] = [];
    for (let attempt = 0; attempt < 4; attempt++) {
      await clock.untilPending(2);
      waits.push(nextDelay(clock));
      expect(replica()?.state).toBe('dead');
      const before = launcher.launches;
      await clock.advance(nextDelay(clock) - 1);
      expect(launcher.launches).toBe(before);
      if (attempt === 3) launcher.refuse = false;
      await clock.advance(1);
    }
    expect(waits).toEqual([100, 200, 300, 300]);
    // The fifth attempt launches a real engine: its start takes real time, published when it is ready.
    await readyPublished(manager);
    expect(replica()).toMatchObject({ state: 'ready', generation: 5 });
    expect(launcher.launches).toBe(6);
  });
});
