import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import {
  AdoptedReplica,
  DEFAULT_SGLANG_COMMAND,
  type EngineLauncher,
  type LocalLauncherOptions,
  LocalProcessLauncher,
  localServerArgs,
  SGLangEngine,
} from '@uis/sglang-engine';
import {
  type EngineGroupSpec,
  type GroupPlacement,
  type InferenceModelSpec,
  modelWeightBytes,
  type ReplicaPlacement,
  type Role,
  UisError,
} from '@uis/spec';
import type { EngineRecord } from './replicas/engine-records.ts';

/** Everything a launcher needs to build one replica's engine. */
export interface LaunchRequest {
  role: Role;
  model: InferenceModelSpec;
  group: EngineGroupSpec;
  placement: GroupPlacement;
  replica: ReplicaPlacement;
  /** Memory saver on: the replica may sleep between phases. */
  offload: boolean;
  /** Incarnation of the replica slot (moves on restart). */
  generation: number;
}

/** How a replica's processes come to exist. The manager only talks to engines over HTTP; launchers decide
 * where the processes run and whether the manager may stop them. */
export interface Launcher {
  readonly kind: 'sim' | 'local' | 'external' | (string & {});
  /** False for engines started elsewhere: the manager never kills them. */
  readonly ownsProcesses: boolean;
  /** The engine of one replica, not yet started (`engine.start()` launches and waits healthy). */
  create(req: LaunchRequest): Promise<SGLangEngine>;
  /** The engine of a replica a previous control plane launched, from its record (running already; `shutdown()`
   * stops its recorded processes). Only launchers whose engines can outlive the control plane have it. */
  adopt?(req: LaunchRequest, record: EngineRecord): SGLangEngine;
}

export interface CommandLauncherOptions {
  /** Command prefix before SGLang's launch flags. */
  command?: readonly string[];
  /** Extra flags per replica (e.g. sim timing flags). */
  extraArgs?: (req: LaunchRequest) => string[];
  host?: string;
  env?: Record<string, string>;
  processes?: LocalLauncherOptions;
  /** Starts the node processes; default a `LocalProcessLauncher` (tests inject a recorder). */
  engineLauncher?: EngineLauncher;
  /** Engine poll interval (health wait, drain). */
  pollMs?: number;
  /** Adoption mode: engines run without a watchdog (they outlive this control plane) and the next one adopts
   * them. */
  keepEngines?: boolean;
}

/** `local`: the real `python -m sglang.launch_server` command line from `buildServerArgs`, one process per node
 * of the replica, on this host. The command is configurable, which is how tests run it with the simulator. */
export class LocalLauncher implements Launcher {
  readonly kind: string = 'local';
  readonly ownsProcesses = true;
  private readonly processes: EngineLauncher;

  constructor(protected readonly opts: CommandLauncherOptions = {}) {
    this.processes =
      opts.engineLauncher ??
      new LocalProcessLauncher({ ...opts.processes, ...(opts.keepEngines ? { watchdog: false } : {}) });
  }

  adopt(req: LaunchRequest, record: EngineRecord): SGLangEngine {
    return new SGLangEngine({
      engineId: req.replica.engine_id,
      baseUrl: record.base_url,
      ...apiKeyOf(req),
      adopted: new AdoptedReplica(record.processes, req.replica.engine_id),
      paused: record.paused,
      ...(this.opts.pollMs === undefined ? {} : { pollMs: this.opts.pollMs }),
    });
  }

  async create(req: LaunchRequest): Promise<SGLangEngine> {
    const host = this.opts.host ?? '127.0.0.1';
    const args = await localServerArgs(req.model, req.group, req.replica, {
      host,
      offload: req.offload,
      command: [...(this.opts.command ?? DEFAULT_SGLANG_COMMAND)],
      advertiseHost: host,
      extraArgs: [...(this.opts.extraArgs?.(req) ?? []), ...apiKeyArgs(req)],
      ...(this.opts.env ? { env: this.opts.env } : {}),
    });
    return new SGLangEngine({
      engineId: req.replica.engine_id,
      baseUrl: args.headUrl,
      ...apiKeyOf(req),
      launcher: this.processes,
      launchSpec: { ...args, engineId: req.replica.engine_id },
      ...(this.opts.pollMs === undefined ? {} : { pollMs: this.opts.pollMs }),
    });
  }
}

