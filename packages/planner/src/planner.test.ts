import { describe, expect, it } from 'vitest';
import { PlacementPlanner, planPlacement } from './planner.ts';
import { config, role, schedule } from './testing.ts';

type Doc = Parameters<NonNullable<Parameters<typeof config>[0]>>[0];
const rollout = (doc: Doc) =>
  doc.roles.rollout as {
    models: Array<{ engine_groups: Array<Record<string, unknown>> }>;
    deployment: Record<string, unknown>;
  };
const group0 = (doc: Doc) => rollout(doc).models[0]?.engine_groups[0] as Record<string, unknown>;

/** Bundles 0-15 bound to two 8-GPU nodes (0-7 on n0, 8-15 on n1), each on the GPU `gpu(bundle)`. */
const twoNodeBindings = (gpu: (bundle: number) => number) =>
  Array.from({ length: 16 }, (_, i) => ({ bundle_index: i, node: i < 8 ? 'n0' : 'n1', gpu_id: gpu(i) }));

const codes = (mutate: (doc: Doc) => void) => {
  const r = planPlacement(config(mutate));
  return r.ok ? [] : r.errors.map((e) => `${e.code} @ ${e.path}`);
};

describe('PlacementPlanner: a valid layout', () => {
  it('places a colocated split with replicas, per-node SGLang args and ownership', () => {
    const r = new PlacementPlanner().plan(
      config((d) => {
        d.roles.genrm = role('colocated_split', 8, 4);
      }),
    );
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.plan.mode).toBe('colocated_split');
    expect(r.plan.pools.actor?.size).toBe(16);
    const [ro, gr] = r.plan.placements;
    expect(ro).toMatchObject({
      role: 'rollout',
      bundle_start: 0,
      bundle_stop: 8,
      owner: 'controller',
      deleted_by: 'controller',
      offload: true,
      ray_num_gpus: 0.2,
    });
    expect(ro?.replicas.map((x) => x.engine_id)).toEqual(['policy/0', 'policy/1', 'policy/2', 'policy/3']);
    expect(ro?.replicas[1]?.nodes).toEqual([
      { node: 'n0', node_rank: 0, bundle_indices: [2, 3], gpu_ids: [2, 3], base_gpu_id: 2, gpu_id_step: 1 },
    ]);
    expect(gr).toMatchObject({
      role: 'genrm',
      bundle_start: 8,
      bundle_stop: 16,
      gpu_ids: [8, 9, 10, 11, 12, 13, 14, 15],
      ray_num_gpus: 0.2,
    });
    expect(gr?.replicas[0]?.nodes[0]).toMatchObject({ node: 'n1', base_gpu_id: 0, gpu_ids: [0, 1, 2, 3] });
  });

  it('plans a multi-node engine as ONE replica whose head is node-rank 0', () => {
    const r = planPlacement(
      config((d) => {
        d.cluster.nodes = [0, 1, 2, 3].map((i) => ({ name: `n${i}`, gpus: 4 }));
        Object.assign(group0(d), { num_gpus: 16, gpus_per_engine: 8, tp: 4, pp: 2 });
      }),
    );
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const p = r.plan.placements[0];
    expect(p?.nodes_per_engine).toBe(2);
    expect(p?.replicas).toHaveLength(2);
    expect(p?.replicas[1]).toMatchObject({ engine_id: 'policy/1', nnodes: 2 });
    expect(p?.replicas[1]?.nodes.map((n) => [n.node, n.node_rank, n.base_gpu_id])).toEqual([
      ['n2', 0, 0],
      ['n3', 1, 0],
    ]);
  });

  it('gives decoupled roles their own manager-owned pool, external owners delete their own PG', () => {
    const r = planPlacement(
      config((d) => {
        d.cluster.nodes = [0, 1, 2].map((i) => ({ name: `n${i}`, gpus: 8 }));
        d.training = { actor_gpus: 8 };
        rollout(d).deployment = { mode: 'decoupled' };
        d.roles.teacher = role('decoupled', 8, 8);
        (d.roles.teacher as { deployment: Record<string, unknown> }).deployment = {
          mode: 'decoupled',
          pg_owner: 'external',
        };
      }),
    );
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.plan.mode).toBe('decoupled');
    expect(Object.keys(r.plan.pools)).toEqual(['actor', 'rollout', 'teacher']);
    expect(r.plan.pools.rollout).toMatchObject({ owner: 'manager', deleted_by: 'manager', size: 8 });
    expect(r.plan.pools.teacher).toMatchObject({ owner: 'external', deleted_by: 'external' });
    expect(r.plan.pools.teacher?.bundles[0]).toMatchObject({ node: 'n2', global_gpu: 16 });
  });

  it('places deferred roles on the same bundles in later phases; genrm beside rollout reserves 0.1', () => {
    const r = planPlacement(
      config((d) => {
        d.roles.genrm = role('colocated_defer', 16, 8);
        d.roles.teacher = role('colocated_defer', 16, 8, {}, 't');
        d.schedule = schedule(
          ['rollout', ['rollout']],
          ['score', ['genrm']],
          ['opd', ['teacher']],
          ['train', ['train']],
        );
      }),
    );
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.plan.mode).toBe('colocated_defer');
    const g = r.plan.placements.find((p) => p.role === 'genrm');
    expect(g).toMatchObject({
      bundle_start: 0,
      phase: 'score',
      activation_group: 'actor',
      deferred: true,
      ray_num_gpus: 0.1,
    });
    expect(r.plan.activation_groups[0]?.phases.map((p) => p.name)).toEqual([
      'rollout',
      'score',
      'opd',
      'train',
    ]);
  });

  it('reserves bundles for placeholder groups and starts nothing there', () => {
    const r = planPlacement(
      config((d) => {
        rollout(d).models[0]?.engine_groups.push({
          worker_type: 'placeholder',
          num_gpus: 4,
          gpus_per_engine: 2,
        });
        rollout(d).models[0]?.engine_groups.push({ num_gpus: 4, gpus_per_engine: 2 });
      }),
    );
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const [, ph, last] = r.plan.placements;
    expect(ph).toMatchObject({ worker_type: 'placeholder', bundle_start: 8, bundle_stop: 12, replicas: [] });
    expect(last?.bundle_start).toBe(12);
    expect(last?.replicas.map((x) => x.engine_id)).toEqual(['policy/4', 'policy/5']);
  });

  it('honours physical bindings for the GPU ids and nodes it reports', () => {
    const r = planPlacement(
      config((d) => {
        d.training = { actor_gpus: 8, offload_train: true };
        d.cluster.bindings = Array.from({ length: 8 }, (_, i) => ({
          bundle_index: i,
          node: i < 4 ? 'n1' : 'n0',
          gpu_id: i % 4,
        }));
      }),
    );
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.plan.placements[0]?.replicas[0]?.nodes[0]).toMatchObject({ node: 'n1', gpu_ids: [0, 1] });
    expect(r.plan.placements[0]?.gpu_ids.slice(0, 2)).toEqual([8, 9]);
  });
});

