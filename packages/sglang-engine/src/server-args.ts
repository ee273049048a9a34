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

/** The group's `server_args` overrides as argv, refusing those that would break the placement. Booleans are
 * store_true flags in SGLang: `true` adds the flag, `false` and `null` leave SGLang's default. */
export function overrideArgs(overrides: Readonly<Record<string, ServerArgValue>>, path: string): string[] {
  const argv: string[] = [];
  for (const [raw, value] of Object.entries(overrides)) {
    const field = normalizeServerArgName(raw);
    const issue = serverArgIssue(raw);
    if (issue !== null) throw new UisError({ ...issue, path: `${path}.${raw}` });
    if (value === null || value === false) continue;
    if (value === true) argv.push(flagName(field));
    else argv.push(flagName(field), String(value));
  }
  return argv;
}

function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '';
}

function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/** argv and env of every node process of one replica, and the head's URL.
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
  const overrides = overrideArgs(group.server_args, `${groupPath}.server_args`);

  const common: string[] = [
    '--model-path',
    model.model_path,
    '--served-model-name',
    servedModelName(model),
    '--tp-size',
    String(groupTp(group)),
    '--pp-size',
    String(group.pp),
    '--dp-size',
    String(group.dp),
    '--ep-size',
    String(group.ep),
    '--base-gpu-id',
    '0',
    '--gpu-id-step',
    '1',
    '--nnodes',
    String(replica.nnodes),
  ];
  if (replica.nnodes > 1 && opts.distInitAddr !== undefined)
    common.push('--dist-init-addr', opts.distInitAddr);
  if (group.enable_dp_attention) common.push('--enable-dp-attention');
  if (opts.offload) common.push('--enable-memory-saver');
  // A static model that sleeps has no trainer to resend its weights: keep a CPU copy to restore on wake.
  if (opts.offload && model.weight_source === 'static') common.push('--enable-weights-cpu-backup');
  if (replica.worker_type === 'prefill' || replica.worker_type === 'decode') {
    common.push('--disaggregation-mode', replica.worker_type);
    if (replica.worker_type === 'prefill' && opts.bootstrapPort !== undefined) {
      common.push('--disaggregation-bootstrap-port', String(opts.bootstrapPort));
    }
  }
  common.push('--skip-server-warmup');

  const command = opts.command ?? DEFAULT_SGLANG_COMMAND;
  const nodes = [...replica.nodes].sort((a, b) => a.node_rank - b.node_rank);
  const selected = opts.nodeRank === undefined ? nodes : nodes.filter((n) => n.node_rank === opts.nodeRank);
  if (selected.length === 0) {
    throw new UisError({
      code: 'invalid_node_rank',
      path: 'nodeRank',
      message: `replica ${replica.engine_id} has no node rank ${opts.nodeRank}`,
    });
  }
  const processes = selected.map((node) => nodeProcess(node, command, common, overrides, model, opts));
  const head = nodes[0]!;
  const headHost = isWildcard(opts.host) ? (head.node_ip ?? opts.advertiseHost ?? '127.0.0.1') : opts.host;
  const headUrl = `http://${urlHost(headHost)}:${opts.port}`;
  return replica.worker_type === 'prefill' && opts.bootstrapPort !== undefined
    ? { processes, headUrl, bootstrapPort: opts.bootstrapPort }
    : { processes, headUrl };
}

function nodeProcess(
  node: NodePlacement,
  command: readonly string[],
  common: readonly string[],
  overrides: readonly string[],
  model: InferenceModelSpec,
  opts: ServerArgsOptions,
): NodeProcessSpec {
  const port = opts.nodePorts?.[node.node_rank] ?? opts.port;
  const argv = [
    ...command,
    ...common,
    '--node-rank',
    String(node.node_rank),
    '--host',
    opts.host,
    '--port',
    String(port),
    ...overrides,
    ...(opts.extraArgs ?? []),
  ];
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
