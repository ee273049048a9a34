import { afterEach, describe, expect, it } from 'vitest';
import type { InferenceManager } from './inference-manager.ts';
import { simRolloutManager } from './testing.ts';

let manager: InferenceManager | undefined;
afterEach(async () => {
  await manager?.shutdown();
  manager = undefined;
});

function rollout(): InferenceManager {
  manager = simRolloutManager({
    name: 'policy',
    weight_source: 'disk',
    engine_groups: [{ num_gpus: 4, gpus_per_engine: 2 }],
  });
  return manager;
}

describe("an operator's drain and activation keep their order", { timeout: 60_000 }, () => {
  it('an activation outside the phase, sent after a drain still queued, leaves the model unheld', async () => {
    const m = rollout();
    await m.start();
    // A phase change puts the role to sleep; the operator's drain of the model waits behind it, and the
    // operator then activates the model while its GPUs belong to another phase.
    const sleeping = m.deactivate();
    const drained = m.drainModel('policy');
    let asked = 0;
    const activated = m.activateModel('policy', undefined, {
      mayOnload: () => {
        asked++;
        return false;
      },
    });
    await Promise.all([sleeping, drained]);
    expect(await activated).toBe(false);
    expect(asked).toBe(1);
    // The operator's last word was the activation: nothing onloaded, no hold left, so the model comes back with
    // its role's next activation (its phase).
    expect(m.registry.snapshot().models.policy).toMatchObject({ state: 'sleeping' });
    expect(m.snapshot().models.policy?.held).toBe(false);
    await m.activate();
    expect(m.registry.snapshot().models.policy).toMatchObject({ state: 'ready' });
  });

  it('an activation in the phase onloads the model and lifts its hold', async () => {
    const m = rollout();
    await m.start();
    await m.drainModel('policy');
    expect(m.snapshot().models.policy?.held).toBe(true);
    expect(await m.activateModel('policy', undefined, { mayOnload: () => true })).toBe(true);
    expect(m.registry.snapshot().models.policy).toMatchObject({ state: 'ready' });
    expect(m.snapshot().models.policy?.held).toBe(false);
  });
});
