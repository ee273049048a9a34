import {
  buildServerArgs,
  DEFAULT_SGLANG_COMMAND,
  type EngineLauncher,
  type LaunchedReplica,
  type LaunchSpec,
  type ProcessExit,
  SGLangEngine,
} from '@uis/sglang-engine';
import { type GpuRef, type NodePlacement, type ReplicaPlacement, UisError } from '@uis/spec';
import { apiKeyArgs, apiKeyOf, type Launcher, type LaunchRequest } from '../launchers.ts';
import type { ActorExitEvent } from './bridge-protocol.ts';
import type { RayBridge } from './ray-bridge.ts';
import type { ProbedPool, RayPlacementGroups } from './ray-placement-groups.ts';

export interface RayLauncherOptions {
  bridge: RayBridge;
  /** Resolves (and validates) the pools; the same instance the manager uses as its `PlacementGroups`. */
  placementGroups: RayPlacementGroups;
  /** Command prefix before SGLang's launch flags (default `python -m sglang.launch_server`). */
  command?: readonly string[];
  /** Extra flags per replica (e.g. sim timing flags). */
  extraArgs?: (req: LaunchRequest) => string[];
  /** Address engines bind. Default `0.0.0.0`, advertised as the node IP Ray reports; tests on one machine pass
   * `127.0.0.1`. */
  host?: string;
  env?: Record<string, string>;
  pollMs?: number;
}

/** `ray`: each replica's node processes run as Ray actors pinned to their bundles of the plan's PG (fractional GPU
 * reservation as planned, one actor per node, head = node-rank 0). GPUs and hosts come from the validated bundle
 * probe, not from the plan's guess, so CUDA_VISIBLE_DEVICES names the GPUs Ray really gave the bundles. */
export class RayLauncher implements Launcher {
  readonly kind = 'ray';
  readonly ownsProcesses = true;
  /** By engine id: where the last incarnation of each replica was placed, as Ray reported it. */
  private readonly placed = new Map<string, GpuRef[]>();

  constructor(private readonly opts: RayLauncherOptions) {}

  /** Where Ray placed a replica: per node part, the node (the config's name when it can be told, else
   * `ray:<node id>`) and the GPUs of its bundles from the validated probe. Undefined before its first launch. */
  actualPlacement(engineId: string): GpuRef[] | undefined {
    return this.placed.get(engineId);
  }

  async create(req: LaunchRequest): Promise<SGLangEngine> {
    // Validation of the pool happens here, before any process of any replica starts.
    const probed = await this.opts.placementGroups.resolve(req.placement.pool);
    const replica = placeOnProbe(req.replica, probed);
    this.placed.set(
      req.replica.engine_id,
      replica.nodes.map((n) => ({
        node: probed.nodeNames.get(n.node) ?? `ray:${n.node}`,
        gpu_ids: [...n.gpu_ids],
      })),
    );
    const host = this.opts.host ?? '0.0.0.0';
    const head = replica.nodes[0] as NodePlacement;
    const nnodes = replica.nnodes;
    // Ports are found on the node that will bind them: the head's HTTP port and rendezvous port, one per other node.
    const pg = probed.pool.pg_name;
    // Head: HTTP, then the rendezvous (multi-node), then a prefill worker's bootstrap port.
    const rendezvous = nnodes > 1 ? 1 : 0;
    const prefill = replica.worker_type === 'prefill' ? 1 : 0;
    const headPorts = await this.opts.bridge.freePorts(pg, firstBundle(head), 1 + rendezvous + prefill, host);
    const nodePorts: number[] = [headPorts[0] as number];
    for (const n of replica.nodes.slice(1)) {
      const [p] = await this.opts.bridge.freePorts(pg, firstBundle(n), 1, host);
      nodePorts.push(p as number);
    }
    const args = buildServerArgs(req.model, req.group, replica, {
      host,
      port: nodePorts[0] as number,
      offload: req.offload,
      command: [...(this.opts.command ?? DEFAULT_SGLANG_COMMAND)],
      nodePorts,
      ...(head.node_ip ? { advertiseHost: head.node_ip } : {}),
      ...(rendezvous ? { distInitAddr: `${hostFor(host, head)}:${headPorts[1]}` } : {}),
      ...(prefill ? { bootstrapPort: headPorts[1 + rendezvous] as number } : {}),
      extraArgs: [...(this.opts.extraArgs?.(req) ?? []), ...apiKeyArgs(req)],
      ...(this.opts.env ? { env: this.opts.env } : {}),
    });
    const launcher = new RayEngineLauncher(this.opts.bridge, {
      pg: probed.pool.pg_name,
      bundleOf: (rank) => firstBundle(replica.nodes.find((n) => n.node_rank === rank)),
      numGpus: req.placement.ray_num_gpus,
    });
    return new SGLangEngine({
      engineId: req.replica.engine_id,
      baseUrl: args.headUrl,
      ...apiKeyOf(req),
      launcher,
      launchSpec: { ...args, engineId: req.replica.engine_id },
      ...(this.opts.pollMs === undefined ? {} : { pollMs: this.opts.pollMs }),
    });
  }
}

