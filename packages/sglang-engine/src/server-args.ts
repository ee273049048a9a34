import {
  type EngineGroupSpec,
  groupTp,
  type InferenceModelSpec,
  type NodePlacement,
  normalizeServerArgName,
  type ReplicaPlacement,
  type ServerArgValue,
  servedModelName,
  serverArgIssue,
  UisError,
} from '@uis/spec';
import { argvFlags, checkFlags, type PlannedFlag } from './sglang-flags.ts';
import { DEFAULT_SGLANG_VERSION } from './sglang-surface.ts';

/** One OS process of a replica: node-rank 0 is the head that serves the HTTP API. */
export interface NodeProcessSpec {
  nodeRank: number;
  node: string;
  argv: string[];
  env: Record<string, string>;
  cwd?: string;
}

export interface ServerArgsResult {
  processes: NodeProcessSpec[];
  headUrl: string;
  /** The prefill worker's `--disaggregation-bootstrap-port`, which the router must be told with its URL. */
  bootstrapPort?: number;
}

export interface ServerArgsOptions {
  /** Address every node process binds (`--host`). */
  host: string;
  /** HTTP port of the head (`--port`). */
  port: number;
  /** Build only this node's process (a per-node launcher); all nodes when absent. */
  nodeRank?: number;
  /** `host:port` of the torch.distributed rendezvous on the head node; required when the replica spans nodes. */
  distInitAddr?: string;
  /** The model may release its GPU memory (memory saver on). */
  offload: boolean;
  /** Command prefix; default `python -m sglang.launch_server`. Tests pass the simulator's CLI. */
  command?: string[];
  /** Per-node-rank `--port` override. SGLang binds the same port on every node; on one machine the non-head
   * nodes need their own port. Defaults to `port` for every node. */
  nodePorts?: readonly number[];
  /** `--disaggregation-bootstrap-port` of a prefill worker (SGLang's default 8998 collides when two prefill
   * engines share a node). */
  bootstrapPort?: number;
  /** Host the head URL uses when `host` is a wildcard and the head node has no `node_ip`. */
  advertiseHost?: string;
  cwd?: string;
  /** Flags appended to every node's command line after the planned ones (e.g. the simulator's timing flags). */
  extraArgs?: readonly string[];
  /** Environment of every node process; the planned variables (CUDA_VISIBLE_DEVICES ...) win over it. */
  env?: Readonly<Record<string, string>>;
}

export const DEFAULT_SGLANG_COMMAND: readonly string[] = ['python', '-m', 'sglang.launch_server'];

/** `--tp-size` style flag of a snake_case SGLang field. */
export function flagName(field: string): string {
  return `--${field.replaceAll('_', '-')}`;
}

/** The group's `server_args` overrides as planned flags, refusing those that would break the placement. Booleans
 * are store_true flags in SGLang: `true` adds the flag, `false` and `null` leave SGLang's default. */
export function overrideFlags(
  overrides: Readonly<Record<string, ServerArgValue>>,
  path: string,
): PlannedFlag[] {
  const flags: PlannedFlag[] = [];
  for (const [raw, value] of Object.entries(overrides)) {
    const field = normalizeServerArgName(raw);
    const issue = serverArgIssue(raw);
    if (issue !== null) throw new UisError({ ...issue, path: `${path}.${raw}` });
    if (value === null || value === false) continue;
    const from = `${path}.${raw}`;
    flags.push(
      value === true
        ? { flag: flagName(field), from }
        : { flag: flagName(field), value: String(value), from },
    );
  }
  return flags;
}

/** The group's `server_args` overrides as argv (see `overrideFlags`). */
export function overrideArgs(overrides: Readonly<Record<string, ServerArgValue>>, path: string): string[] {
  return argvOf(overrideFlags(overrides, path));
}

function argvOf(flags: readonly PlannedFlag[]): string[] {
  return flags.flatMap((f) => (f.value === undefined ? [f.flag] : [f.flag, f.value]));
}

function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '';
}

