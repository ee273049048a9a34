import {
  EngineGroupSpecSchema,
  InferenceModelSpecSchema,
  type ReplicaPlacement,
  type ServerArgValue,
  UisError,
} from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { buildServerArgs, type ServerArgsOptions } from './server-args.ts';

function model(extra: Record<string, unknown> = {}) {
  return InferenceModelSpecSchema.parse({
    name: 'policy',
    model_path: '/models/qwen3-8b',
    engine_groups: [{ num_gpus: 8, gpus_per_engine: 4 }],
    weight_source: 'dcs',
    ...extra,
  });
}

function group(extra: Record<string, unknown> = {}) {
  return EngineGroupSpecSchema.parse({ num_gpus: 8, gpus_per_engine: 4, ...extra });
}

function replica(
  nodes: Array<{ node: string; gpus: number[]; ip?: string }>,
  extra: Partial<ReplicaPlacement> = {},
) {
  return {
    engine_id: 'policy/1',
    replica: 1,
    group: 0,
    worker_type: 'regular',
    nnodes: nodes.length,
    nodes: nodes.map((n, rank) => ({
      node: n.node,
      node_ip: n.ip,
      node_rank: rank,
      bundle_indices: n.gpus,
      gpu_ids: n.gpus,
      base_gpu_id: n.gpus[0] ?? 0,
      gpu_id_step: 1,
    })),
    ...extra,
  } satisfies ReplicaPlacement;
}

const base: ServerArgsOptions = { host: '127.0.0.1', port: 15001, offload: false };

/** `--flag value` pairs of an argv as a map; a flag followed by another flag maps to true. */
function flags(argv: string[]): Map<string, string | true> {
  const out = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('--')) continue;
    const next = argv[i + 1];
    if (next === undefined || next.startsWith('--')) out.set(a, true);
    else {
      out.set(a, next);
      i++;
    }
  }
  return out;
}

