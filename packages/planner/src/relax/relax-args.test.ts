import { isUisError, type PathIssue } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { fromRelaxArgs } from './index.ts';

/** Splits a shell-like command line (single quotes only) into argv. */
export function argv(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? '');
}

const rejected = (line: string, files?: Record<string, string>): PathIssue[] => {
  try {
    fromRelaxArgs(argv(line), { files });
  } catch (e) {
    if (isUisError(e)) return e.details as PathIssue[];
    throw e;
  }
  throw new Error('expected rejection');
};

const PD_YAML = `
sglang:
  - name: policy
    model_path: /m/policy
    num_gpus_per_engine: 2
    engine_groups:
      - { worker_type: prefill, num_gpus: 2 }
      - { worker_type: decode, num_gpus: 4, overrides: { mem_fraction_static: 0.7 } }
      - { worker_type: placeholder, num_gpus: 2 }
`;

describe('fromRelaxArgs', () => {
  it('converts a colocate split command line (rollout + GenRM slices of the actor PG)', () => {
    const c = fromRelaxArgs(
      argv(
        `--resource '{"actor": [1, 8], "rollout": [1, 4], "genrm": [1, 4]}' --colocate --hf-checkpoint /m/policy
         --rollout-num-gpus 4 --rollout-num-gpus-per-engine 2 --genrm-model-path /m/rm --genrm-num-gpus 4
         --genrm-num-gpus-per-engine 2 --genrm-engine-config '{"mem_fraction_static": 0.6}'
         --genrm-sampling-config '{"temperature": 0.2, "max_response_len": 1024, "chat_template_kwargs": {"enable_thinking": false}}'
         --sglang-mem-fraction-static 0.8 --sglang-enable-dp-attention --sglang-dp-size 2`,
      ),
    );
    expect(c.cluster.nodes).toEqual([{ name: 'node-0', gpus: 8 }]);
    expect(c.training).toMatchObject({ actor_gpus: 8, offload_train: true });
    const r = c.roles.rollout;
    expect(r?.deployment).toMatchObject({ mode: 'colocated_split', offload: true });
    expect(r?.models[0]).toMatchObject({
      name: 'default',
      model_path: '/m/policy',
      weight_source: 'tensor',
      route_mode: 'sglang_router',
      router: { policy: 'cache_aware' },
    });
    expect(r?.models[0]?.engine_groups[0]).toMatchObject({
      num_gpus: 4,
      gpus_per_engine: 2,
      tp: 2,
      dp: 2,
      enable_dp_attention: true,
      server_args: { mem_fraction_static: 0.8 },
    });
    const g = c.roles.genrm;
    expect(g?.models[0]).toMatchObject({
      name: 'genrm',
      model_path: '/m/rm',
      weight_source: 'static',
      sampling_defaults: { temperature: 0.2, max_new_tokens: 1024 },
      chat_template_kwargs: { enable_thinking: false },
    });
    expect(g?.models[0]?.engine_groups[0]?.server_args).toEqual({
      mem_fraction_static: 0.6,
      enable_weights_cpu_backup: true,
    });
    expect(c.schedule.activation_groups).toEqual([]);
  });

  it('converts a decoupled command line (own pools, synthesized nodes)', () => {
    const c = fromRelaxArgs(
      argv(
        `--resource '{"actor": [1, 8], "rollout": [1, 8]}' --rollout-num-gpus-per-engine 2 --fully-async --sglang-router-port 30000`,
      ),
    );
    expect(c.cluster.nodes).toHaveLength(2);
    expect(c.roles.rollout?.deployment.mode).toBe('decoupled');
    expect(c.roles.rollout?.models[0]).toMatchObject({
      weight_source: 'dcs',
      router: { args: { port: 30000 } },
    });
    expect(c.training.fully_async).toBe(true);
  });

  it('converts a defer of GenRM and Teacher into a schedule', () => {
    const c = fromRelaxArgs(
      argv(
        `--resource '{"actor": [1, 8], "rollout": [1, 8], "genrm": [1, 8], "teacher": [1, 8]}' --colocate
         --genrm-model-path /m/rm --genrm-num-gpus-per-engine 4 --use-opd --opd-type sglang
         --teacher-hf-checkpoint /m/t --teacher-num-gpus-per-engine 8 --teacher-sglang-mem-fraction-static 0.5
         --inference-defer-roles genrm teacher`,
      ),
    );
    expect(c.roles.genrm?.deployment.mode).toBe('colocated_defer');
    expect(c.roles.teacher?.deployment.mode).toBe('colocated_defer');
    expect(c.roles.teacher?.models[0]?.engine_groups[0]).toMatchObject({
      num_gpus: 8,
      gpus_per_engine: 8,
      tp: 8,
      server_args: { mem_fraction_static: 0.5 },
    });
    expect(c.schedule.activation_groups[0]?.phases).toEqual([
      { name: 'rollout', residents: ['rollout'] },
      { name: 'genrm_score', residents: ['genrm'] },
      { name: 'teacher_score', residents: ['teacher'] },
      { name: 'train', residents: ['train'] },
    ]);
  });

  it('splits the teacher budget across multi-teacher routes', () => {
    const c = fromRelaxArgs(
      argv(
        `--resource '{"actor": [1, 8], "rollout": [1, 4], "teacher": [1, 4]}' --colocate --use-opd
         --opd-teacher-routes '{"math": "/t/math", "code": "/t/code"}' --opd-teacher-key data_source`,
      ),
    );
    const t = c.roles.teacher;
    expect(t?.models.map((m) => [m.name, m.model_path, m.engine_groups[0]?.num_gpus])).toEqual([
      ['math', '/t/math', 2],
      ['code', '/t/code', 2],
    ]);
    expect(t?.routing.route_keys).toEqual({ math: 'math', code: 'code' });
    expect(t?.route_key_field).toBe('data_source');
  });

  it('reads PD engine groups from --sglang-config content', () => {
    const c = fromRelaxArgs(
      argv(`--resource '{"actor": [1, 8], "rollout": [1, 8]}' --sglang-config pd.yaml`),
      { files: { 'pd.yaml': PD_YAML } },
    );
    const groups = c.roles.rollout?.models[0]?.engine_groups;
    expect(groups?.map((g) => [g.worker_type, g.num_gpus, g.gpus_per_engine])).toEqual([
      ['prefill', 2, 2],
      ['decode', 4, 2],
      ['placeholder', 2, 2],
    ]);
    expect(groups?.[1]?.server_args).toEqual({ mem_fraction_static: 0.7 });
  });

  it('builds multi-node engines with --num-gpus-per-node 4', () => {
    const c = fromRelaxArgs(
      argv(
        `--resource '{"actor": [1, 16], "rollout": [1, 16]}' --colocate --num-gpus-per-node 4 --rollout-num-gpus-per-engine 8 --sglang-pp-size 2`,
      ),
    );
    expect(c.cluster.nodes.map((n) => n.gpus)).toEqual([4, 4, 4, 4]);
    expect(c.roles.rollout?.models[0]?.engine_groups[0]).toMatchObject({ gpus_per_engine: 8, tp: 4, pp: 2 });
  });

  it('derives prefill/decode groups from --prefill-num-servers', () => {
    const c = fromRelaxArgs(
      argv(
        `--resource '{"actor": [1, 8], "rollout": [1, 8]}' --rollout-num-gpus-per-engine 2 --prefill-num-servers 1`,
      ),
    );
    expect(c.roles.rollout?.models[0]?.engine_groups.map((g) => [g.worker_type, g.num_gpus])).toEqual([
      ['prefill', 2],
      ['decode', 6],
    ]);
  });

  it('converts named GenRM instances, external engines, debug modes and router flags', () => {
    const named = fromRelaxArgs(
      argv(
        `--resource '{"actor": [1, 8], "rollout": [1, 4], "genrm": [1, 4]}' --colocate --defer-reward-to-post-process
         --genrm-instances '{"judge-a": {"model_path": "/a", "num_gpus": 2}, "judge-b": {"model_path": "/b", "num_gpus": 2, "num_gpus_per_engine": 2}}'`,
      ),
    );
    expect(named.roles.genrm?.deployment.mode).toBe('colocated_defer');
    expect(
      named.roles.genrm?.models.map((m) => [
        m.name,
        m.engine_groups[0]?.num_gpus,
        m.engine_groups[0]?.gpus_per_engine,
      ]),
    ).toEqual([
      ['judge-a', 2, 1],
      ['judge-b', 2, 2],
    ]);
    const external = fromRelaxArgs(
      argv(
        `--resource '{"actor": [1, 8], "rollout": [1, 8]}' --rollout-external --rollout-external-engine-addrs h1:1 h2:2 --use-opd --opd-teacher-url http://t:3 --sglang-router-policy round_robin`,
      ),
    );
    expect(external.roles.rollout).toMatchObject({
      // Relax's host:port addresses, as the URLs the manager attaches.
      external_engine_urls: ['http://h1:1', 'http://h2:2'],
      deployment: { pg_owner: 'external' },
    });
    expect(external.roles.rollout?.models[0]?.router?.policy).toBe('round_robin');
    expect(external.roles.teacher?.external_engine_urls).toEqual(['http://t:3']);
    const rolloutOnly = fromRelaxArgs(
      argv(`--resource '{"actor": [1, 8], "rollout": [1, 8]}' --colocate --debug-rollout-only`),
    );
    expect(rolloutOnly.training.actor_gpus).toBe(0);
    expect(rolloutOnly.roles.rollout?.deployment.mode).toBe('decoupled');
    const trainOnly = fromRelaxArgs(
      argv(`--resource '{"actor": [1, 8], "rollout": [1, 8]}' --colocate --debug-train-only`),
    );
    expect(trainOnly.roles).toEqual({});
    const hybrid = fromRelaxArgs(
      argv(`--resource '{"actor": [1, 8], "rollout": [1, 8]}' --colocate --fully-async --hybrid`),
    );
    expect(hybrid.roles.rollout?.deployment.mode).toBe('decoupled');
  });

  it.each<[string, string, string[]]>([
    [
      'fully-async with colocate needs hybrid',
      `--resource '{"actor": [1, 8], "rollout": [1, 8]}' --colocate --fully-async`,
      ['--fully-async'],
    ],
    [
      'external rollout cannot share GPUs',
      `--resource '{"actor": [1, 8], "rollout": [1, 8]}' --colocate --rollout-external-engine-addrs h:1`,
      ['--rollout-external'],
    ],
    [
      'external rollout with managed GenRM',
      `--resource '{"actor": [1, 8], "rollout": [1, 8], "genrm": [1, 8]}' --rollout-external-engine-addrs h:1 --genrm-model-path /rm`,
      ['--rollout-external'],
    ],
    [
      'only genrm/teacher deferred',
      `--resource '{"actor": [1, 8], "rollout": [1, 8]}' --colocate --inference-defer-roles rollout`,
      ['--inference-defer-roles'],
    ],
    [
      'defer needs colocate',
      `--resource '{"actor": [1, 8], "rollout": [1, 8], "genrm": [1, 8]}' --genrm-model-path /rm --genrm-num-gpus 8 --inference-defer-roles genrm`,
      ['--inference-defer-roles'],
    ],
    [
      'rollout budget mismatch',
      `--resource '{"actor": [1, 8], "rollout": [1, 8]}' --rollout-num-gpus 4`,
      ['--rollout-num-gpus'],
    ],
    [
      'teacher budget uneven',
      `--resource '{"actor": [1, 8], "rollout": [1, 3], "teacher": [1, 3]}' --use-opd --opd-teacher-routes '{"a": "/a", "b": "/b"}'`,
      ['--opd-teacher-routes'],
    ],
    ['bad JSON', `--resource '{"actor": [1, 8'`, ['--resource']],
    ['fractional GPUs', `--resource '{"actor": [1, 8], "rollout": [1, 2.5]}'`, ['--resource rollout[1]']],
    ['unknown flag', `--resource '{"actor": [1, 8]}' --colocatx`, ['--colocatx']],
    ['missing value', `--resource '{"actor": [1, 8]}' --num-gpus-per-node`, ['--num-gpus-per-node']],
    [
      'sglang-config not provided',
      `--resource '{"actor": [1, 8], "rollout": [1, 8]}' --sglang-config x.yaml`,
      ['--sglang-config'],
    ],
  ])('rejects %s', (_name, line, paths) => {
    expect(rejected(line).map((i) => i.path)).toEqual(paths);
  });

  it('rejects a --sglang-config whose groups do not sum to the rollout budget', () => {
    expect(
      rejected(`--resource '{"actor": [1, 8], "rollout": [1, 4]}' --sglang-config pd.yaml`, {
        'pd.yaml': PD_YAML,
      }).map((i) => i.code),
    ).toEqual(['contradictory_flags']);
  });

  it('ignores training flags only when asked', () => {
    const line = argv(`--resource '{"actor": [1, 8], "rollout": [1, 8]}' --lr 1e-6 --micro-batch-size 1`);
    expect(() => fromRelaxArgs(line)).toThrow(/unknown Relax flag --lr/);
    expect(fromRelaxArgs(line, { allowUnknown: true }).roles.rollout).toBeDefined();
  });
});
