import { parseConfig, type UisConfig } from '@uis/spec';

type Obj = Record<string, unknown>;

/** A minimal valid config document, for tests to mutate. */
export function baseDoc(): Obj {
  return {
    cluster: {
      nodes: [
        { name: 'n0', gpus: 8 },
        { name: 'n1', gpus: 8 },
      ],
    },
    training: { actor_gpus: 16, offload_train: true },
    roles: {
      rollout: {
        deployment: { mode: 'colocated_split', offload: true },
        routing: { default_model: 'policy' },
        models: [
          {
            name: 'policy',
            model_path: '/m/p',
            weight_source: 'tensor',
            engine_groups: [{ num_gpus: 8, gpus_per_engine: 2 }],
          },
        ],
      },
    },
  };
}

export function role(mode: string, gpus: number, perEngine: number, extra: Obj = {}, name = 'm'): Obj {
  return {
    deployment: { mode, offload: true },
    routing: { default_model: name },
    models: [
      {
        name,
        model_path: `/m/${name}`,
        weight_source: 'static',
        engine_groups: [{ num_gpus: gpus, gpus_per_engine: perEngine, ...extra }],
      },
    ],
  };
}

export function schedule(...phases: Array<[string, string[]]>): Obj {
  return {
    activation_groups: [{ name: 'actor', phases: phases.map(([name, residents]) => ({ name, residents })) }],
  };
}

export function config(
  mutate: (doc: Obj & { roles: Obj; cluster: Obj; training: Obj }) => void = () => {},
): UisConfig {
  const doc = baseDoc() as Obj & { roles: Obj; cluster: Obj; training: Obj };
  mutate(doc);
  return parseConfig(doc);
}
