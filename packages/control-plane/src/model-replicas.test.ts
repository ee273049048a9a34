import { splitConfig } from '@uis/manager/testing';
import { parseConfig } from '@uis/spec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlane } from './control-plane.ts';
import { createControlPlane } from './create-control-plane.ts';
import { InProcessSimLauncher } from './launchers/in-process-sim-launcher.ts';
import { ModelReplicasSchema, modelReplicas } from './model-replicas.ts';

const launcher = new InProcessSimLauncher({ simOnloadMs: 5, simOffloadMs: 5 });
let plane: ControlPlane;

beforeAll(async () => {
  plane = await createControlPlane({ config: parseConfig(splitConfig()), launcher });
}, 60_000);
afterAll(async () => {
  await plane?.stop();
  await launcher.closeAll();
});

describe('modelReplicas: what a trainer pushing weights itself needs', () => {
  it('lists every replica with its live URL, state, version and its ranks on the planned nodes and GPUs', () => {
    for (const placement of plane.plan.placements) {
      const answer = ModelReplicasSchema.parse(modelReplicas(plane, placement.role, placement.model));
      expect(answer.replicas.map((r) => r.engine_id)).toEqual(placement.replicas.map((r) => r.engine_id));
      for (const [i, r] of answer.replicas.entries()) {
        const planned = placement.replicas[i]!;
        expect(r.state).toBe('ready');
        expect(r.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
        expect(r.tp).toBe(placement.tp);
        expect(r.ranks.map((x) => x.rank)).toEqual([...Array(placement.gpus_per_engine).keys()]);
        expect(r.ranks.map((x) => x.gpu_id)).toEqual(planned.nodes.flatMap((n) => n.gpu_ids));
        expect(new Set(r.ranks.map((x) => x.node))).toEqual(new Set(planned.nodes.map((n) => n.node)));
        // The in-process sims know only the plan: actual placement is unknown, never "as planned".
        expect(r.actual_gpus).toBeNull();
      }
    }
  });

  it('follows the live state: a drained model reports its sleeping replicas', async () => {
    const [first] = plane.plan.placements;
    await plane.managerOf(first!.role).drainModel(first!.model, { policy: 'abort', deadlineMs: 0 });
    const answer = modelReplicas(plane, first!.role, first!.model);
    expect(answer.replicas.map((r) => r.state)).toEqual(answer.replicas.map(() => 'sleeping'));
  });

  it('names the models a role has when asked for another', () => {
    expect(() => modelReplicas(plane, 'rollout', 'nope')).toThrow(
      expect.objectContaining({ code: 'unknown_model', status: 404, path: 'model' }),
    );
    expect(() => modelReplicas(plane, 'critic', 'x')).toThrow(
      expect.objectContaining({ code: 'unknown_role' }),
    );
  });
});
