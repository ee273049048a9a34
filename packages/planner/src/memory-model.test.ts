import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, parseConfig, RESUME_ORDER, type SwitchPlan, type UisConfig } from '@uis/spec';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { orderCandidates } from './defer-order.ts';
import { planPlacement } from './planner.ts';

const examples = join(import.meta.dirname, '..', '..', '..', 'examples');

/** One GPU shared by rollout (phase-less weights `wr`), GenRM (`wj` weights + `gj` CUDA graphs) and the trainer:
 * every byte is set exactly (no KV share, GPU capacity `cap` bytes). */
function oneGpu(cap: number, wr: number, wj: number, gj: number, extra: { order?: string } = {}): UisConfig {
  const model = (name: string, source: string, weight: number, graph: number) => ({
    name,
    model_path: `/m/${name}`,
    weight_source: source,
    memory: { weight_gb: weight / 1e9, kv_cache_share: 0, cuda_graph_gb: graph / 1e9 },
    engine_groups: [{ num_gpus: 1, gpus_per_engine: 1 }],
  });
  return parseConfig({
    cluster: {
      nodes: [{ name: 'n0', gpus: 1, gpu_type: 'small' }],
      gpu_types: { small: { memory_gb: cap / 1e9 } },
    },
    training: { actor_gpus: 1, offload_train: true },
    roles: {
      rollout: {
        deployment: { mode: 'colocated_split', offload: true },
        models: [model('policy', 'disk', wr, 0)],
      },
      genrm: {
        deployment: { mode: 'colocated_defer', offload: true },
        models: [model('judge', 'static', wj, gj)],
      },
    },
    schedule: {
      activation_groups: [
        {
          name: 'actor',
          phases: [
            { name: 'rollout', residents: ['rollout'] },
            { name: 'genrm_score', residents: ['genrm'] },
            { name: 'train', residents: ['train'] },
          ],
        },
      ],
      ...(extra.order ? { defer: { order: extra.order } } : {}),
    },
  });
}

function switchOf(config: UisConfig, from: string): SwitchPlan {
  const r = planPlacement(config);
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  const s = r.plan.memory?.[0]?.configured.switches.find((x) => x.from === from);
  if (s === undefined) throw new Error(`no switch from ${from}`);
  return s;
}

const bytes = fc.integer({ min: 1, max: 200_000_000_000 });

describe('the residency rule', () => {
  it('a phase fits with its last byte and is refused one byte over, naming the bytes', () => {
    fc.assert(
      fc.property(bytes, bytes, (wj, gj) => {
        const need = wj + gj;
        expect(planPlacement(oneGpu(need, 1, wj, gj)).ok).toBe(true);
        const r = planPlacement(oneGpu(need - 1, 1, wj, gj));
        expect(r.ok).toBe(false);
        if (r.ok) return;
        const v = r.errors.find((e) => e.code === 'memory_exceeded');
        expect(v?.path).toBe('schedule.activation_groups[0].phases[1]');
        expect(v?.message).toContain(`(${need} bytes) of`);
        expect(v?.message).toContain(`(${need - 1} bytes)`);
      }),
      { numRuns: 60 },
    );
  });

  it("a resident's weights stay across a phase exactly while they fit beside it", () => {
    fc.assert(
      fc.property(bytes, bytes, bytes, (wr, wj, gj) => {
        const fits = switchOf(oneGpu(wj + gj + wr, wr, wj, gj), 'rollout');
        expect(fits.moves.find((m) => m.model === 'policy')?.release ?? []).not.toContain('weights');
        const misses = switchOf(oneGpu(wj + gj + wr - 1, wr, wj, gj), 'rollout');
        expect(misses.moves.find((m) => m.model === 'policy')?.release).toContain('weights');
      }),
      { numRuns: 60 },
    );
  });

  it('every switch resumes weights before the KV cache (and CUDA graphs last)', () => {
    fc.assert(
      fc.property(bytes, bytes, bytes, fc.integer({ min: 0, max: 3 }), (wr, wj, gj, slack) => {
        const r = planPlacement(oneGpu(wj + gj + wr * slack, wr, wj, gj));
        if (!r.ok) return;
        for (const s of r.plan.memory?.[0]?.configured.switches ?? [])
          for (const m of s.moves) {
            const order = m.resume.map((t) => RESUME_ORDER.indexOf(t));
            expect(order).toEqual([...order].sort((a, b) => a - b));
          }
      }),
      { numRuns: 60 },
    );
  });
});

