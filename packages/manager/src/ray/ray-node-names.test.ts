import type { PoolPlan } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { rayNodeNames } from './ray-placement-groups.ts';

/** A pool of 4 bundles planned 2 + 2 on node-a and node-b. */
function pool(ips?: [string, string]): PoolPlan {
  const bundle = (index: number, node: string, gpu_id: number, node_ip?: string) => ({
    index,
    node,
    gpu_id,
    global_gpu: index,
    ...(node_ip ? { node_ip } : {}),
  });
  return {
    name: 'rollout',
    size: 4,
    owner: 'manager',
    deleted_by: 'manager',
    pg_name: 'uis-rollout',
    strategy: 'PACK',
    bundles: [
      bundle(0, 'node-a', 0, ips?.[0]),
      bundle(1, 'node-a', 1, ips?.[0]),
      bundle(2, 'node-b', 0, ips?.[1]),
      bundle(3, 'node-b', 1, ips?.[1]),
    ],
  };
}
const entry = (bundle_index: number, node_id: string, gpu_id: number, node_ip = '127.0.0.1') => ({
  bundle_index,
  node_id,
  node_ip,
  gpu_id,
});

describe('rayNodeNames: Ray node ids as the config names them', () => {
  it('by configured IP, even where Ray swapped the nodes', () => {
    const names = rayNodeNames(pool(['10.0.0.1', '10.0.0.2']), [
      entry(0, 'R2', 0, '10.0.0.2'),
      entry(1, 'R2', 1, '10.0.0.2'),
      entry(2, 'R1', 0, '10.0.0.1'),
      entry(3, 'R1', 1, '10.0.0.1'),
    ]);
    expect(Object.fromEntries(names)).toEqual({ R1: 'node-a', R2: 'node-b' });
  });

  it('without IPs, by the bundles each Ray node holds when that is one-to-one', () => {
    const names = rayNodeNames(pool(), [
      entry(0, 'R1', 0),
      entry(1, 'R1', 1),
      entry(2, 'R2', 2),
      entry(3, 'R2', 3),
    ]);
    expect(Object.fromEntries(names)).toEqual({ R1: 'node-a', R2: 'node-b' });
  });

  it('leaves unnamed what cannot be told (bundles of two planned nodes on one Ray node, or one planned node split)', () => {
    expect(
      rayNodeNames(pool(), [entry(0, 'R1', 0), entry(1, 'R1', 1), entry(2, 'R1', 2), entry(3, 'R1', 3)]).size,
    ).toBe(0);
    const split = rayNodeNames(pool(), [
      entry(0, 'R1', 0),
      entry(1, 'R2', 0),
      entry(2, 'R3', 0),
      entry(3, 'R3', 1),
    ]);
    expect(Object.fromEntries(split)).toEqual({ R3: 'node-b' });
  });
});
