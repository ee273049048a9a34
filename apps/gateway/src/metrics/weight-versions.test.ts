import { describe, expect, it } from 'vitest';
import { WeightVersionHistory } from './weight-versions.ts';

describe('WeightVersionHistory', () => {
  it('counts how many targets a replica missed, in the order the targets came', () => {
    const h = new WeightVersionHistory();
    for (const v of ['v1', 'v2', 'v2', 'v3', 'v4']) h.target('rollout', 'policy', v);
    expect(h.behind('rollout', 'policy', 'v4', 'v4')).toBe(0);
    expect(h.behind('rollout', 'policy', 'v3', 'v4')).toBe(1);
    expect(h.behind('rollout', 'policy', 'v1', 'v4')).toBe(3);
    // Older than anything remembered (or no version yet): at least the whole history.
    expect(h.behind('rollout', 'policy', 'v0', 'v4')).toBe(4);
    expect(h.behind('rollout', 'policy', null, 'v4')).toBe(4);
    // No target: nothing to trail.
    expect(h.behind('rollout', 'policy', 'v1', null)).toBe(0);
  });

  it('learns targets from weight-update audit events between scrapes, and keeps a bounded history', () => {
    const h = new WeightVersionHistory(3);
    for (const target of ['a', 'b', 'c', 'd'])
      h.observe({ kind: 'admin.update_weights', actor: 'rollout', subject: 'policy', data: { target } });
    expect(h.behind('rollout', 'policy', 'b', 'd')).toBe(2);
    expect(h.behind('rollout', 'policy', 'a', 'd')).toBe(3);
    const rows = h.rows([
      [
        'rollout',
        {
          snapshot: () => ({
            models: {
              policy: {
                target_weight_version: 'd',
                replicas: [
                  { engine_id: 'p/0', state: 'ready', weight_version: 'c' },
                  { engine_id: 'p/1', state: 'dead', weight_version: 'a' },
                ],
              },
            },
          }),
        },
      ],
    ]);
    expect(rows).toEqual([
      { role: 'rollout', model: 'policy', engine_id: 'p/0', weight_version: 'c', behind: 1 },
    ]);
  });
});