/** The model's engine key (`engine_api_key`) for the engine's client, when it has one. */
export function apiKeyOf(req: LaunchRequest): { apiKey?: string } {
  const key = req.model.engine_api_key;
  return key === undefined ? {} : { apiKey: key };
}

/** SGLang's `--api-key` flag for an engine launched here, when the model has a key. */
export function apiKeyArgs(req: LaunchRequest): string[] {
  const key = req.model.engine_api_key;
  return key === undefined ? [] : ['--api-key', key];
}

/** The simulator's bin, found through package resolution so it holds from source, from this package's build and
 * from a bundle that inlines the manager (the compiled `uis`). */
export const SIM_BIN = join(
  dirname(createRequire(import.meta.url).resolve('@uis/sglang-sim/package.json')),
  'bin',
  'sglang-sim.mjs',
);

/** `sim`: sglang-sim processes started from the same `buildServerArgs` output (the embedded default), each
 * simulating the SGLang release its model names (`sglang_version`). */
export class SimLauncher extends LocalLauncher {
  override readonly kind = 'sim';
  constructor(opts: Omit<CommandLauncherOptions, 'command'> & { simArgs?: readonly string[] } = {}) {
    super({
      ...opts,
      command: [process.execPath, SIM_BIN, ...(opts.simArgs ?? [])],
      extraArgs: (req) => [...simModelArgs(req), ...(opts.extraArgs?.(req) ?? [])],
    });
  }
}

/** What the simulator needs to stand in for the model: `--sim-sglang-version` of a model that names its SGLang
 * release (else the simulator's default, the newest), and the model's memory (weight bytes, KV-cache share,
 * CUDA-graph reserve) so its releases, resumes and weight loads take the time their bytes take. */
export function simModelArgs(req: LaunchRequest): string[] {
  const { sglang_version: version, memory } = req.model;
  const gpu = req.placement.gpu_type;
  return [
    ...(version === undefined ? [] : ['--sim-sglang-version', version]),
    ...(gpu === undefined || memory === undefined
      ? []
      : [
          '--sim-gpu-memory-gb',
          String(gpu.memory_gb),
          '--sim-pinned-gbps',
          String(gpu.pinned_gbps),
          '--sim-pageable-gbps',
          String(gpu.pageable_gbps),
          '--sim-alloc-free-s',
          String(gpu.alloc_free_s),
        ]),
    ...(memory === undefined
      ? []
      : [
          '--sim-weight-gb',
          String(modelWeightBytes(memory) / 1e9),
          '--sim-kv-cache-share',
          String(memory.kv_cache_share),
          '--sim-cuda-graph-gb',
          String(memory.cuda_graph_gb),
        ]),
  ];
}

/** `external`: engines started elsewhere (e.g. by a Ray controller), attached by URL and never killed. */
export class ExternalLauncher implements Launcher {
  readonly kind = 'external';
  readonly ownsProcesses = false;
  constructor(
    private readonly urls: Record<string, string> | ((req: LaunchRequest) => string | undefined),
    private readonly pollMs?: number,
  ) {}

  async create(req: LaunchRequest): Promise<SGLangEngine> {
    const url = typeof this.urls === 'function' ? this.urls(req) : this.urls[req.replica.engine_id];
    if (!url)
      throw new UisError({
        code: 'external_url_missing',
        path: req.replica.engine_id,
        message: `no external URL configured for ${req.replica.engine_id}`,
      });
    return new SGLangEngine({
      engineId: req.replica.engine_id,
      baseUrl: url.replace(/\/$/, ''),
      ...apiKeyOf(req),
      ...(this.pollMs === undefined ? {} : { pollMs: this.pollMs }),
    });
  }
}