describe('switch predictions', () => {
  const demo = planPlacement(loadConfig(readFileSync(join(examples, 'demo.yaml'), 'utf8'), 'demo.yaml'));
  if (!demo.ok) throw new Error(JSON.stringify(demo.errors));
  const group = demo.plan.memory?.[0];
  const sw = (from: string) => group?.configured.switches.find((s) => s.from === from);

  it('the demo keeps every weight beside the trainer: a switch moves only KV caches (and the rollout syncs)', () => {
    expect(sw('genrm_score')?.moves).toEqual([
      { role: 'genrm', model: 'judge', release: ['kv_cache'], resume: [], weight_sync: false },
      { role: 'teacher', model: 'math-teacher', release: [], resume: ['kv_cache'], weight_sync: false },
    ]);
    for (const p of group?.configured.phases ?? [])
      expect(p.resident_weights).toEqual(['policy', 'policy-code', 'judge', 'math-teacher']);
    expect(sw('genrm_score')?.bytes_moved).toBe(0);
    // The colocated trainer shares the rollout's new weights: 16.4 GB over 2 GPUs per engine at 51.5 GB/s.
    expect(sw('train')?.weight_sync_s).toBeCloseTo(8.2 / 51.5, 3);
    expect(sw('train')?.bytes_moved).toBe(8_200_000_000);
  });

  it('costs bytes / bandwidth: releasing everything moves the 32B judge out and the 72B teacher in at 51.5 GB/s', () => {
    const s = group?.release_all.switches.find((x) => x.from === 'genrm_score');
    // per GPU: judge tp4 16.4 GB out (CPU backup), teacher tp8 18.175 GB in
    expect(s?.bytes_moved).toBe(16_400_000_000 + 18_175_000_000);
    expect(s?.release_s).toBeCloseTo(16.4 / 51.5 + 0.03, 3);
    expect(s?.resume_s).toBeCloseTo(18.175 / 51.5 + 0.03, 3);
    expect(s?.predicted_s).toBeCloseTo((s?.release_s ?? 0) + (s?.resume_s ?? 0), 3);
  });

  it('a colocated trainer pushing tensors syncs at the pinned speed, a checkpoint from disk at the pageable one', () => {
    const base = loadConfig(readFileSync(join(examples, 'demo.yaml'), 'utf8'), 'demo.yaml');
    const sourced = (weight_source: string) => {
      const rollout = base.roles.rollout;
      if (rollout === undefined) throw new Error('demo has a rollout');
      const r = planPlacement(
        parseConfig({
          ...base,
          roles: {
            ...base.roles,
            rollout: { ...rollout, models: rollout.models.map((m) => ({ ...m, weight_source })) },
          },
        }),
      );
      if (!r.ok) throw new Error(JSON.stringify(r.errors));
      return r.plan.memory?.[0]?.configured.switches.find((x) => x.from === 'train');
    };
    expect(sourced('tensor')?.weight_sync_s).toBeCloseTo(8.2 / 51.5, 3);
    expect(sourced('disk')?.weight_sync_s).toBeCloseTo(8.2 / 9, 3);
    expect(sourced('tensor')?.bytes_moved).toBe(8_200_000_000);
  });

  it('copies on one GPU share its host link (they add up); engines allocate and free side by side', () => {
    // The trainer takes the GPUs: at teacher_opd -> train the judge (16.4 GB per GPU) and the teacher (18.175 GB)
    // copy their weights to their CPU backups over one link, while every engine frees its KV cache and CUDA graphs
    // at once (the policy's weights, kv_cache and cuda_graph: 3 x 0.015 s is the slowest engine's part).
    const c = loadConfig(readFileSync(join(examples, 'demo.yaml'), 'utf8'), 'demo.yaml');
    const r = planPlacement(parseConfig({ ...c, training: { ...c.training, memory_share: undefined } }));
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const s = r.plan.memory?.[0]?.configured.switches.find((x) => x.from === 'teacher_opd');
    expect(s?.release_s).toBeCloseTo((16.4 + 18.175) / 51.5 + 0.045, 3);
  });

  it('keeps less than releasing everything at every switch (the reference the savings are measured against)', () => {
    expect(group?.configured.bubble_s).toBeLessThan((group?.release_all.bubble_s ?? 0) / 2);
    expect(group?.release_all.switches[0]?.moves.find((m) => m.model === 'policy')?.release).toEqual([
      'weights',
      'kv_cache',
      'cuda_graph',
    ]);
  });

  it('models without a memory section are listed unsized and release every tag', () => {
    const r = planPlacement(loadConfig(readFileSync(join(examples, 'defer.yaml'), 'utf8')));
    if (!r.ok) throw new Error('defer.yaml');
    const g = r.plan.memory?.[0];
    expect(g?.unsized).toEqual(['policy', 'judge', 'teacher']);
    expect(g?.configured.switches[0]?.moves[0]).toMatchObject({ model: 'policy', release: RESUME_ORDER });
  });

  it('an unknown GPU type is a violation at its node', () => {
    const c = oneGpu(1e11, 1e9, 1e9, 1e9);
    const r = planPlacement({
      ...c,
      cluster: { ...c.cluster, nodes: [{ name: 'n0', gpus: 1, gpu_type: 'b300' }] },
    });
    expect(r.ok ? [] : r.errors.map((e) => [e.code, e.path])).toEqual([
      ['unknown_gpu_type', 'cluster.nodes[0].gpu_type'],
    ]);
  });
});

