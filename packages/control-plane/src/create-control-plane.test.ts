import { deferConfig, splitConfig } from '@uis/manager/testing';
import { parseConfig } from '@uis/spec';
import { afterAll, describe, expect, it } from 'vitest';
import { createControlPlane } from './create-control-plane.ts';
import { InProcessSimLauncher } from './launchers/in-process-sim-launcher.ts';
import type { ControlPlaneEvent } from './stream.ts';

const launchers: InProcessSimLauncher[] = [];
const sims = () => {
  const l = new InProcessSimLauncher({ simOnloadMs: 5, simOffloadMs: 5 });
  launchers.push(l);
  return l;
};
afterAll(async () => {
  await Promise.allSettled(launchers.map((l) => l.closeAll()));
});

describe('createControlPlane', { timeout: 60_000 }, () => {
  it('refuses an invalid layout before any engine starts', async () => {
    // Eight GPUs of roles on a two-GPU node.
    const bad = parseConfig({ ...splitConfig(), cluster: { nodes: [{ name: 'node-0', gpus: 2 }] } });
    const launcher = sims();
    await expect(createControlPlane({ config: bad, launcher })).rejects.toMatchObject({
      code: 'invalid_layout',
      status: 400,
    });
    expect(launcher.serversOf('policy/0')).toEqual([]);
  });

  it('resolves started: every manager ready, the first phase resident, and the stream reports changes', async () => {
    const plane = await createControlPlane({ config: parseConfig(deferConfig()), launcher: sims() });
    const seen: ControlPlaneEvent[] = [];
    const off = plane.stream.subscribe((e) => seen.push(e));
    try {
      expect(plane.coordinator.lease('actor')).toMatchObject({ phase: 'rollout', status: 'held' });
      const rollout = plane.managers.get('rollout')?.snapshot().models;
      expect(Object.values(rollout ?? {}).flatMap((m) => m.replicas.map((r) => r.state))).toEqual([
        'ready',
        'ready',
      ]);
      await plane.coordinator.transition({ group: 'actor', actor: 'test' });
      expect(plane.coordinator.lease('actor').phase).toBe('train');
      const kinds = seen.flatMap((e) => (e.type === 'audit' ? [e.event.kind] : []));
      expect(kinds).toContain('transition.completed');
      const topology = seen
        .filter((e) => e.type === 'topology')
        .map((e) => (e.type === 'topology' ? e.role : ''));
      expect(topology).toContain('rollout');
      // A barrier waiter shows up on the stream while it waits.
      await plane.barriers.wait('actor', 'train', async () => undefined);
      expect(seen.filter((e) => e.type === 'barriers').length).toBe(2);
    } finally {
      off();
      await plane.stop();
    }
    // Stopped: the store is closed, a second stop is the same promise.
    expect(() => plane.store.list({})).toThrow();
    await plane.stop();
  });
});