describe('PlacementPlanner: every rule has a violation with a stable code and path', () => {
  const g = 'roles.rollout.models[0].engine_groups[0]';
  it.each<[string, (d: Doc) => void, string[]]>([
    [
      'capacity of the cluster',
      (d) => {
        d.training.actor_gpus = 24;
      },
      ['capacity_exceeded @ cluster.nodes'],
    ],
    [
      'capacity of the pool',
      (d) => {
        group0(d).num_gpus = 20;
      },
      [`pool_capacity_exceeded @ ${g}.num_gpus`],
    ],
    [
      'num_gpus divisible by gpus_per_engine',
      (d) => {
        group0(d).num_gpus = 7;
      },
      [`gpus_not_divisible @ ${g}.num_gpus`],
    ],
    ['tp * pp == gpus_per_engine', (d) => Object.assign(group0(d), { tp: 4 }), [`tp_pp_mismatch @ ${g}.tp`]],
    [
      'DP attention needs tp % dp == 0',
      (d) => Object.assign(group0(d), { dp: 3, enable_dp_attention: true }),
      [`dp_attention_indivisible @ ${g}.dp`],
    ],
    [
      'engine larger than a node takes whole nodes',
      (d) => Object.assign(group0(d), { num_gpus: 12, gpus_per_engine: 12 }),
      [`multinode_partial_node @ ${g}.gpus_per_engine`],
    ],
    [
      'an engine never straddles nodes',
      (d) => {
        d.roles.genrm = role('colocated_split', 4, 4);
        (d.roles.genrm as { bundle_offset: number }).bundle_offset = 10;
        Object.assign(group0(d), { num_gpus: 4, gpus_per_engine: 4 });
        d.roles.teacher = { ...role('colocated_split', 4, 4, {}, 't'), bundle_offset: 6 };
      },
      ['engine_straddles_nodes @ roles.teacher.models[0].engine_groups[0]'],
    ],
    [
      'a multi-node engine starts on a node boundary',
      (d) => {
        Object.assign(group0(d), { num_gpus: 4, gpus_per_engine: 4 });
        d.cluster.nodes = [0, 1, 2].map((i) => ({ name: `n${i}`, gpus: 8 }));
        d.training.actor_gpus = 24;
        d.roles.teacher = role('colocated_split', 16, 16, { tp: 16 }, 't');
      },
      ['multinode_not_whole_nodes @ roles.teacher.models[0].engine_groups[0]'],
    ],
    [
      'split slices never overlap',
      (d) => {
        d.roles.genrm = { ...role('colocated_split', 8, 4), bundle_offset: 4 };
      },
      ['split_overlap @ roles.genrm.models[0].engine_groups[0]'],
    ],
    [
      'shared co-resident is rejected',
      (d) => {
        rollout(d).deployment = { mode: 'shared_coresident', offload: true };
      },
      ['shared_coresident_rejected @ roles.rollout.deployment.mode'],
    ],
    [
      'only genrm and teacher can be deferred',
      (d) => {
        rollout(d).deployment = { mode: 'colocated_defer', offload: true };
        d.schedule = schedule(['rollout', ['rollout']], ['train', ['train']]);
      },
      ['defer_role_not_allowed @ roles.rollout.deployment.mode'],
    ],
    [
      'defer only with synchronous training',
      (d) => {
        d.training.fully_async = true;
        d.training.hybrid = true;
        d.roles.genrm = role('colocated_defer', 8, 8);
        d.schedule = schedule(['rollout', ['rollout']], ['score', ['genrm']]);
      },
      ['defer_requires_sync @ roles.genrm.deployment.mode'],
    ],
    [
      'fully-async colocate needs hybrid',
      (d) => {
        d.training.fully_async = true;
      },
      ['fully_async_colocate @ roles.rollout.deployment.mode'],
    ],
    [
      'a deferred role needs a phase',
      (d) => {
        d.roles.genrm = role('colocated_defer', 8, 8);
      },
      ['defer_not_scheduled @ roles.genrm.deployment'],
    ],
    [
      "each phase's residents are disjoint",
      (d) => {
        d.roles.genrm = role('colocated_defer', 8, 8);
        d.schedule = schedule(['rollout', ['rollout']], ['score', ['genrm']], ['again', ['genrm']]);
      },
      ['phase_residents_not_disjoint @ schedule.activation_groups[0].phases[2].residents[0]'],
    ],
    [
      'residents of one phase never share a GPU',
      (d) => {
        d.roles.genrm = role('colocated_defer', 8, 8);
        d.roles.teacher = role('colocated_defer', 8, 8, {}, 't');
        d.schedule = schedule(['rollout', ['rollout']], ['score', ['genrm', 'teacher']]);
      },
      ['split_overlap @ roles.teacher.models[0].engine_groups[0]'],
    ],
    [
      'deferred scoring comes after rollout and before training',
      (d) => {
        d.roles.genrm = role('colocated_defer', 8, 8);
        d.schedule = schedule(['score', ['genrm']], ['rollout', ['rollout']]);
      },
      ['defer_phase_order @ schedule.activation_groups[0].phases[0].residents[0]'],
    ],
    [
      'shared GPUs need inference offload',
      (d) => {
        rollout(d).deployment = { mode: 'colocated_split', offload: false };
      },
      ['offload_required @ roles.rollout.deployment.offload'],
    ],
    [
      'shared GPUs need training offload',
      (d) => {
        d.training.offload_train = false;
      },
      ['offload_required @ training.offload_train'],
    ],
    [
      'Ray reservations per bundle <= 1',
      (d) => {
        d.training.critic_gpus = 16;
        d.roles.teacher = role('colocated_defer', 16, 8);
        d.schedule = schedule(['rollout', ['rollout']], ['opd', ['teacher']]);
      },
      ['ray_gpu_oversubscribed @ roles.teacher.models[0].engine_groups[0].ray_num_gpus'],
    ],
    [
      'prefill needs decode',
      (d) => {
        group0(d).worker_type = 'prefill';
      },
      ['prefill_without_decode @ roles.rollout.models[0].engine_groups'],
    ],
    [
      'no mixing regular with PD',
      (d) => {
        rollout(d).models[0]?.engine_groups.push(
          { worker_type: 'prefill', num_gpus: 2, gpus_per_engine: 2 },
          { worker_type: 'decode', num_gpus: 2, gpus_per_engine: 2 },
        );
      },
      ['mixed_regular_pd @ roles.rollout.models[0].engine_groups'],
    ],
    [
      'bindings: no two bundles on one GPU',
      (d) => {
        d.cluster.bindings = twoNodeBindings((i) => (i === 9 ? 0 : i % 8));
      },
      ['gpu_bound_twice @ cluster.bindings[9]'],
    ],
    [
      'bindings: engine GPUs ascending and contiguous',
      (d) => {
        d.cluster.bindings = twoNodeBindings((i) => (i < 8 ? 7 - i : i - 8));
      },
      [`gpus_not_contiguous @ ${g}`],
    ],
    [
      'bindings: an engine on one node',
      (d) => {
        d.cluster.bindings = Array.from({ length: 16 }, (_, i) => ({
          bundle_index: i,
          node: i % 2 ? 'n1' : 'n0',
          gpu_id: i >> 1,
        }));
      },
      [`engine_straddles_nodes @ ${g}`],
    ],
    [
      'bindings: unknown node',
      (d) => {
        d.cluster.bindings = [{ bundle_index: 0, node: 'nx', gpu_id: 0 }];
      },
      ['unknown_node @ cluster.bindings[0].node'],
    ],
  ])('%s', (_name, mutate, expected) => {
    expect(codes(mutate)).toEqual(expected);
  });

  it('reports every violation at once', () => {
    const errs = codes((d) => {
      Object.assign(group0(d), { tp: 4, num_gpus: 7 });
      d.training.offload_train = false;
      d.roles.genrm = role('shared_coresident', 8, 8);
    });
    expect(errs).toEqual(
      expect.arrayContaining([
        `tp_pp_mismatch @ ${'roles.rollout.models[0].engine_groups[0]'}.tp`,
        'gpus_not_divisible @ roles.rollout.models[0].engine_groups[0].num_gpus',
        'offload_required @ training.offload_train',
        'shared_coresident_rejected @ roles.genrm.deployment.mode',
      ]),
    );
  });

  it('refuses server_args the placement or the launcher sets, before anything starts', () => {
    const g = 'roles.rollout.models[0].engine_groups[0].server_args';
    const errs = codes((d) => {
      group0(d).server_args = {
        disaggregation_bootstrap_port: 8998,
        'tp-size': 2,
        'Mem Fraction': 0.8,
        mem_fraction_static: 0.8,
      };
    });
    expect(errs).toEqual([
      `server_arg_conflicts_with_placement @ ${g}.disaggregation_bootstrap_port`,
      `server_arg_conflicts_with_placement @ ${g}.tp-size`,
      `invalid_server_arg @ ${g}.Mem Fraction`,
    ]);
  });

  it('accepts the reservation sum of 0.4 + 0.2 + 0.1 + 0.2 on a bundle, and an override can push it over', () => {
    const three = (genrmRay?: number) =>
      planPlacement(
        config((d) => {
          d.roles.genrm = role(
            'colocated_defer',
            16,
            8,
            genrmRay === undefined ? {} : { ray_num_gpus: genrmRay },
          );
          d.roles.teacher = role('colocated_defer', 16, 8, {}, 't');
          d.schedule = schedule(
            ['rollout', ['rollout']],
            ['score', ['genrm']],
            ['opd', ['teacher']],
            ['train', ['train']],
          );
        }),
      );
    expect(three().ok).toBe(true);
    const over = three(0.5);
    expect(over.ok ? [] : over.errors.map((e) => e.code)).toEqual(['ray_gpu_oversubscribed']);
  });
});
