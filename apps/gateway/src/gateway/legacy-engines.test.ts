import { type DiscoverySnapshot, DiscoverySnapshotSchema, type GroupPlacement } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { additiveDiscovery, legacyEngines } from './legacy-engines.ts';

const node = (name: string, rank: number) => ({
  node: name,
  node_rank: rank,
  bundle_indices: [rank * 8],
  gpu_ids: [0, 1, 2, 3, 4, 5, 6, 7],
  base_gpu_id: 0,
  gpu_id_step: 1,
});

const replica = (engine_id: string, nodes: ReturnType<typeof node>[]) => ({
  engine_id,
  replica: Number(engine_id.split('/')[1]),
  group: 0,
  worker_type: 'regular',
  nnodes: nodes.length,
  nodes,
});

const placements = [
  {
    role: 'rollout',
    model: 'small',
    group: 0,
    worker_type: 'regular',
    gpus_per_engine: 1,
    replicas: [replica('small/0', [node('n2', 0)]), replica('small/1', [node('n2', 0)])],
  },
  {
    role: 'rollout',
    model: 'big',
    group: 0,
    worker_type: 'regular',
    gpus_per_engine: 16,
    replicas: [replica('big/0', [node('n0', 0), node('n1', 1)])],
  },
] as unknown as GroupPlacement[];

const snapshot: DiscoverySnapshot = {
  role: 'rollout',
  topology_revision: 3,
  phase: null,
  models: {
    small: {
      state: 'ready',
      router_url: null,
      engines: [
        { engine_id: 'small/0', base_url: 'http://10.0.0.2:15000', state: 'ready', direct_eligible: true },
        { engine_id: 'small/1', base_url: null, state: 'dead', direct_eligible: false },
      ],
    },
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
const pids = (id: string) => (id === 'big/0' ? [101, 102] : id === 'small/0' ? [7] : []);

describe('legacy Rollout /engines shape', () => {
  it('numbers rows from each group rank offset across models, one row per node, keys absent, never null', () => {
    const out = legacyEngines(snapshot, placements, pids);
    expect(out.models.small).toEqual({
      router_ip: null,
      router_port: null,
      total_engines: 2,
      engine_groups: [
        {
          group_index: 0,
          worker_type: 'regular',
          num_gpus_per_engine: 1,
          num_new_engines: 2,
          engines: [
            { rank: 0, status: 'active', url: 'http://10.0.0.2:15000', pid: 7, node_id: 'n2' },
            // Dead and without an address: Relax lists the slot with its rank and status only.
            { rank: 1, status: 'dead' },
          ],
        },
      ],
    });
    expect(out.models.big).toEqual({
      router_ip: '10.0.0.9',
      router_port: 30000,
      // Rows, as Relax counts them: two nodes of big/0 and the attached big/1.
      total_engines: 3,
      engine_groups: [
        {
          group_index: 0,
          worker_type: 'regular',
          num_gpus_per_engine: 16,
          num_new_engines: 1,
          engines: [
            // small's group holds ranks 0-1: big's group starts at rank offset 2; the url is on the head only.
            { rank: 2, status: 'active', url: 'http://10.0.0.1:15000', pid: 101, node_id: 'n0' },
            { rank: 3, status: 'active', pid: 102, node_id: 'n1' },
          ],
        },
        {
          group_index: 1,
          worker_type: 'regular',
          num_gpus_per_engine: 0,
          num_new_engines: 1,
          engines: [{ rank: 4, status: 'dead', url: 'http://10.0.0.7:15000' }],
        },
      ],
    });
    expect(out.total_engines).toBe(5);
    expect(out.instances).toBeUndefined();
    const rows = Object.values(out.models).flatMap((m) => m.engine_groups.flatMap((g) => g.engines));
    expect(JSON.stringify(rows)).not.toContain('null');
  });

  it('filters by model_name without moving ranks', () => {
    const big = legacyEngines(snapshot, placements, pids, { modelName: 'big' });
    expect(Object.keys(big.models)).toEqual(['big']);
    expect(big.models.big!.engine_groups[0]!.engines[0]!.rank).toBe(2);
    expect(big.total_engines).toBe(3);
    expect(legacyEngines(snapshot, placements, pids, { modelName: 'other' })).toEqual({
      models: {},
      total_engines: 0,
    });
  });

  it("lists GenRM's live engines with an address as host and port", () => {
    const out = legacyEngines(snapshot, placements, pids, { genrm: true });
    expect(out.instances).toEqual({
      small: { engines: [{ host: '10.0.0.2', port: 15000 }] },
      big: { engines: [{ host: '10.0.0.1', port: 15000 }] },
    });
  });

  it('the default answer is the schema-2 snapshot plus the legacy fields, and still parses as schema 2', () => {
    const legacy = legacyEngines(snapshot, placements, pids, { genrm: true });
    const doc = additiveDiscovery(snapshot, legacy);
    expect(doc.models.big).toMatchObject(snapshot.models.big!);
    expect(doc.models.big).toMatchObject(legacy.models.big!);
    expect(doc.total_engines).toBe(5);
    expect(doc.instances).toEqual(legacy.instances);
    expect(DiscoverySnapshotSchema.parse(doc)).toEqual(doc);
  });
});