describe('defer order', () => {
  /** GenRM and the teacher on disjoint halves of 8 GPUs: merged, their onloads overlap. */
  const halves = (order: string) =>
    parseConfig({
      cluster: { nodes: [{ name: 'n0', gpus: 8 }] },
      training: { actor_gpus: 8, offload_train: true },
      roles: Object.fromEntries(
        (
          [
            ['rollout', 'colocated_split', 'disk', 8, 0],
            ['genrm', 'colocated_defer', 'static', 4, 0],
            ['teacher', 'colocated_defer', 'static', 4, 4],
          ] as const
        ).map(([role, mode, source, gpus, offset]) => [
          role,
          {
            deployment: { mode, offload: true },
            bundle_offset: offset,
            models: [
              {
                name: role,
                model_path: `/m/${role}`,
                weight_source: source,
                memory: { parameters: 32e9, kv_cache_share: 0.3 },
                engine_groups: [{ num_gpus: gpus, gpus_per_engine: gpus }],
              },
            ],
          },
        ]),
      ),
      schedule: {
        activation_groups: [
          {
            name: 'actor',
            phases: [
              { name: 'rollout', residents: ['rollout'] },
              { name: 'genrm_score', residents: ['genrm'] },
              { name: 'teacher_score', residents: ['teacher'] },
              { name: 'train', residents: ['train'] },
            ],
          },
        ],
        defer: { order },
      },
    });

  it('lists the configured order first, then permutations and merges of the scorer phases only', () => {
    const phases = ['rollout', 'genrm_score', 'teacher_score', 'train'].map((name) => ({
      name,
      residents: [name],
    }));
    phases[1] = { name: 'genrm_score', residents: ['genrm'] };
    phases[2] = { name: 'teacher_score', residents: ['teacher'] };
    expect(orderCandidates(phases).map((c) => c.map((p) => p.name).join(' '))).toEqual([
      'rollout genrm_score teacher_score train',
      'rollout genrm_score+teacher_score train',
      'rollout teacher_score genrm_score train',
      'rollout teacher_score+genrm_score train',
    ]);
  });

  it('optimized merges scorer phases whose residents fit together and rewrites the plan; configured does not', () => {
    const opt = planPlacement(halves('optimized'));
    const conf = planPlacement(halves('configured'));
    if (!opt.ok || !conf.ok) throw new Error('invalid');
    const g = opt.plan.memory?.[0];
    expect(g?.optimized.bubble_s).toBeLessThan(g?.configured.bubble_s ?? 0);
    expect(opt.plan.activation_groups[0]?.phases.map((p) => p.name)).toEqual([
      'rollout',
      'genrm_score+teacher_score',
      'train',
    ]);
    expect(opt.plan.placements.filter((p) => p.role !== 'rollout').map((p) => p.phase)).toEqual([
      'genrm_score+teacher_score',
      'genrm_score+teacher_score',
    ]);
    expect(conf.plan.activation_groups[0]?.phases.map((p) => p.name)).toEqual([
      'rollout',
      'genrm_score',
      'teacher_score',
      'train',
    ]);
    expect(conf.plan.memory?.[0]?.optimized).toEqual(g?.optimized);
  });
});
