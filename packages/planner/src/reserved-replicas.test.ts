import { describe, expect, it } from 'vitest';
import { planPlacement } from './planner.ts';
import { placeReservedReplicas } from './reserved-replicas.ts';
import { config } from './testing.ts';

type Doc = { roles: { rollout: { models: Array<{ engine_groups: unknown[] }> } } };

/** Rollout on 16 GPUs of two 8-GPU nodes: a regular group of 4 GPUs, 8 reserved bundles, 4 more regular. */
function elasticPlan() {
  const r = planPlacement(
    config((d) => {
      const groups = (d as unknown as Doc).roles.rollout.models[0]?.engine_groups as unknown[];
      groups.splice(0, 1, { num_gpus: 4, gpus_per_engine: 2 });
      groups.push({ worker_type: 'placeholder', num_gpus: 8, gpus_per_engine: 2 });
      groups.push({ num_gpus: 4, gpus_per_engine: 2 });
    }),
  );
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  const [base, reserved] = r.plan.placements;
  if (!base || !reserved) throw new Error('plan lacks groups');
  return { plan: r.plan, base, reserved: reserved.bundle_indices };
}

describe('placeReservedReplicas', () => {
  it('places new replicas on the free reserved bundles in plan order, named after the next indices', () => {
    const { plan, base, reserved } = elasticPlan();
    const r = placeReservedReplicas({
      model: 'policy',
      base,
      group: 0,
      gpusPerEngine: 2,
      reserved,
      used: new Set([reserved[0] as number, reserved[1] as number]),
      firstIndex: 4,
      count: 2,
      pool: plan.pools[base.pool],
    });
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.replicas.map((x) => [x.engine_id, x.nodes.map((n) => [n.node, n.gpu_ids])])).toEqual([
      ['policy/4', [['n0', [6, 7]]]],
      ['policy/5', [['n1', [0, 1]]]],
    ]);
  });

  it('refuses when the reserve is too small, naming what it needs', () => {
    const { plan, base, reserved } = elasticPlan();
    const r = placeReservedReplicas({
      model: 'policy',
      base,
      group: 0,
      gpusPerEngine: 2,
      reserved,
      used: new Set(),
      firstIndex: 4,
      count: 5,
      pool: plan.pools[base.pool],
    });
    expect(r).toEqual({
      ok: false,
      errors: [
        {
          code: 'no_reserved_bundles',
          path: 'replicas',
          message: expect.stringMatching(/needs 10 reserved bundles; 8 are free/),
        },
      ],
    });
  });

  it('refuses an engine that would straddle two nodes (the engine-site rule of the planner)', () => {
    const { plan, base, reserved } = elasticPlan();
    // One bundle used on n0 leaves the free reserve starting at an odd GPU: a 2-GPU engine would span n0 and n1.
    const r = placeReservedReplicas({
      model: 'policy',
      base,
      group: 0,
      gpusPerEngine: 2,
      reserved,
      used: new Set([reserved[0] as number, reserved[1] as number, reserved[2] as number]),
      firstIndex: 4,
      count: 2,
      pool: plan.pools[base.pool],
    });
    expect(r).toEqual({
      ok: false,
      errors: [
        {
          code: 'engine_straddles_nodes',
          path: 'policy.replicas',
          message: expect.stringMatching(/^policy\/4: /),
        },
      ],
    });
  });

  it('names every violation at once: a reserve too small and each replica that breaks the site rule', () => {
    const { plan, base, reserved } = elasticPlan();
    // 5 free bundles (n0:7, n1:0-3) for 3 engines of 2 GPUs: one short, and the first engine would straddle.
    const r = placeReservedReplicas({
      model: 'policy',
      base,
      group: 0,
      gpusPerEngine: 2,
      reserved,
      used: new Set([reserved[0] as number, reserved[1] as number, reserved[2] as number]),
      firstIndex: 4,
      count: 3,
      pool: plan.pools[base.pool],
    });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.errors.map((e) => [e.code, e.message.slice(0, 9)])).toEqual([
      ['no_reserved_bundles', 'scaling p'],
      ['engine_straddles_nodes', 'policy/4:'],
    ]);
  });
});
