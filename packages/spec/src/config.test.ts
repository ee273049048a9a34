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
      'static model with a staleness bound',
      base.replace(
        'weight_source: static\n        engine_groups: [{ num_gpus: 4, gpus_per_engine: 4, tp',
        'weight_source: static\n        max_staleness: 1\n        engine_groups: [{ num_gpus: 4, gpus_per_engine: 4, tp',
      ),
      [{ code: 'invalid_custom', path: 'roles.genrm.models[1].max_staleness' }],
    ],
    [
      'negative staleness bound',
      base.replace('weight_source: static\n', 'weight_source: disk\n        max_staleness: -1\n'),
      [{ path: 'roles.genrm.models[0].max_staleness' }],
    ],
    [
      'fractional staleness bound',
      base.replace('weight_source: static\n', 'weight_source: disk\n        max_staleness: 1.5\n'),
      [{ path: 'roles.genrm.models[0].max_staleness' }],
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

  // Bad input found by probing the `uis` CLI: each is rejected at the path the user has to change.
  it.each<[string, string, Array<Partial<PathIssue>>]>([
    [
      'an empty file',
      '',
      [{ code: 'invalid_config', path: '(root)', message: expect.stringMatching(/the file is empty/) }],
    ],
    [
      'a comment-only file',
      '# nothing yet\n',
      [{ code: 'invalid_config', message: expect.stringMatching(/empty/) }],
    ],
    [
      'a plain string',
      'hello\n',
      [{ code: 'invalid_config', message: expect.stringMatching(/found a string/) }],
    ],
    ['a list', '- 1\n', [{ code: 'invalid_config', message: expect.stringMatching(/found a list/) }]],
    [
      'truncated JSON, without repeating the position in the message',
      '{"cluster": ',
      [
        {
          code: 'config_parse_error',
          path: 'line 1, column 13',
          message: expect.not.stringMatching(/at line/),
        },
      ],
    ],
    [
      'a typo in a top-level key',
      `${base}gatway: { port: 1 }\n`,
      [{ code: 'unknown_field', path: 'gatway' }],
    ],
    [
      'a wrong type, with a stable code',
      base.replace('tp: 4 }', 'tp: four }'),
      [{ code: 'invalid_type', path: 'roles.genrm.models[1].engine_groups[0].tp' }],
    ],
    [
      'an unknown deployment mode',
      base.replace('mode: colocated_split', 'mode: colocated'),
      [{ code: 'invalid_value', path: 'roles.genrm.deployment.mode' }],
    ],
    [
      'a zero TP size, in one plain sentence',
      base.replace('tp: 4 }', 'tp: 0 }'),
      [
        {
          code: 'invalid_too_small',
          path: 'roles.genrm.models[1].engine_groups[0].tp',
          message: 'must be greater than 0',
        },
      ],
    ],
    [
      'more GPUs on a node than any machine has (planning would run out of memory)',
      base.replace('gpus: 8 }', 'gpus: 100000000 }'),
      [{ code: 'invalid_too_big', path: 'cluster.nodes[0].gpus', message: 'must be at most 1024' }],
    ],
    [
      'a cluster beyond what a plan supports',
      base.replace(
        '[{ name: n0, gpus: 8 }]',
        `[${Array.from({ length: 1025 }, (_, i) => `{ name: n${i}, gpus: 1024 }`).join(', ')}]`,
      ),
      [{ code: 'invalid_custom', path: 'cluster.nodes', message: expect.stringMatching(/1049600 GPUs/) }],
    ],
    [
      'a model policy for an unknown model',
      base.replace('default_model: a }', 'default_model: a, model_policies: { c: affinity } }'),
      [{ code: 'invalid_custom', path: 'roles.genrm.routing.model_policies.c' }],
    ],
    [
      'an external engine address that is not a URL',
      base.replace('routing: {', 'external_engine_urls: [nope]\n    routing: {'),
      [{ path: 'roles.genrm.external_engine_urls[0]', message: expect.stringMatching(/not a URL/) }],
    ],
    [
      'an external engine URL of another scheme',
      base.replace('routing: {', 'external_engine_urls: ["ftp://h:21"]\n    routing: {'),
      [{ path: 'roles.genrm.external_engine_urls[0]', message: expect.stringMatching(/http or https/) }],
    ],
    [
      'a gateway external URL that is not a URL',
      `${base}gateway: { launcher: external, external_urls: { a/0: not a url } }\n`,
      [{ path: 'gateway.external_urls.a/0', message: expect.stringMatching(/not a URL/) }],
    ],
    [
      'a gateway port out of range',
      `${base}gateway: { port: 70000 }\n`,
      [{ code: 'invalid_too_big', path: 'gateway.port', message: 'must be at most 65535' }],
    ],
    ['a gateway block that is a list', `${base}gateway: []\n`, [{ code: 'invalid_type', path: 'gateway' }]],
    [
      'roles as a string',
      base.replace(/roles:[\s\S]*/, 'roles: rollout\n'),
      [{ code: 'invalid_type', path: 'roles' }],
    ],
  ])('rejects %s', (_name, text, expected) => {
    expect(issues(text)).toEqual(expected.map((e) => expect.objectContaining(e)));
  });

  it('reads Relax host:port engine addresses as http URLs', () => {
    const c = loadConfig(
      `${base.replace('routing: {', 'external_engine_urls: ["h1:30000", "[::1]:30001", "https://t:3"]\n    routing: {')}gateway: { external_urls: { a/0: "10.0.0.1:30000" } }\n`,
    );
    expect(c.roles.genrm?.external_engine_urls).toEqual([
      'http://h1:30000',
      'http://[::1]:30001',
      'https://t:3',
    ]);
    expect(c.gateway?.external_urls).toEqual({ 'a/0': 'http://10.0.0.1:30000' });
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