function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/** One node process of a replica as uis plans it: the flags it gets, each with the config field behind it. */
export interface PlannedProcess {
  node: NodePlacement;
  flags: PlannedFlag[];
}

/** The flags of every node process of one replica (the head first), before any check against an SGLang
 * release: `buildServerArgs` checks them; the conformance tests read them. */
export function plannedServerFlags(
  model: InferenceModelSpec,
  group: EngineGroupSpec,
  replica: ReplicaPlacement,
  opts: ServerArgsOptions,
): PlannedProcess[] {
  const groupPath = `engine_groups[${replica.group}]`;
  if (replica.worker_type === 'placeholder') {
    throw new UisError({
      code: 'placeholder_not_launchable',
      path: `${groupPath}.worker_type`,
      message: 'a placeholder group reserves GPUs and starts no engine',
    });
  }
  if (replica.nodes.length !== replica.nnodes) {
    throw new UisError({
      code: 'invalid_placement',
      path: `${replica.engine_id}.nodes`,
      message: `replica lists ${replica.nodes.length} nodes but nnodes is ${replica.nnodes}`,
    });
  }
  if (replica.nnodes > 1 && opts.distInitAddr === undefined) {
    throw new UisError({
      code: 'missing_dist_init_addr',
      path: 'distInitAddr',
      message: `replica ${replica.engine_id} spans ${replica.nnodes} nodes: pass distInitAddr (head host:port)`,
    });
  }
  if (Object.hasOwn(model.env_vars, 'CUDA_VISIBLE_DEVICES')) {
    throw new UisError({
      code: 'env_conflicts_with_placement',
      path: 'env_vars.CUDA_VISIBLE_DEVICES',
      message: 'CUDA_VISIBLE_DEVICES is set from the placement plan; remove it from env_vars',
    });
  }
  const overrides = overrideFlags(group.server_args, `${groupPath}.server_args`);
  const common = commonFlags(model, group, replica, opts, groupPath);
  const nodes = [...replica.nodes].sort((a, b) => a.node_rank - b.node_rank);
  const selected = opts.nodeRank === undefined ? nodes : nodes.filter((n) => n.node_rank === opts.nodeRank);
  if (selected.length === 0) {
    throw new UisError({
      code: 'invalid_node_rank',
      path: 'nodeRank',
      message: `replica ${replica.engine_id} has no node rank ${opts.nodeRank}`,
    });
  }
  return selected.map((node) => ({ node, flags: [...common, ...nodeFlags(node, opts), ...overrides] }));
}

/** argv and env of every node process of one replica, and the head's URL. Every flag is checked against the
 * model's SGLang release (`sglang_version`, default the newest supported) first: a flag the release lacks or
 * cannot take is refused here, naming the flag and the release, instead of by SGLang's argparse (exit 2) on the
 * engine's host.
 *
 * GPUs: `CUDA_VISIBLE_DEVICES` lists exactly the node's planned local GPUs, so inside the process they are
 * renumbered from 0; `--base-gpu-id 0 --gpu-id-step 1` therefore address the planned GPUs (SGLang computes a
 * rank's GPU as `base_gpu_id + local_rank * gpu_id_step` in the visible list). */
export function buildServerArgs(
  model: InferenceModelSpec,
  group: EngineGroupSpec,
  replica: ReplicaPlacement,
  opts: ServerArgsOptions,
): ServerArgsResult {
  const planned = plannedServerFlags(model, group, replica, opts);
  const version = model.sglang_version ?? DEFAULT_SGLANG_VERSION;
  const command = opts.command ?? DEFAULT_SGLANG_COMMAND;
  const extra = opts.extraArgs ?? [];
  const processes = planned.map(({ node, flags }) => {
    checkFlags([...flags, ...argvFlags(extra, 'launcher arguments')], version, 'sglang_version');
    return nodeProcess(node, [...command, ...argvOf(flags), ...extra], model, opts);
  });
  const head = [...replica.nodes].sort((a, b) => a.node_rank - b.node_rank)[0]!;
  const headHost = isWildcard(opts.host) ? (head.node_ip ?? opts.advertiseHost ?? '127.0.0.1') : opts.host;
  const headUrl = `http://${urlHost(headHost)}:${opts.port}`;
  return replica.worker_type === 'prefill' && opts.bootstrapPort !== undefined
    ? { processes, headUrl, bootstrapPort: opts.bootstrapPort }
    : { processes, headUrl };
}