describe('buildServerArgs', () => {
  it('builds a single-node replica on its planned GPUs', () => {
    const out = buildServerArgs(model(), group(), replica([{ node: 'n0', gpus: [4, 5, 6, 7] }]), base);
    expect(out.headUrl).toBe('http://127.0.0.1:15001');
    expect(out.processes).toHaveLength(1);
    const p = out.processes[0]!;
    expect(p.argv.slice(0, 3)).toEqual(['python', '-m', 'sglang.launch_server']);
    const f = flags(p.argv);
    expect(Object.fromEntries(f)).toEqual({
      '--model-path': '/models/qwen3-8b',
      '--served-model-name': 'policy',
      '--tp-size': '4',
      '--pp-size': '1',
      '--dp-size': '1',
      '--ep-size': '1',
      '--base-gpu-id': '0',
      '--gpu-id-step': '1',
      '--nnodes': '1',
      '--node-rank': '0',
      '--host': '127.0.0.1',
      '--port': '15001',
      '--skip-server-warmup': true,
    });
    expect(p.env).toEqual({ CUDA_VISIBLE_DEVICES: '4,5,6,7' });
    expect(p.nodeRank).toBe(0);
    expect(p.node).toBe('n0');
  });

  it('appends the launcher extra flags after the planned ones; the planned env wins over the launcher env', () => {
    const out = buildServerArgs(
      model({ env_vars: { NCCL_DEBUG: 'INFO' } }),
      group(),
      replica([{ node: 'n0', gpus: [4, 5, 6, 7] }]),
      {
        ...base,
        extraArgs: ['--sim-decode-us-per-token', '5'],
        env: { CUDA_VISIBLE_DEVICES: '9', HF_HOME: '/h' },
      },
    );
    const p = out.processes[0]!;
    expect(p.argv.slice(-3)).toEqual(['15001', '--sim-decode-us-per-token', '5']);
    expect(p.env).toEqual({ HF_HOME: '/h', NCCL_DEBUG: 'INFO', CUDA_VISIBLE_DEVICES: '4,5,6,7' });
  });

  const table: Array<{
    name: string;
    model?: Record<string, unknown>;
    group?: Record<string, unknown>;
    workerType?: ReplicaPlacement['worker_type'];
    opts?: Partial<ServerArgsOptions>;
    has: Record<string, string | true>;
    lacks: string[];
    env?: Record<string, string>;
  }> = [
    {
      name: 'offloaded trained model: memory saver, no CPU backup',
      opts: { offload: true },
      has: { '--enable-memory-saver': true },
      lacks: ['--enable-weights-cpu-backup'],
      env: { CUDA_VISIBLE_DEVICES: '0,1,2,3', SGLANG_MEMORY_SAVER_CUDA_GRAPH: 'true' },
    },
    {
      name: 'offloaded static model keeps a CPU weight backup',
      model: { weight_source: 'static' },
      opts: { offload: true },
      has: { '--enable-memory-saver': true, '--enable-weights-cpu-backup': true },
      lacks: [],
    },
    {
      name: 'static model that never sleeps: neither flag',
      model: { weight_source: 'static' },
      has: {},
      lacks: ['--enable-memory-saver', '--enable-weights-cpu-backup'],
      env: { CUDA_VISIBLE_DEVICES: '0,1,2,3' },
    },
    {
      name: 'tp/pp/dp/ep and dp attention come from the group',
      group: { tp: 2, pp: 2, dp: 2, ep: 2, enable_dp_attention: true },
      has: {
        '--tp-size': '2',
        '--pp-size': '2',
        '--dp-size': '2',
        '--ep-size': '2',
        '--enable-dp-attention': true,
      },
      lacks: [],
    },
    {
      name: 'tp defaults to gpus_per_engine / pp',
      group: { pp: 2 },
      has: { '--tp-size': '2', '--pp-size': '2' },
      lacks: [],
    },
    {
      name: 'prefill worker: disaggregation mode and bootstrap port',
      group: { worker_type: 'prefill' },
      workerType: 'prefill',
      opts: { bootstrapPort: 9001 },
      has: { '--disaggregation-mode': 'prefill', '--disaggregation-bootstrap-port': '9001' },
      lacks: [],
    },
    {
      name: 'decode worker: disaggregation mode only',
      group: { worker_type: 'decode' },
      workerType: 'decode',
      opts: { bootstrapPort: 9001 },
      has: { '--disaggregation-mode': 'decode' },
      lacks: ['--disaggregation-bootstrap-port'],
    },
    {
      name: 'overrides: snake_case and kebab-case keys, booleans as flags, false/null omitted',
      group: {
        server_args: {
          mem_fraction_static: 0.7,
          'chunked-prefill-size': 4096,
          enable_metrics: true,
          disable_radix_cache: false,
          attention_backend: 'fa3',
          log_level: null,
        },
      },
      has: {
        '--mem-fraction-static': '0.7',
        '--chunked-prefill-size': '4096',
        '--enable-metrics': true,
        '--attention-backend': 'fa3',
      },
      lacks: ['--disable-radix-cache', '--log-level'],
    },
    {
      name: 'served_model_name and env_vars from the model',
      model: { served_model_name: 'qwen', env_vars: { NCCL_DEBUG: 'INFO' } },
      has: { '--served-model-name': 'qwen' },
      lacks: [],
      env: { CUDA_VISIBLE_DEVICES: '0,1,2,3', NCCL_DEBUG: 'INFO' },
    },
    {
      name: 'custom command prefix',
      opts: { command: ['node', 'sim.mjs'] },
      has: { '--model-path': '/models/qwen3-8b' },
      lacks: [],
    },
  ];

  it.each(table)('$name', (row) => {
    const r = replica([{ node: 'n0', gpus: [0, 1, 2, 3] }], { worker_type: row.workerType ?? 'regular' });
    const out = buildServerArgs(model(row.model), group(row.group), r, { ...base, ...row.opts });
    const p = out.processes[0]!;
    const f = flags(p.argv);
    for (const [k, v] of Object.entries(row.has)) expect(f.get(k), k).toBe(v);
    for (const k of row.lacks) expect(f.has(k), k).toBe(false);
    if (row.env) expect(p.env).toEqual(row.env);
    if (row.opts?.command) expect(p.argv.slice(0, 2)).toEqual(row.opts.command);
  });

  it('builds one process per node for a multi-node engine, same flags but node rank', () => {
    const r = replica([
      { node: 'n0', gpus: [0, 1, 2, 3, 4, 5, 6, 7], ip: '10.0.0.1' },
      { node: 'n1', gpus: [0, 1, 2, 3, 4, 5, 6, 7], ip: '10.0.0.2' },
    ]);
    const out = buildServerArgs(model(), group({ num_gpus: 16, gpus_per_engine: 16 }), r, {
      host: '0.0.0.0',
      port: 30000,
      offload: false,
      distInitAddr: '10.0.0.1:20000',
    });
    expect(out.headUrl).toBe('http://10.0.0.1:30000');
    expect(out.processes.map((p) => [p.nodeRank, p.node])).toEqual([
      [0, 'n0'],
      [1, 'n1'],
    ]);
    const [f0, f1] = out.processes.map((p) => flags(p.argv));
    expect(f0!.get('--nnodes')).toBe('2');
    expect(f0!.get('--tp-size')).toBe('16');
    expect(f0!.get('--dist-init-addr')).toBe('10.0.0.1:20000');
    expect(f1!.get('--dist-init-addr')).toBe('10.0.0.1:20000');
    expect(f0!.get('--node-rank')).toBe('0');
    expect(f1!.get('--node-rank')).toBe('1');
    f0!.delete('--node-rank');
    f1!.delete('--node-rank');
    expect(Object.fromEntries(f1!)).toEqual(Object.fromEntries(f0!));
  });

  it('gives non-head nodes their own port when asked (several nodes on one machine) and builds one rank', () => {
    const r = replica([
      { node: 'n0', gpus: [0, 1] },
      { node: 'n1', gpus: [2, 3] },
    ]);
    const opts = { ...base, distInitAddr: '127.0.0.1:29500', nodePorts: [15001, 15002] };
    const out = buildServerArgs(model(), group({ num_gpus: 4, gpus_per_engine: 4 }), r, opts);
    expect(out.processes.map((p) => flags(p.argv).get('--port'))).toEqual(['15001', '15002']);
    expect(out.processes.map((p) => p.env.CUDA_VISIBLE_DEVICES)).toEqual(['0,1', '2,3']);
    const one = buildServerArgs(model(), group({ num_gpus: 4, gpus_per_engine: 4 }), r, {
      ...opts,
      nodeRank: 1,
    });
    expect(one.processes.map((p) => p.nodeRank)).toEqual([1]);
    expect(one.headUrl).toBe('http://127.0.0.1:15001');
  });

  const refused: Array<[string, ServerArgValue]> = [
    ['tp_size', 8],
    ['tensor_parallel_size', 8],
    ['pp_size', 2],
    ['dp_size', 2],
    ['ep_size', 2],
    ['base_gpu_id', 3],
    ['gpu_id_step', 2],
    ['nnodes', 2],
    ['node_rank', 1],
    ['dist_init_addr', '1.2.3.4:5'],
    ['port', 1234],
    ['host', '0.0.0.0'],
    ['model_path', '/other'],
    ['served_model_name', 'x'],
    ['enable_memory_saver', true],
    ['disaggregation_mode', 'prefill'],
    ['enable_dp_attention', true],
    ['--tp-size', 8],
    ['base-gpu-id', 1],
  ];
  it.each(refused)('refuses the placement-breaking override %s', (key, value) => {
    const r = replica([{ node: 'n0', gpus: [0, 1, 2, 3] }], { group: 2 });
    let err: unknown;
    try {
      buildServerArgs(model(), group({ server_args: { [key]: value } }), r, base);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UisError);
    expect((err as UisError).code).toBe('server_arg_conflicts_with_placement');
    expect((err as UisError).status).toBe(400);
    expect((err as UisError).path).toBe(`engine_groups[2].server_args.${key}`);
  });

  const invalid: Array<{ name: string; run: () => unknown; code: string; path: string }> = [
    {
      name: 'a malformed override key',
      run: () =>
        buildServerArgs(
          model(),
          group({ server_args: { 'Mem Fraction': 1 } }),
          replica([{ node: 'n0', gpus: [0] }]),
          base,
        ),
      code: 'invalid_server_arg',
      path: 'engine_groups[0].server_args.Mem Fraction',
    },
    {
      name: 'CUDA_VISIBLE_DEVICES in env_vars',
      run: () =>
        buildServerArgs(
          model({ env_vars: { CUDA_VISIBLE_DEVICES: '0' } }),
          group(),
          replica([{ node: 'n0', gpus: [0] }]),
          base,
        ),
      code: 'env_conflicts_with_placement',
      path: 'env_vars.CUDA_VISIBLE_DEVICES',
    },
    {
      name: 'a multi-node replica without distInitAddr',
      run: () =>
        buildServerArgs(
          model(),
          group(),
          replica([
            { node: 'n0', gpus: [0] },
            { node: 'n1', gpus: [0] },
          ]),
          base,
        ),
      code: 'missing_dist_init_addr',
      path: 'distInitAddr',
    },
    {
      name: 'a placeholder group',
      run: () =>
        buildServerArgs(
          model(),
          group(),
          replica([{ node: 'n0', gpus: [0] }], { worker_type: 'placeholder' }),
          base,
        ),
      code: 'placeholder_not_launchable',
      path: 'engine_groups[0].worker_type',
    },
    {
      name: 'an unknown node rank',
      run: () =>
        buildServerArgs(model(), group(), replica([{ node: 'n0', gpus: [0] }]), { ...base, nodeRank: 3 }),
      code: 'invalid_node_rank',
      path: 'nodeRank',
    },
  ];
  it.each(invalid)('rejects $name with a path', ({ run, code, path }) => {
    expect(run).toThrow(UisError);
    try {
      run();
    } catch (e) {
      expect((e as UisError).code).toBe(code);
      expect((e as UisError).path).toBe(path);
    }
  });
});