const firstBundle = (n: NodePlacement | undefined): number => n?.bundle_indices[0] ?? 0;

function hostFor(host: string, node: NodePlacement): string {
  return host === '0.0.0.0' || host === '::' ? (node.node_ip ?? '127.0.0.1') : host;
}

/** The replica's node parts with the probe's truth: node id, node IP and the GPUs Ray gave its bundles. */
function placeOnProbe(
  replica: ReplicaPlacement,
  probed: ProbedPool,
): ReplicaPlacement & { nodes: Array<NodePlacement & { node_id: string }> } {
  const nodes = replica.nodes.map((n) => {
    const entries = n.bundle_indices.map((b) => {
      const e = probed.bundles.get(b);
      if (!e)
        throw new UisError({
          code: 'bundle_missing',
          path: `${replica.engine_id}.nodes[${n.node_rank}]`,
          message: `bundle ${b} of ${probed.pool.pg_name} was not probed`,
        });
      return e;
    });
    const nodeId = entries[0]?.node_id ?? '';
    if (entries.some((e) => e.node_id !== nodeId))
      throw new UisError({
        code: 'engine_not_on_one_node',
        path: `${replica.engine_id}.nodes[${n.node_rank}]`,
        message: `node rank ${n.node_rank} of ${replica.engine_id} spans several Ray nodes`,
      });
    const gpuIds = entries.map((e) => e.gpu_id).sort((a, b) => a - b);
    const ip = entries[0]?.node_ip;
    return {
      ...n,
      node: nodeId,
      node_id: nodeId,
      ...(ip ? { node_ip: ip } : {}),
      gpu_ids: gpuIds,
      base_gpu_id: gpuIds[0] ?? 0,
    };
  });
  return { ...replica, nodes };
}

interface RayReplicaTarget {
  pg: string;
  bundleOf: (nodeRank: number) => number;
  numGpus: number;
}

/** Starts one replica's node processes as Ray actors (sglang-engine's `EngineLauncher`). */
export class RayEngineLauncher implements EngineLauncher {
  constructor(
    private readonly bridge: RayBridge,
    private readonly target: RayReplicaTarget,
  ) {}

  async launch(spec: LaunchSpec): Promise<LaunchedReplica> {
    const replica = new RayLaunchedReplica(this.bridge);
    const results = await Promise.allSettled(
      spec.processes.map(async (p) => {
        const started = await this.bridge.startProcess({
          pg: this.target.pg,
          bundle_index: this.target.bundleOf(p.nodeRank),
          num_gpus: this.target.numGpus,
          argv: p.argv,
          env: p.env,
          ...(p.cwd === undefined ? {} : { cwd: p.cwd }),
          label: `${spec.engineId}/node${p.nodeRank}`,
        });
        replica.add(p.nodeRank, started.handle, started.pid);
      }),
    );
    const failed = results.find((r) => r.status === 'rejected');
    if (failed && failed.status === 'rejected') {
      // One node part could not start: the others of this replica go too, nothing else is touched.
      await replica.stop(2_000);
      throw failed.reason;
    }
    return replica;
  }
}

class RayLaunchedReplica implements LaunchedReplica {
  private readonly parts = new Map<string, { nodeRank: number; pid: number }>();
  private readonly listeners: Array<(e: ProcessExit) => void> = [];
  private readonly early: ProcessExit[] = [];
  private readonly tail: string[] = [];
  private stopping: Promise<void> | undefined;
  private readonly unsubscribe: () => void;

  constructor(private readonly bridge: RayBridge) {
    this.unsubscribe = bridge.onActorExit((e) => this.handleActorExit(e));
  }

  add(nodeRank: number, handle: string, pid: number): void {
    this.parts.set(handle, { nodeRank, pid });
    // A process that died within milliseconds may be reported before its start was answered.
    const early = this.bridge.exitOf(handle);
    if (early) this.handleActorExit(early);
  }

  pids(): number[] {
    return [...this.parts.values()].sort((a, b) => a.nodeRank - b.nodeRank).map((p) => p.pid);
  }

  onExit(cb: (e: ProcessExit) => void): void {
    this.listeners.push(cb);
    for (const e of this.early.splice(0)) cb(e);
  }

  private handleActorExit(arg: ActorExitEvent): void {
    const part = this.parts.get(arg.handle);
    if (!part || this.stopping) return;
    for (const line of arg.tail) this.tail.push(`[node ${part.nodeRank}] ${line}`);
    const exit: ProcessExit = { nodeRank: part.nodeRank, code: arg.code, signal: arg.signal };
    if (this.listeners.length === 0) this.early.push(exit);
    for (const cb of this.listeners) cb(exit);
  }

  /** The last output of node processes that exited (live logs stay in the actors: `RayBridge.tail`). */
  logTail(lines = 100): string {
    return this.tail.slice(-lines).join('\n');
  }

  stop(graceMs = 10_000): Promise<void> {
    if (!this.stopping)
      this.stopping = (async () => {
        await Promise.allSettled([...this.parts.keys()].map((h) => this.bridge.stopProcess(h, graceMs)));
        this.unsubscribe();
      })();
    return this.stopping;
  }
}