/** The flags every node process of the replica gets, each with the config field it comes from. */
function commonFlags(
  model: InferenceModelSpec,
  group: EngineGroupSpec,
  replica: ReplicaPlacement,
  opts: ServerArgsOptions,
  groupPath: string,
): PlannedFlag[] {
  const placement = `${replica.engine_id} placement`;
  const flags: PlannedFlag[] = [
    { flag: '--model-path', value: model.model_path, from: 'model_path' },
    { flag: '--served-model-name', value: servedModelName(model), from: 'served_model_name' },
    { flag: '--tp-size', value: String(groupTp(group)), from: `${groupPath}.tp` },
    { flag: '--pp-size', value: String(group.pp), from: `${groupPath}.pp` },
    { flag: '--dp-size', value: String(group.dp), from: `${groupPath}.dp` },
    { flag: '--ep-size', value: String(group.ep), from: `${groupPath}.ep` },
    { flag: '--base-gpu-id', value: '0', from: placement },
    { flag: '--gpu-id-step', value: '1', from: placement },
    { flag: '--nnodes', value: String(replica.nnodes), from: placement },
  ];
  if (replica.nnodes > 1 && opts.distInitAddr !== undefined) {
    flags.push({ flag: '--dist-init-addr', value: opts.distInitAddr, from: placement });
  }
  if (group.enable_dp_attention) {
    flags.push({ flag: '--enable-dp-attention', from: `${groupPath}.enable_dp_attention` });
  }
  if (opts.offload) flags.push({ flag: '--enable-memory-saver', from: 'deployment.offload' });
  // A static model that sleeps has no trainer to resend its weights: keep a CPU copy to restore on wake.
  if (opts.offload && model.weight_source === 'static') {
    flags.push({
      flag: '--enable-weights-cpu-backup',
      from: 'deployment.offload',
      why: 'a static model keeps a CPU copy of its weights to wake with',
    });
  }
  if (replica.worker_type === 'prefill' || replica.worker_type === 'decode') {
    flags.push({
      flag: '--disaggregation-mode',
      value: replica.worker_type,
      from: `${groupPath}.worker_type`,
    });
    if (replica.worker_type === 'prefill' && opts.bootstrapPort !== undefined) {
      flags.push({
        flag: '--disaggregation-bootstrap-port',
        value: String(opts.bootstrapPort),
        from: placement,
      });
    }
  }
  flags.push({ flag: '--skip-server-warmup', from: 'uis' });
  return flags;
}

function nodeFlags(node: NodePlacement, opts: ServerArgsOptions): PlannedFlag[] {
  const port = opts.nodePorts?.[node.node_rank] ?? opts.port;
  return [
    { flag: '--node-rank', value: String(node.node_rank), from: 'placement' },
    { flag: '--host', value: opts.host, from: 'launcher host' },
    { flag: '--port', value: String(port), from: 'launcher port' },
  ];
}

function nodeProcess(
  node: NodePlacement,
  argv: string[],
  model: InferenceModelSpec,
  opts: ServerArgsOptions,
): NodeProcessSpec {
  const env: Record<string, string> = {
    ...opts.env,
    ...model.env_vars,
    CUDA_VISIBLE_DEVICES: node.gpu_ids.join(','),
  };
  // Relax sets this with the memory saver so CUDA graphs are released and restored with the weights.
  if (opts.offload) env.SGLANG_MEMORY_SAVER_CUDA_GRAPH = 'true';
  const spec: NodeProcessSpec = { nodeRank: node.node_rank, node: node.node, argv, env };
  if (opts.cwd !== undefined) spec.cwd = opts.cwd;
  return spec;
}
