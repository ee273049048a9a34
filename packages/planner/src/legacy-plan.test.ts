import type { PlacementPlan } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { planPlacement, planTotalGpus } from './planner.ts';
import { fromRelaxArgs } from './relax/index.ts';

const argv = (line: string) => [...line.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? '');
const plan = (line: string, files?: Record<string, string>): PlacementPlan => {
  const r = planPlacement(fromRelaxArgs(argv(line), { files }));
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.plan;
};
const slices = (p: PlacementPlan) =>
  p.placements.map(
    (g) => `${g.role}/${g.model}@${g.pool}[${g.bundle_start},${g.bundle_stop}) ${g.phase ?? '-'}`,
  );

/** The bundle offsets Relax computes today (reference/relax.md) must come out of the planner unchanged. */
describe('Relax command lines through the planner', () => {
  it('colocate split: GenRM engine i at rollout_num_gpus + i * gpus_per_engine', () => {
    const p = plan(
      `--resource '{"actor": [1, 8], "rollout": [1, 4], "genrm": [1, 4]}' --colocate --rollout-num-gpus-per-engine 2 --genrm-model-path /rm --genrm-num-gpus 4 --genrm-num-gpus-per-engine 2`,
    );
    expect(p.mode).toBe('colocated_split');
    expect(slices(p)).toEqual(['rollout/default@actor[0,4) -', 'genrm/genrm@actor[4,8) -']);
    expect(p.placements[1]?.replicas.map((r) => r.nodes[0]?.base_gpu_id)).toEqual([4, 6]);
    expect(p.placements[1]?.ray_num_gpus).toBe(0.2);
  });

  it('decoupled: one manager-owned PG per role', () => {
    const p = plan(
      `--resource '{"actor": [1, 8], "rollout": [1, 8], "genrm": [1, 8]}' --genrm-model-path /rm --genrm-num-gpus-per-engine 8 --rollout-num-gpus-per-engine 4`,
    );
    expect(
      Object.fromEntries(Object.entries(p.pools).map(([k, v]) => [k, [v.size, v.owner, v.bundles[0]?.node]])),
    ).toEqual({
      actor: [8, 'controller', 'node-0'],
      rollout: [8, 'manager', 'node-1'],
      genrm: [8, 'manager', 'node-2'],
    });
  });

  it('defer of GenRM and Teacher: same bundles, later phases, reservations 0.4 + 0.2 + 0.1 + 0.2', () => {
    const p = plan(
      `--resource '{"actor": [1, 8], "rollout": [1, 8], "genrm": [1, 8], "teacher": [1, 8]}' --colocate --genrm-model-path /rm
       --genrm-num-gpus-per-engine 4 --use-opd --teacher-hf-checkpoint /t --inference-defer-roles genrm,teacher`,
    );
    expect(p.mode).toBe('colocated_defer');
    expect(slices(p)).toEqual([
      'rollout/default@actor[0,8) rollout',
      'genrm/genrm@actor[0,8) genrm_score',
      'teacher/default@actor[0,8) teacher_score',
    ]);
    expect(p.placements.map((g) => g.ray_num_gpus)).toEqual([0.2, 0.1, 0.2]);
  });

  it('a PPO critic sharing the actor PG with a deferred teacher oversubscribes Ray reservations (Relax rejects it too)', () => {
    const r = planPlacement(
      fromRelaxArgs(
        argv(
          `--resource '{"actor": [1, 8], "critic": [1, 8], "rollout": [1, 8], "teacher": [1, 8]}' --colocate --advantage-estimator ppo --use-opd --teacher-hf-checkpoint /t --teacher-num-gpus-per-engine 8 --inference-defer-roles teacher`,
        ),
      ),
    );
    expect(r.ok ? [] : r.errors.map((e) => e.code)).toEqual(['ray_gpu_oversubscribed']);
  });

  it('multi-teacher routes: teacher k at rollout + k * gpus_per_teacher', () => {
    const p = plan(
      `--resource '{"actor": [1, 8], "rollout": [1, 4], "teacher": [1, 4]}' --colocate --use-opd --opd-teacher-routes '{"math": "/t/m", "code": "/t/c"}'`,
    );
    expect(slices(p)).toEqual([
      'rollout/default@actor[0,4) -',
      'teacher/math@actor[4,6) -',
      'teacher/code@actor[6,8) -',
    ]);
  });

  it('PD groups from --sglang-config accumulate their gpu_offset; a PD/regular mix is a violation', () => {
    const yaml =
      'sglang:\n  - name: pd\n    num_gpus_per_engine: 2\n    engine_groups:\n      - { worker_type: prefill, num_gpus: 2 }\n      - { worker_type: decode, num_gpus: 4 }\n      - { worker_type: placeholder, num_gpus: 2 }\n';
    const p = plan(`--resource '{"actor": [1, 8], "rollout": [1, 8]}' --sglang-config c.yaml`, {
      'c.yaml': yaml,
    });
    expect(p.placements.map((g) => [g.worker_type, g.bundle_start, g.replicas.length])).toEqual([
      ['prefill', 0, 1],
      ['decode', 2, 2],
      ['placeholder', 6, 0],
    ]);
    const mixed = planPlacement(
      fromRelaxArgs(argv(`--resource '{"actor": [1, 8], "rollout": [1, 8]}' --sglang-config c.yaml`), {
        files: { 'c.yaml': yaml.replace('placeholder', 'regular') },
      }),
    );
    expect(mixed.ok ? [] : mixed.errors.map((e) => e.code)).toEqual(['mixed_regular_pd']);
  });

  it('multi-node engines with --num-gpus-per-node 4 take whole nodes', () => {
    const p = plan(
      `--resource '{"actor": [1, 16], "rollout": [1, 16]}' --colocate --num-gpus-per-node 4 --rollout-num-gpus-per-engine 8 --sglang-pp-size 2`,
    );
    const g = p.placements[0];
    expect(g?.nodes_per_engine).toBe(2);
    expect(
      g?.replicas.map((r) => r.nodes.map((n) => `${n.node}#${n.node_rank}:${n.gpu_ids.join('')}`)),
    ).toEqual([
      ['node-0#0:0123', 'node-1#1:0123'],
      ['node-2#0:0123', 'node-3#1:0123'],
    ]);
    const bad = planPlacement(
      fromRelaxArgs(
        argv(
          `--resource '{"actor": [1, 12], "rollout": [1, 12]}' --colocate --num-gpus-per-node 4 --rollout-num-gpus-per-engine 6`,
        ),
      ),
    );
    expect(bad.ok ? [] : bad.errors.map((e) => e.code)).toEqual(['multinode_partial_node']);
  });

  it.each([
    ['--no-offload-train', 'offload_required @ training.offload_train'],
    ['--no-offload-rollout', 'offload_required @ roles.rollout.deployment.offload'],
    ['--no-offload-t', 'offload_required @ training.offload_train'],
  ])(
    'an explicit %s on shared GPUs is judged by the placement rule (Relax keeps it off under colocate)',
    (flag, violation) => {
      const r = planPlacement(
        fromRelaxArgs(argv(`--resource '{"actor": [1, 8], "rollout": [1, 8]}' --colocate ${flag}`)),
      );
      expect(r.ok ? [] : r.errors.map((e) => `${e.code} @ ${e.path}`)).toEqual([violation]);
    },
  );

  it('a non-colocated layout that spells out --no-offload-train / --no-offload-rollout plans', () => {
    const p = plan(
      `--resource '{"actor": [1, 8], "rollout": [1, 8]}' --no-offload-train --no-offload-rollout --rollout-num-gpus-per-engine 4`,
    );
    expect(p.mode).toBe('decoupled');
    expect(p.placements[0]?.replicas).toHaveLength(2);
  });

  it('--offload turns both sides on even after --no-offload-train (Relax expands it last)', () => {
    const c = fromRelaxArgs(
      argv(`--resource '{"actor": [1, 8], "rollout": [1, 8]}' --colocate --no-offload-train --offload`),
    );
    expect(planPlacement(c).ok).toBe(true);
  });

  it('an external rollout is routed, not placed, and keeps its --resource GPUs as a dedicated pool (as Relax plans it)', () => {
    const p = plan(
      `--resource '{"actor": [1, 8], "rollout": [1, 8]}' --rollout-external --rollout-external-engine-addrs h:1`,
    );
    expect(p.placements).toEqual([]);
    expect(Object.values(p.pools).map((pool) => [pool.name, pool.size, pool.owner])).toEqual([
      ['actor', 8, 'controller'],
      ['rollout', 8, 'controller'],
    ]);
    expect(planTotalGpus(p)).toBe(16);
  });
});
