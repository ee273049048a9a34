import type { DiscoveryEngine, DiscoveryModel, DiscoverySnapshot, ReplicaState } from '@uis/spec';

export function engine(model: string, i: number, overrides: Partial<DiscoveryEngine> = {}): DiscoveryEngine {
  const state = overrides.state ?? 'ready';
  return {
    engine_id: `${model}/${i}`,
    base_url: `http://10.0.0.${i + 1}:15000`,
    state,
    direct_eligible: state === 'ready',
    ...overrides,
  };
}

export function modelEntry(
  name: string,
  replicas: number,
  overrides: Partial<DiscoveryModel> = {},
): DiscoveryModel {
  return {
    state: 'ready' as ReplicaState,
    router_url: null,
    engines: Array.from({ length: replicas }, (_, i) => engine(name, i)),
    ...overrides,
  };
}

export function snapshot(overrides: Partial<DiscoverySnapshot> = {}): DiscoverySnapshot {
  return {
    schema_version: 2,
    role: 'teacher',
    topology_revision: 1,
    registry_epoch: 'epoch-a',
    phase: null,
    models: {
      'math-teacher': modelEntry('math-teacher', 3, { served_model_name: 'Qwen3-8B' }),
      'code-teacher': modelEntry('code-teacher', 2),
    },
    routing: {
      default_model: 'math-teacher',
      route_keys: { math: 'math-teacher', code: 'code-teacher' },
      aliases: { teacher: 'math-teacher', coder: 'code-teacher' },
      policy: 'round_robin',
      model_policies: {},
    },
    ...overrides,
  };
}
