import { deferConfig } from '@uis/manager/testing';
import { parseConfig, type UisConfig } from '@uis/spec';

const group = (num_gpus: number, gpus_per_engine: number) => ({
  num_gpus,
  gpus_per_engine,
  tp: gpus_per_engine,
});

/** Test layout: one 8-GPU node split between rollout (two models, 2 replicas each), GenRM and teacher, all
 * resident (no schedule), so every serving path can be exercised at once. */
export function splitTestConfig(): UisConfig {
  return parseConfig({
    cluster: { nodes: [{ name: 'node-0', gpus: 8 }] },
    training: { actor_gpus: 8, offload_train: true },
    roles: {
      rollout: {
        deployment: { mode: 'colocated_split', offload: true },
        routing: {
          default_model: 'policy',
          aliases: { actor: 'policy' },
          route_keys: { code: 'policy-code' },
          policy: 'least_outstanding',
        },
        models: [
          {
            name: 'policy',
            model_path: '/models/policy',
            weight_source: 'disk',
            engine_groups: [group(2, 1)],
          },
          {
            name: 'policy-code',
            model_path: '/models/policy-code',
            weight_source: 'disk',
            engine_groups: [group(2, 1)],
          },
        ],
      },
      genrm: {
        deployment: { mode: 'colocated_split', offload: true },
        routing: { default_model: 'judge' },
        models: [
          {
            name: 'judge',
            model_path: '/models/judge',
            weight_source: 'static',
            sampling_defaults: { temperature: 0.5 },
            chat_template_kwargs: { enable_thinking: false },
            engine_groups: [group(2, 2)],
          },
        ],
      },
      teacher: {
        deployment: { mode: 'colocated_split', offload: true },
        routing: { default_model: 'math-teacher', route_keys: { math: 'math-teacher' } },
        models: [
          {
            name: 'math-teacher',
            model_path: '/models/teacher',
            weight_source: 'static',
            engine_groups: [group(2, 2)],
          },
        ],
      },
    },
  });
}

/** Test layout: rollout, GenRM and teacher take turns on one 8-GPU node (colocated defer), as in the demo; the
 * manager's tests run the same layout. */
export function deferTestConfig(): UisConfig {
  return parseConfig(deferConfig());
}

/** The smallest layout: one rollout model with one engine. */
export function singleRolloutConfig(): UisConfig {
  return parseConfig({
    cluster: { nodes: [{ name: 'node-0', gpus: 1 }] },
    roles: {
      rollout: {
        deployment: { mode: 'decoupled' },
        models: [
          {
            name: 'policy',
            model_path: '/models/policy',
            weight_source: 'disk',
            engine_groups: [group(1, 1)],
          },
        ],
      },
    },
  });
}
