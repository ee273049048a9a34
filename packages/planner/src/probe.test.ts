import { loadConfig } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { planPlacement } from './planner.ts';
import { type BundleProbeEntry, validateBundleProbe } from './probe.ts';

const yaml = `
cluster: { nodes: [{ name: a, gpus: 4 }, { name: b, gpus: 4 }] }
training: { actor_gpus: 8, offload_train: true }
roles:
  rollout:
    deployment: { mode: colocated_split, offload: true }
    routing: {}
    models:
      - { name: p, model_path: /m, weight_source: tensor, engine_groups: [{ num_gpus: 4, gpus_per_engine: 2 }] }
  teacher:
    deployment: { mode: colocated_split, offload: true }
    routing: {}
    models:
      - { name: t, model_path: /t, weight_source: static, engine_groups: [{ num_gpus: 4, gpus_per_engine: 4 }] }
`;
const plan = (() => {
  const r = planPlacement(loadConfig(yaml));
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.plan;
})();
const probe = (f: (i: number) => [string, number]): BundleProbeEntry[] =>
  Array.from({ length: 8 }, (_, i) => ({ bundle_index: i, node_id: f(i)[0], gpu_id: f(i)[1] }));

describe('validateBundleProbe', () => {
  it('accepts the layout Ray reports when it matches the plan shape (even on other node ids)', () => {
    expect(
      validateBundleProbe(
        plan,
        'actor',
        probe((i) => [i < 4 ? 'x' : 'y', i % 4]),
      ),
    ).toEqual([]);
  });
  it.each<[string, BundleProbeEntry[], string[]]>([
    ['two bundles on one GPU', probe((i) => [i < 4 ? 'x' : 'y', i === 5 ? 0 : i % 4]), ['gpu_bound_twice']],
    ['missing bundle', probe((i) => [i < 4 ? 'x' : 'y', i % 4]).slice(0, 7), ['bundle_missing']],
    [
      'engine across nodes',
      probe((i) => [i % 2 ? 'x' : 'y', i >> 1]),
      ['engine_straddles_nodes', 'engine_straddles_nodes', 'engine_straddles_nodes'],
    ],
    [
      'descending GPUs',
      probe((i) => [i < 4 ? 'x' : 'y', 3 - (i % 4)]),
      ['gpus_not_contiguous', 'gpus_not_contiguous', 'gpus_not_contiguous'],
    ],
  ])('%s', (_name, entries, codes) => {
    expect(validateBundleProbe(plan, 'actor', entries).map((e) => e.code)).toEqual(codes);
  });
  it('a multi-node replica must span distinct nodes', () => {
    const r = planPlacement(
      loadConfig(
        yaml
          .replace('num_gpus: 4, gpus_per_engine: 2', 'num_gpus: 8, gpus_per_engine: 8, tp: 8')
          .replace(/ {2}teacher:[\s\S]*$/, ''),
      ),
    );
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(
      validateBundleProbe(
        r.plan,
        'actor',
        probe((i) => [i < 4 ? 'x' : 'y', i % 4]),
      ),
    ).toEqual([]);
    const codes = validateBundleProbe(
      r.plan,
      'actor',
      probe((i) => [i < 2 || i >= 6 ? 'x' : 'y', i % 4 === i ? i : i - 4]),
    );
    expect(codes.length).toBeGreaterThan(0);
  });
  it('rejects an unknown pool', () => {
    expect(validateBundleProbe(plan, 'nope', [])[0]?.code).toBe('unknown_pool');
  });
});
