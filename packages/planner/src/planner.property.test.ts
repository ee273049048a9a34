import { type PlacementPlan, parseConfig, type UisConfig } from '@uis/spec';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planPlacement } from './planner.ts';

/** Random layouts: a few nodes, up to three roles in random modes and offsets, random engine sizes, a defer
 * schedule for deferred roles, sometimes shuffled physical bindings. Most are invalid; the properties speak about
 * the valid ones, and a separate check makes sure valid ones are generated at all. */
const arbConfig: fc.Arbitrary<UisConfig> = fc
  .record({
    nodeGpus: fc.constantFrom(2, 4, 8),
    nodes: fc.integer({ min: 1, max: 6 }),
    roles: fc.array(
      fc.record({
        mode: fc.constantFrom('colocated_split', 'colocated_defer', 'decoupled'),
        offset: fc.oneof(
          { weight: 4, arbitrary: fc.constant(undefined) },
          { weight: 1, arbitrary: fc.integer({ min: 0, max: 8 }) },
        ),
        groups: fc.array(
          fc.record({ engines: fc.integer({ min: 1, max: 3 }), gpe: fc.constantFrom(1, 2, 4, 8, 16) }),
          { minLength: 1, maxLength: 2 },
        ),
      }),
      { minLength: 3, maxLength: 3 },
    ),
    use: fc.tuple(fc.boolean(), fc.boolean()),
    actorShare: fc.constantFrom(0.5, 1),
    shuffle: fc.option(fc.integer({ min: 1, max: 1000 }), { nil: undefined }),
  })
  .map((a) => {
    const total = a.nodes * a.nodeGpus;
    const actor = Math.max(1, Math.floor(total * a.actorShare));
    const names = ['rollout', 'genrm', 'teacher'] as const;
    const roles: Record<string, unknown> = {};
    const phases: Array<{ name: string; residents: string[] }> = [
      { name: 'rollout', residents: ['rollout'] },
    ];
    names.forEach((name, i) => {
      const r = a.roles[i];
      if (!r || (i > 0 && !a.use[i - 1])) return;
      const mode = name === 'rollout' && r.mode === 'colocated_defer' ? 'colocated_split' : r.mode;
      if (mode === 'colocated_defer') phases.push({ name: `${name}_score`, residents: [name] });
      roles[name] = {
        deployment: { mode, offload: true },
        ...(r.offset === undefined ? {} : { bundle_offset: r.offset }),
        routing: {},
        models: [
          {
            name: `${name}-m`,
            model_path: '/m',
            weight_source: 'static',
            engine_groups: r.groups.map((g) => ({ num_gpus: g.engines * g.gpe, gpus_per_engine: g.gpe })),
          },
        ],
      };
    });
    phases.push({ name: 'train', residents: ['train'] });
    const nodes = Array.from({ length: a.nodes }, (_, i) => ({ name: `n${i}`, gpus: a.nodeGpus }));
    // A shuffle of whole nodes keeps bindings valid-ish while changing which GPUs a bundle means.
    const bindings =
      a.shuffle === undefined
        ? []
        : Array.from({ length: actor }, (_, b) => {
            const node = (Math.floor(b / a.nodeGpus) + (a.shuffle ?? 0)) % a.nodes;
            return { bundle_index: b, node: `n${node}`, gpu_id: b % a.nodeGpus };
          });
    return parseConfig({
      cluster: { nodes, bindings },
      training: { actor_gpus: actor, offload_train: true },
      roles: roles as never,
      schedule: { activation_groups: [{ name: 'actor', phases }] },
    });
  });

function residentSets(plan: PlacementPlan): Map<string, Map<number, string>> {
  const phases = new Set(plan.placements.map((p) => p.phase ?? ''));
  const out = new Map<string, Map<number, string>>();
  for (const phase of phases) out.set(phase, new Map());
  return out;
}

describe('planner properties', () => {
  it('generates valid layouts often enough for the properties to mean something', () => {
    const samples = fc.sample(arbConfig, { numRuns: 400, seed: 7 });
    const ok = samples.filter((c) => planPlacement(c).ok).length;
    expect(ok).toBeGreaterThan(25);
  });

  it('a valid plan never puts two resident engines on one GPU in one phase', () => {
    fc.assert(
      fc.property(arbConfig, (config) => {
        const r = planPlacement(config);
        if (!r.ok) return;
        const sets = residentSets(r.plan);
        for (const [phase, used] of sets) {
          for (const p of r.plan.placements) {
            // Phase-less placements are resident in every phase.
            if (p.phase !== null && p.phase !== phase) continue;
            for (const rep of p.replicas) {
              for (const n of rep.nodes) {
                for (const b of n.bundle_indices) {
                  const gpu = r.plan.pools[p.pool]?.bundles[b]?.global_gpu;
                  expect(gpu).toBeDefined();
                  const key = gpu as number;
                  const prev = used.get(key);
                  expect(prev, `GPU ${key} in phase ${phase}: ${prev} and ${rep.engine_id}`).toBeUndefined();
                  used.set(key, rep.engine_id);
                }
              }
            }
          }
        }
      }),
      { numRuns: 600, seed: 42 },
    );
  });

  it('a valid plan never splits an engine across nodes; multi-node engines take whole distinct nodes', () => {
    fc.assert(
      fc.property(arbConfig, (config) => {
        const r = planPlacement(config);
        if (!r.ok) return;
        const size = new Map(config.cluster.nodes.map((n) => [n.name, n.gpus]));
        for (const p of r.plan.placements) {
          for (const rep of p.replicas) {
            const gpus = rep.nodes.reduce((s, n) => s + n.gpu_ids.length, 0);
            expect(gpus).toBe(p.gpus_per_engine);
            expect(new Set(rep.nodes.map((n) => n.node)).size).toBe(rep.nodes.length);
            expect(rep.nnodes).toBe(rep.nodes.length);
            if (rep.nodes.length > 1) {
              for (const n of rep.nodes)
                expect(n.gpu_ids).toEqual(Array.from({ length: size.get(n.node) ?? 0 }, (_, i) => i));
            }
            for (const n of rep.nodes) {
              expect(n.gpu_ids).toEqual(
                Array.from({ length: n.gpu_ids.length }, (_, i) => n.base_gpu_id + i),
              );
              for (const b of n.bundle_indices) expect(r.plan.pools[p.pool]?.bundles[b]?.node).toBe(n.node);
            }
          }
        }
      }),
      { numRuns: 600, seed: 43 },
    );
  });
});
