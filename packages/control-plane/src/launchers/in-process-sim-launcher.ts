import { type Launcher, type LaunchRequest, simModelArgs } from '@uis/manager';
import { type LaunchedReplica, type LaunchSpec, localServerArgs, SGLangEngine } from '@uis/sglang-engine';
import { parseSimArgs, type SimOptionsInput, type SimServer, startSimServer } from '@uis/sglang-sim';

/**
 * `uis demo`'s launcher: sglang-sim engines served from this process on their own 127.0.0.1 ports instead of one
 * Node process per engine node (the demo's 14 engines would otherwise be 14 processes on a 2-core machine). The
 * command line is still SGLang's, from `buildServerArgs`, parsed by the simulator's own flag parser, and the
 * manager drives each engine over HTTP exactly as it drives a process. Nothing outlives the process.
 */
export class InProcessSimLauncher implements Launcher {
  readonly kind = 'sim-inprocess';
  readonly ownsProcesses = true;
  private readonly live = new Set<SimServer>();
  private readonly byEngine = new Map<string, SimServer[]>();

  constructor(private readonly simOptions: Partial<SimOptionsInput> = {}) {}

  async create(req: LaunchRequest): Promise<SGLangEngine> {
    const args = await localServerArgs(req.model, req.group, req.replica, {
      host: '127.0.0.1',
      offload: req.offload,
      command: [],
      extraArgs: simModelArgs(req),
    });
    const spec: LaunchSpec = { ...args, engineId: req.replica.engine_id };
    return new SGLangEngine({
      engineId: req.replica.engine_id,
      baseUrl: args.headUrl,
      launcher: { launch: (s) => this.launch(s, req) },
      launchSpec: spec,
      pollMs: 50,
    });
  }

  private async launch(spec: LaunchSpec, req: LaunchRequest): Promise<LaunchedReplica> {
    const servers: SimServer[] = [];
    try {
      for (const [i, p] of spec.processes.entries()) {
        const { options } = parseSimArgs(p.argv, { ...process.env, ...p.env });
        // Every engine of the demo lives in this process: naming the planned GPUs makes engines of different phases
        // share each GPU's memory, so a resume that does not fit fails as it would on the GPU.
        const node = req.replica.nodes[i];
        const simGpus = node?.gpu_ids.map((g) => `${node.node}:${g}`).join(',');
        const server = await startSimServer({
          ...options,
          ...this.simOptions,
          ...(simGpus ? { simGpus } : {}),
          port: options.port,
        });
        servers.push(server);
        this.live.add(server);
      }
    } catch (e) {
      await Promise.allSettled(servers.map((s) => s.close()));
      throw e;
    }
    this.byEngine.set(spec.engineId, servers);
    let stopped = false;
    return {
      pids: () => [],
      // An in-process engine never exits by itself: it stops when the manager stops it.
      onExit: () => undefined,
      logTail: () => '',
      stop: async () => {
        if (stopped) return;
        stopped = true;
        await Promise.allSettled(servers.map((s) => s.close()));
        for (const s of servers) this.live.delete(s);
        if (this.byEngine.get(spec.engineId) === servers) this.byEngine.delete(spec.engineId);
      },
    };
  }

  /** The simulator servers of a replica (head first), for inspection and fault injection. */
  serversOf(engineId: string): readonly SimServer[] {
    return this.byEngine.get(engineId) ?? [];
  }

  /** Closes every engine still serving (the manager normally stops them on shutdown). */
  async closeAll(): Promise<void> {
    const all = [...this.live];
    this.live.clear();
    await Promise.allSettled(all.map((s) => s.close()));
  }
}
