import type { DiscoverySnapshot, GroupPlacement } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { legacyEngines } from './legacy-engines.ts';

const node = (name: string, rank: number) => ({
  node: name,
  node_rank: rank,
  bundle_indices: [rank * 8],
  gpu_ids: [0, 1, 2, 3, 4, 5, 6, 7],
  base_gpu_id: 0,
  gpu_id_step: 1,
});

const placement = {
  role: 'rollout',
  model: 'big',
  group: 0,
  worker_type: 'regular',
  gpus_per_engine: 16,
  replicas: [
    {
      engine_id: 'big/0',
      replica: 0,
      group: 0,
      worker_type: 'regular',
      nnodes: 2,
      nodes: [node('n0', 0), node('n1', 1)],
    },
  ],
} as unknown as GroupPlacement;

const snapshot: DiscoverySnapshot = {
  role: 'rollout',
  topology_revision: 3,
  phase: null,
  models: {
    big: {
      state: 'ready',
      router_url: 'http://10.0.0.9:30000',
      engines: [
        { engine_id: 'big/0', base_url: 'http://10.0.0.1:15000', state: 'ready', direct_eligible: true },
        { engine_id: 'big/1', base_url: 'http://10.0.0.7:15000', state: 'dead', direct_eligible: false },
      ],
    },
  },
};

describe('legacy Rollout /engines shape', () => {
  it('lists every node of a multi-node engine (url on the head only), router address, and attached engines', () => {
    const out = legacyEngines(snapshot, [placement], (id) => (id === 'big/0' ? [101, 102] : []));
    expect(out.total_engines).toBe(2);
    expect(out.models.big).toEqual({
      router_ip: '10.0.0.9',
      router_port: 30000,
      total_engines: 2,
      engine_groups: [
        {
          group_index: 0,
          worker_type: 'regular',
          num_gpus_per_engine: 16,
          num_new_engines: 1,
          engines: [
            { rank: 0, status: 'active', url: 'http://10.0.0.1:15000', pid: 101, node_id: 'n0' },
            { rank: 0, status: 'active', url: null, pid: 102, node_id: 'n1' },
          ],
        },
        {
          group_index: 1,
          worker_type: 'regular',
          num_gpus_per_engine: 0,
          num_new_engines: 1,
          engines: [
            { rank: 0, status: 'dead', url: 'http://10.0.0.7:15000', pid: null, node_id: '10.0.0.7' },
          ],
        },
      ],
    });
  });

  it('filters by model_name', () => {
    expect(legacyEngines(snapshot, [placement], () => [], 'other')).toEqual({ models: {}, total_engines: 0 });
  });
});
