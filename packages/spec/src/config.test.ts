import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig, roleSpec } from './config.ts';
import { isUisError, type PathIssue } from './errors.ts';

const examples = join(import.meta.dirname, '..', '..', '..', 'examples');

const base = `
cluster:
  nodes: [{ name: n0, gpus: 8 }]
training: { actor_gpus: 8, offload_train: true }
roles:
  genrm:
    deployment: { mode: colocated_split, offload: true }
    routing: { default_model: a }
    models:
      - name: a
        model_path: /m/a
        weight_source: static
        engine_groups: [{ num_gpus: 4, gpus_per_engine: 4 }]
      - name: b
        model_path: /m/b
        weight_source: static
        engine_groups: [{ num_gpus: 4, gpus_per_engine: 4, tp: 4 }]
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

describe('loadConfig', () => {
  it('parses every bundled example', () => {
    for (const f of readdirSync(examples).filter((x) => x.endsWith('.yaml'))) {
      expect(() => loadConfig(readFileSync(join(examples, f), 'utf8'), f), f).not.toThrow();
    }
  });

  it('fills defaults and gives the internal role spec', () => {
    const c = loadConfig(base);
    expect(c.roles.genrm?.models[1]?.engine_groups[0]).toMatchObject({
      worker_type: 'regular',
      pp: 1,
      dp: 1,
      server_args: {},
    });
    const spec = roleSpec('genrm', c.roles.genrm as NonNullable<typeof c.roles.genrm>);
    expect(spec).toMatchObject({ role: 'genrm', workload: 'reward' });
  });

  it('accepts JSON too', () => {
    const c = loadConfig(
      JSON.stringify({ cluster: { nodes: [{ name: 'n', gpus: 1 }] }, roles: {} }),
      'c.json',
    );
    expect(c.training.actor_gpus).toBe(0);
  });

  it.each<[string, string, Array<Partial<PathIssue>>]>([
    [
      'unknown field, with its exact path',
      base.replace('tp: 4 }', 'tp: 4, tpp: 2 }'),
      [{ code: 'unknown_field', path: 'roles.genrm.models[1].engine_groups[0].tpp' }],
    ],
    [
      'fractional GPU count',
      base.replace('tp: 4 }', 'tp: 2.5 }'),
      [
        {
          path: 'roles.genrm.models[1].engine_groups[0].tp',
          message: 'must be a whole number (no fractions)',
        },
      ],
    ],
    ['negative GPU count', base.replace('gpus: 8 }', 'gpus: -8 }'), [{ path: 'cluster.nodes[0].gpus' }]],
    [
      'static model asking for weight updates',
      base.replace(
        'weight_source: static\n        engine_groups: [{ num_gpus: 4, gpus_per_engine: 4, tp',
        'weight_source: static\n        register_dcs: true\n        engine_groups: [{ num_gpus: 4, gpus_per_engine: 4, tp',
      ),
      [{ code: 'invalid_custom', path: 'roles.genrm.models[1].register_dcs' }],
    ],
    [
      'routing to an unknown model',
      base.replace('default_model: a', 'default_model: zz'),
      [{ path: 'roles.genrm.routing.default_model' }],
    ],
    ['duplicate model name', base.replace('name: b', 'name: a'), [{ path: 'roles.genrm.models[1].name' }]],
    [
      'unknown role',
      base.replace('  genrm:', '  critic:'),
      [{ code: 'unknown_field', path: 'roles.critic' }],
    ],
    ['malformed YAML', 'cluster: [\n  nodes', [{ code: 'config_parse_error' }]],
    ['not a mapping', '- 1\n- 2', [{ code: 'invalid_config', path: '(root)' }]],
  ])('rejects %s', (_name, text, expected) => {
    expect(issues(text)).toEqual(expected.map((e) => expect.objectContaining(e)));
  });

  it('lists every issue at once, each saying what to change', () => {
    const list = issues(base.replace('tp: 4 }', 'tp: 0, extra: 1 }').replace('gpus: 8 }', 'gpus: 1.5 }'));
    expect(list.map((i) => i.path).sort()).toEqual([
      'cluster.nodes[0].gpus',
      'roles.genrm.models[1].engine_groups[0].extra',
      'roles.genrm.models[1].engine_groups[0].tp',
    ]);
    expect(list.find((i) => i.code === 'unknown_field')?.message).toContain('remove it');
  });
});
