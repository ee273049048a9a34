import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.ts';
import { isUisError, type PathIssue } from './errors.ts';

// A rollout model of 2 replicas (2 GPUs each) with room for 2 more in a placeholder group.
const elastic = (autoscale: string, elasticEnabled = true, metrics = true) => `
cluster:
  nodes: [{ name: n0, gpus: 8 }]
roles:
  rollout:
    deployment: { mode: decoupled }
    routing: { default_model: p }
    models:
      - name: p
        model_path: /m/p
        weight_source: disk
        elastic_enabled: ${elasticEnabled}
        engine_groups:
          - { num_gpus: 4, gpus_per_engine: 2, server_args: { enable_metrics: ${metrics} } }
          - { worker_type: placeholder, num_gpus: 4, gpus_per_engine: 2 }
${autoscale
  .split('\n')
  .map((l) => `        ${l}`)
  .join('\n')}
`;

function issues(text: string): PathIssue[] {
  try {
    loadConfig(text, 'test.yaml');
  } catch (e) {
    if (isUisError(e)) return e.details as PathIssue[];
    throw e;
  }
  throw new Error('expected the config to be rejected');
}

const at = 'roles.rollout.models[0].autoscale';

describe('autoscale (a model config block)', () => {
  it('is off without the block, and takes Relax defaults for what the block leaves out', () => {
    expect(loadConfig(elastic('')).roles.rollout?.models[0]?.autoscale).toBeUndefined();
    const a = loadConfig(elastic('autoscale: { min_replicas: 2, max_replicas: 4 }')).roles.rollout?.models[0]
      ?.autoscale;
    expect(a).toEqual({
      min_replicas: 2,
      max_replicas: 4,
      queue_per_replica: 10,
      token_usage_high: 0.85,
      token_usage_low: 0.3,
      queue_time_p95_s: 5,
      cooldown_s: 60,
      interval_s: 10,
    });
  });

  it.each<[string, string, Array<Partial<PathIssue>>, boolean?, boolean?]>([
    [
      'a model that is not elastic',
      'autoscale: { min_replicas: 2, max_replicas: 4 }',
      [{ path: `${at}.min_replicas`, message: expect.stringMatching(/elastic_enabled: true/) }],
      false,
    ],
    [
      'max below min',
      'autoscale: { min_replicas: 3, max_replicas: 2 }',
      [{ path: `${at}.max_replicas`, message: 'max_replicas 2 is below min_replicas 3' }],
    ],
    [
      'min below the plan',
      'autoscale: { min_replicas: 1, max_replicas: 4 }',
      [{ path: `${at}.min_replicas`, message: expect.stringMatching(/below the plan's 2 replicas/) }],
    ],
    [
      'max past the reserved room',
      'autoscale: { min_replicas: 2, max_replicas: 5 }',
      [{ path: `${at}.max_replicas`, message: expect.stringMatching(/2 planned replicas plus 2 reserved/) }],
    ],
    [
      'thresholds the wrong way round',
      'autoscale: { min_replicas: 2, max_replicas: 4, token_usage_low: 0.9, token_usage_high: 0.5 }',
      [{ path: `${at}.token_usage_low`, message: expect.stringMatching(/below token_usage_high 0.5/) }],
    ],
    [
      'engines without --enable-metrics',
      'autoscale: { min_replicas: 2, max_replicas: 4 }',
      [
        {
          path: 'roles.rollout.models[0].engine_groups[0].server_args.enable_metrics',
          message: expect.stringMatching(/enable_metrics: true/),
        },
      ],
      true,
      false,
    ],
    [
      'an unknown key',
      'autoscale: { min_replicas: 2, max_replicas: 4, cooldown: 5 }',
      [{ code: 'unknown_field', path: `${at}.cooldown` }],
    ],
    [
      'a negative cooldown and a zero interval',
      'autoscale: { min_replicas: 2, max_replicas: 4, cooldown_s: -1, interval_s: 0 }',
      [{ path: `${at}.cooldown_s` }, { path: `${at}.interval_s` }],
    ],
  ])('rejects %s, at the path to change', (_name, block, expected, elasticEnabled, metrics) => {
    expect(issues(elastic(block, elasticEnabled, metrics))).toEqual(
      expected.map((e) => expect.objectContaining(e)),
    );
  });
});
