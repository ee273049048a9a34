import type { PlacementPlan } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { planPlacement, planTotalGpus } from '../planner.ts';
import { fromRelaxArgs } from './index.ts';

/** Pools and the GPU total for the scenarios of Relax's service-plan tests (tests/core/test_service_plan.py and
 * the doctor's topology tests): which training roles Relax places, which share the actor/rollout PG, and
 * total_required_gpus = the shared PG + every dedicated one. */
const argv = (line: string) => [...line.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? '');
const plan = (line: string): PlacementPlan => {
  const r = planPlacement(fromRelaxArgs(argv(line)));
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.plan;
};
const pools = (p: PlacementPlan) => Object.fromEntries(Object.values(p.pools).map((x) => [x.name, x.size]));

describe('training pools and totals as Relax plans them', () => {
  it.each<[string, string, Record<string, number>, number]>([
    [
      'sync colocate shares one PG',
      `--resource '{"actor": [1, 8], "rollout": [1, 8]}' --colocate`,
      { actor: 8 },
      8,
    ],
    [
      'hybrid gives actor and rollout their own PGs',
      `--resource '{"actor": [1, 8], "rollout": [1, 8]}' --colocate --fully-async --hybrid`,
      { actor: 8, rollout: 8 },
      16,
    ],
    [
      'fully-async places actor_fwd, a CPU-only advantages role takes nothing',
      `--resource '{"actor": [1, 4], "rollout": [1, 4], "advantages": [1, 0], "actor_fwd": [1, 2]}' --fully-async`,
      { actor: 4, reference: 0, actor_fwd: 2, rollout: 4 },
      10,
    ],
    [
      'fully-async keeps an explicit optional reference',
      `--resource '{"actor": [1, 4], "rollout": [1, 4], "advantages": [1, 0], "actor_fwd": [1, 2], "reference": [1, 2]}' --fully-async`,
      { actor: 4, reference: 2, actor_fwd: 2, rollout: 4 },
      12,
    ],
    [
      'true on-policy fully-async has no actor_fwd role',
      `--resource '{"actor": [1, 4], "rollout": [1, 4], "actor_fwd": [1, 2], "reference": [1, 1]}' --fully-async --true-on-policy-mode`,
      { actor: 4, reference: 1, rollout: 4 },
      9,
    ],
    [
      'sync colocate: reference and actor_fwd are not roles (the actor computes them)',
      `--resource '{"actor": [1, 8], "rollout": [1, 8], "reference": [1, 8], "actor_fwd": [1, 8]}' --colocate`,
      { actor: 8 },
      8,
    ],
    [
      'hybrid folds reference and actor_fwd into the actor',
      `--resource '{"actor": [1, 4], "rollout": [1, 4], "reference": [1, 1], "actor_fwd": [1, 1]}' --fully-async --hybrid`,
      { actor: 4, rollout: 4 },
      8,
    ],
    [
      'a PPO critic the size of the actor shares the colocated PG',
      `--resource '{"actor": [1, 8], "critic": [1, 8], "rollout": [1, 8]}' --colocate --advantage-estimator ppo`,
      { actor: 8 },
      8,
    ],
    [
      'a PPO critic of another size gets its own PG',
      `--resource '{"actor": [1, 8], "critic": [1, 4], "rollout": [1, 8]}' --colocate --advantage-estimator ppo`,
      { actor: 8, critic: 4 },
      12,
    ],
    [
      'a PPO critic under fully-async is dedicated even at the actor size',
      `--resource '{"actor": [1, 4], "critic": [1, 4], "rollout": [1, 4], "actor_fwd": [1, 1]}' --fully-async --advantage-estimator ppo`,
      { actor: 4, critic: 4, actor_fwd: 1, rollout: 4 },
      13,
    ],
    [
      'PPO keeps the async roles under --hybrid',
      `--resource '{"actor": [1, 4], "critic": [1, 4], "rollout": [1, 4], "actor_fwd": [1, 1]}' --colocate --fully-async --hybrid --advantage-estimator ppo`,
      { actor: 4, critic: 4, actor_fwd: 1, rollout: 4 },
      13,
    ],
    [
      'GRPO runs no critic: a critic entry takes no GPUs',
      `--resource '{"actor": [1, 8], "critic": [1, 8], "rollout": [1, 8]}' --colocate`,
      { actor: 8 },
      8,
    ],
    [
      'a colocated managed teacher shares the actor PG',
      `--resource '{"actor": [1, 8], "rollout": [1, 4], "teacher": [1, 4]}' --colocate --use-opd --teacher-hf-checkpoint /t`,
      { actor: 8 },
      8,
    ],
    [
      'a decoupled managed teacher is dedicated',
      `--resource '{"actor": [1, 4], "rollout": [1, 4], "teacher": [1, 2]}' --use-opd --teacher-hf-checkpoint /t`,
      { actor: 4, rollout: 4, teacher: 2 },
      10,
    ],
    [
      'debug rollout only places the rollout alone',
      `--resource '{"actor": [1, 8], "rollout": [1, 4]}' --debug-rollout-only`,
      { rollout: 4 },
      4,
    ],
    [
      'debug train only places the actor alone, not a managed teacher',
      `--resource '{"actor": [1, 8], "teacher": [1, 8]}' --debug-train-only --use-opd --teacher-hf-checkpoint /t`,
      { actor: 8 },
      8,
    ],
    [
      'sft places the actor (the sft role is CPU-only)',
      `--resource '{"sft": [1, 0], "actor": [1, 8]}' --loss-type sft`,
      { actor: 8 },
      8,
    ],
  ])('%s', (_name, line, expected, total) => {
    const p = plan(line);
    // Pools of 0 GPUs are not created; the table lists them for readability.
    expect(pools(p)).toEqual(Object.fromEntries(Object.entries(expected).filter(([, n]) => n > 0)));
    expect(planTotalGpus(p)).toBe(total);
  });

  it('the synthesized inventory starts each pool on a node of its own, as Ray packs each PG', () => {
    const p = plan(
      `--resource '{"actor": [1, 4], "critic": [1, 4], "rollout": [1, 4], "actor_fwd": [1, 1]}' --fully-async --advantage-estimator ppo`,
    );
    expect(
      Object.values(p.pools).map((x) => [
        x.name,
        x.owner,
        [...new Set(x.bundles.map((b) => b.node))],
        x.bundles[0]?.gpu_id,
      ]),
    ).toEqual([
      ['actor', 'controller', ['node-0'], 0],
      ['critic', 'controller', ['node-1'], 0],
      ['actor_fwd', 'controller', ['node-2'], 0],
      ['rollout', 'manager', ['node-3'], 0],
    ]);
  });

  it('an abbreviated --rollout-num-gpus-per-eng plans 2 x tp4, as Relax does', () => {
    const p = plan(
      `--resource '{"actor": [1, 8], "rollout": [1, 8]}' --colocate --rollout-num-gpus-per-eng 4`,
    );
    expect(p.placements[0]?.replicas.map((r) => r.nodes[0]?.gpu_ids)).toEqual([
      [0, 1, 2, 3],
      [4, 5, 6, 7],
    ]);
    expect(p.placements[0]?.tp).toBe(4);
  });

  it('an algorithm Relax does not register is an error at --advantage-estimator', () => {
    expect(() => fromRelaxArgs(argv(`--resource '{"actor": [1, 8]}' --advantage-estimator dpo`))).toThrow(
      /--advantage-estimator: algorithm "dpo" is not one Relax registers/,
    );
  });
});
