import { describe, expect, it } from 'vitest';
import { deferTestConfig, gatewayOnSims } from '../testing/fixtures.ts';

const gw = gatewayOnSims({
  config: deferTestConfig(),
  server: { adminToken: 'admin-token-for-hold-order-tests' },
  sim: { simOnloadMs: 20, simOffloadMs: 20 },
});
const judge = () => gw.plane.managers.get('genrm')?.snapshot().models.judge;

describe("an operator's drain and activation keep their order", { timeout: 90_000 }, () => {
  it('an activation outside the phase, sent after a drain not yet run, leaves the model unheld', async () => {
    expect(gw.plane.coordinator.lease('actor').phase).toBe('rollout');
    const genrm = gw.plane.managers.get('genrm');
    // The drain is queued behind the manager's operations; the activation comes right after it.
    const drained = genrm?.drainModel('judge');
    const activated = gw.plane.activateModel('genrm', 'judge');
    await drained;
    expect(await activated).toMatchObject({ onloaded: false, waits_for: { phases: ['genrm_score'] } });
    // The operator's last word was the activation: no hold is left, so the judge comes back with its phase.
    expect(judge()?.held).toBe(false);
    let inItsPhase: string | undefined;
    const off = gw.plane.coordinator.registerPhaseTask('genrm_score', async () => {
      inItsPhase = gw.plane.managers.get('genrm')?.registry.snapshot().models.judge?.state;
    });
    try {
      await gw.plane.coordinator.transition({ group: 'actor' });
    } finally {
      off();
    }
    expect(inItsPhase).toBe('ready');
  });

  it('an activation in the phase, while the phase does its work, onloads a held model now', async () => {
    const genrm = gw.plane.managers.get('genrm');
    await gw.plane.coordinator.transition({ group: 'actor', to: 'rollout' });
    await genrm?.drainModel('judge');
    expect(judge()?.held).toBe(true);
    let during: unknown;
    const off = gw.plane.coordinator.registerPhaseTask('genrm_score', async () => {
      during = await gw.plane.activateModel('genrm', 'judge');
    });
    try {
      await gw.plane.coordinator.transition({ group: 'actor' });
    } finally {
      off();
    }
    expect(during).toEqual({ onloaded: true });
    expect(judge()?.held).toBe(false);
  });
});
