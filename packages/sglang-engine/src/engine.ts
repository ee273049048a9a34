import { type Clock, type DrainPolicy, type Logger, systemClock, UisError } from '@uis/spec';
import { SGLangClient } from './client.ts';
import { isEngineError } from './engine-error.ts';
import { EngineRelease } from './engine-release.ts';
import type { EngineLauncher, LaunchedReplica, LaunchSpec, ProcessExit } from './launcher.ts';
import {
  DEFAULT_WEIGHT_UPDATE_GROUP,
  type DestroyWeightsUpdateGroupRequest,
  type InitWeightsUpdateGroupRequest,
  type MemoryTag,
  type PauseMode,
  type SuccessMessage,
} from './protocol.ts';
import { type WeightUpdate, weightCall } from './weight-calls.ts';

const groupName = (req: { group_name?: string | undefined }) => req.group_name ?? DEFAULT_WEIGHT_UPDATE_GROUP;

export interface SGLangEngineOptions {
  engineId: string;
  baseUrl: string;
  client?: SGLangClient;
  /** The engine's `--api-key` (used by the client built here; a given `client` brings its own). */
  apiKey?: string;
  launcher?: EngineLauncher;
  launchSpec?: LaunchSpec;
  /** The processes of an engine a previous control plane launched and this one adopted (`shutdown()` stops them;
   * the engine is running already, so `start()` is not called). */
  adopted?: LaunchedReplica;
  /** How a drain paused the engine's generation, as recorded for an adopted engine (`wake` continues it). */
  paused?: PauseMode | null;
  clock?: Clock;
  logger?: Logger;
  /** Poll interval of start's health wait and drain's idle wait. Default 250 ms. */
  pollMs?: number;
  /** Deadline of flush_cache retries (while requests still run). Default 120 s, as Relax. */
  flushDeadlineMs?: number;
  /** Deadline of one control call (pause, abort, continue, release/resume memory, weight version, weight update
   * group init/destroy): an engine that accepts the call and never answers must not hold a lifecycle operation
   * for the client's 1 h idle timeout. Default 5 min (resuming weights of a large model takes a while). */
  controlTimeoutMs?: number;
  /** Deadline of one weight load (disk or distributed). Default 30 min. */
  weightUpdateTimeoutMs?: number;
}

export interface DrainOptions {
  deadlineMs: number;
  policy: DrainPolicy;
  /** Requests the caller (gateway) still has in flight to this engine. */
  inFlight?: () => number;
}

export interface DrainReport {
  policy: DrainPolicy;
  /** ms spent until the engine was idle or the policy was applied. */
  waitedMs: number;
  /** Work seen when the drain began: caller in-flight + engine running + waiting requests. */
  inFlightAtStart: number;
  /** Work left when the drain ended (0 after an abort). */
  inFlightAtEnd: number;
  /** The deadline passed before the engine was idle (policy `wait` then aborts what is left). */
  timedOut: boolean;
  /** pause_generation was called with this mode (continue_generation is due on wake). */
  paused: PauseMode | null;
  aborted: boolean;
  /** The KV cache was flushed (not for `in_place`, whose paused requests keep their cache). */
  flushed: boolean;
}

/** One SGLang replica of any role (rollout, GenRM, teacher): its head URL and, when it was launched here, its
 * node processes. Every operation goes through the engine's HTTP API. */
export class SGLangEngine {
  readonly engineId: string;
  readonly baseUrl: string;
  /** A prefill worker's bootstrap port, when it was launched here (registered with the router beside its URL). */
  readonly bootstrapPort: number | undefined;
  readonly client: SGLangClient;
  private readonly ownsClient: boolean;
  private readonly launcher: EngineLauncher | undefined;
  private readonly launchSpec: LaunchSpec | undefined;
  private readonly clock: Clock;
  private readonly logger: Logger | undefined;
  private readonly pollMs: number;
  private readonly flushDeadlineMs: number;
  private readonly control: { timeoutMs: number };
  private readonly weightLoad: { timeoutMs: number };
  private replica: LaunchedReplica | undefined;
  private readonly exitCallbacks: Array<(e: ProcessExit) => void> = [];
  private lastExit: ProcessExit | undefined;
  private stopping = false;
  /** Aborted by shutdown(): a start still polling for health gives up at once instead of at its deadline. */
  private readonly stopSignal = new AbortController();
  private paused: PauseMode | null = null;
  /** The SGLang release the engine runs, read from its server info once it is healthy. */
  readonly release: EngineRelease;

  constructor(opts: SGLangEngineOptions) {
    this.engineId = opts.engineId;
    this.release = new EngineRelease(opts.engineId);
    this.baseUrl = opts.baseUrl;
    this.bootstrapPort = opts.launchSpec?.bootstrapPort;
    this.ownsClient = opts.client === undefined;
    this.client =
      opts.client ?? new SGLangClient(opts.baseUrl, opts.apiKey === undefined ? {} : { apiKey: opts.apiKey });
    this.launcher = opts.launcher;
    this.launchSpec = opts.launchSpec;
    this.clock = opts.clock ?? systemClock;
    this.logger = opts.logger;
    this.pollMs = opts.pollMs ?? 250;
    this.flushDeadlineMs = opts.flushDeadlineMs ?? 120_000;
    this.control = { timeoutMs: opts.controlTimeoutMs ?? 300_000 };
    this.weightLoad = { timeoutMs: opts.weightUpdateTimeoutMs ?? 1_800_000 };
    this.replica = opts.adopted;
    this.paused = opts.paused ?? null;
    if (this.launcher && !this.launchSpec) {
      throw new UisError({
        code: 'invalid_engine_options',
        path: 'launchSpec',
        message: `${this.engineId}: a launcher needs a launchSpec`,
      });
    }
  }

  /** The engine's SGLang version (server info `version`), once read; undefined before. */
  get sglangVersion(): string | undefined {
    return this.release.version;
  }

  /** Reads the engine's SGLang version from its server info: `start()` does it once healthy; the manager does it
   * for an engine it attached. Operations the release cannot do are refused from then on. */
  detectSGLangVersion(): Promise<string | undefined> {
    return this.release.read(this.client);
  }

  /** Refuses a drain policy the engine's release cannot pause with (a manager asks every replica first). */
  checkDrain(policy: DrainPolicy): void {
    if (policy === 'wait') return;
    this.release.require((f) => f.pauseModes.includes(policy), `pause generation in mode ${policy}`);
  }

  /** Refuses a weight update the engine's release cannot do (a manager asks every replica before any call). */
  checkWeightUpdate(source: WeightUpdate['source'], action: 'init' | 'update' | 'destroy' = 'update'): void {
    if (source === 'distributed' && action === 'destroy') {
      this.release.require((f) => f.destroyWeightsUpdateGroup, 'destroy a weight update group');
    } else if (source === 'distributed') {
      const what = action === 'init' ? 'join a weight update group' : 'update weights from distributed';
      this.release.require((f) => f.updateFromDistributed, what);
    } else {
      const can = {
        disk: 'updateFromDisk',
        tensor: 'updateFromTensor',
        version: 'updateWeightVersion',
      } as const;
      this.release.require((f) => f[can[source]], `update weights from ${source}`);
    }
  }

  /** How a drain paused generation (`continue_generation` is due on wake), or null. */
  get pausedMode(): PauseMode | null {
    return this.paused;
  }

  /** pids of the launched node processes (empty for an attached engine). */
  pids(): number[] {
    return this.replica?.pids() ?? [];
  }

  /** The engine's own log tail (empty for an attached engine). */
  logTail(lines = 100): string {
    return this.replica?.logTail(lines) ?? '';
  }

  /** Registers for an unexpected exit of a node process. */
  onExit(cb: (e: ProcessExit) => void): void {
    this.exitCallbacks.push(cb);
    if (this.lastExit) cb(this.lastExit);
  }

  /** Launches (when a launcher is set), waits until /health_generate answers 200, then flushes the cache (as
   * Relax does). Fails with `engine_start_failed` carrying the engine's own log tail when a process exits or
   * the deadline passes; the launched processes are stopped then. `shutdown()` or `signal` (e.g. another
   * replica's start failed) cancels a start at once: `engine_start_cancelled`, nothing left running. */
  async start(opts: { deadlineMs?: number; signal?: AbortSignal } = {}): Promise<void> {
    const deadlineMs = opts.deadlineMs ?? 600_000;
    const t0 = this.clock.now();
    const signal = opts.signal
      ? AbortSignal.any([opts.signal, this.stopSignal.signal])
      : this.stopSignal.signal;
    if (signal.aborted) await this.cancelStart();
    if (this.launcher && this.launchSpec && !this.replica) {
      this.replica = await this.launcher.launch(this.launchSpec);
      this.replica.onExit((e) => this.handleExit(e));
    }
    let lastError = 'no answer yet';
    for (;;) {
      if (signal.aborted) await this.cancelStart();
      if (this.lastExit) {
        await this.failStart(
          `node rank ${this.lastExit.nodeRank} exited (code ${this.lastExit.code}, signal ${this.lastExit.signal})`,
        );
      }
      const left = deadlineMs - (this.clock.now() - t0);
      if (left <= 0) await this.failStart(`not healthy within ${deadlineMs} ms (last: ${lastError})`);
      try {
        const timeoutMs = Math.max(1000, Math.min(left, 30_000));
        if (await this.client.healthGenerate({ timeoutMs, signal })) break;
        lastError = 'health_generate answered 5xx';
      } catch (e) {
        lastError = e instanceof Error ? e.message : String(e);
      }
      if (!signal.aborted) await this.clock.sleep(this.pollMs);
    }
    const left = Math.max(1000, deadlineMs - (this.clock.now() - t0));
    try {
      await this.client.flushCache({ deadlineMs: Math.min(left, this.flushDeadlineMs), signal });
    } catch (e) {
      if (signal.aborted) await this.cancelStart();
      await this.failStart(`healthy but flush_cache failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    await this.detectSGLangVersion();
    this.logger?.info(
      { engineId: this.engineId, ms: this.clock.now() - t0, sglangVersion: this.sglangVersion },
      'engine healthy',
    );
  }

  /** Releases GPU memory: flush_cache (retried while requests run), then release_memory_occupation(tags). */
  async sleep(tags?: MemoryTag[]): Promise<void> {
    const known = this.knownTags(tags, 'release');
    if (known !== undefined && known.length === 0) return;
    await this.client.flushCache({ deadlineMs: this.flushDeadlineMs });
    await this.releaseMemory(known);
  }

  /** release_memory_occupation(tags) alone, for a caller whose drain already flushed the cache. */
  async releaseMemory(tags?: MemoryTag[]): Promise<void> {
    const known = this.knownTags(tags, 'release');
    if (known !== undefined && known.length === 0) return;
    await this.client.releaseMemoryOccupation(known, this.control);
    this.logger?.info({ engineId: this.engineId, tags: known ?? 'all' }, 'memory released');
  }

  /** resume_memory_occupation(tags); once everything is resident, resumes generation a drain paused. Resume by
   * tag (weights, sync, then kv_cache) to avoid holding old weights, cache and new weights at once. */
  async wake(tags?: MemoryTag[]): Promise<void> {
    const known = this.knownTags(tags, 'resume');
    if (known === undefined || known.length > 0)
      await this.client.resumeMemoryOccupation(known, this.control);
    const complete = tags === undefined || tags.includes('kv_cache');
    if (complete && this.paused !== null) {
      await this.client.continueGeneration(this.control);
      this.paused = null;
    }
    this.logger?.info({ engineId: this.engineId, tags: tags ?? 'all' }, 'memory resumed');
  }

  /** continue_generation after a drain that paused (retract / in_place / abort) without a sleep in between,
   * e.g. after an in-place weight update. No-op when nothing is paused. */
  async resumeGeneration(): Promise<void> {
    if (this.paused === null) return;
    await this.client.continueGeneration(this.control);
    this.paused = null;
  }

  /** Lets the engine's work finish or stops it by policy, then flushes its cache (except `in_place`):
   * - `wait`: wait until the caller's in-flight count and the engine's load are 0; at the deadline abort the
   *   rest (reported as timedOut).
   * - `abort`: pause_generation(abort) + abort_request(all) right away (Relax's GenRM offload).
   * - `retract`: pause_generation(retract): running requests go back to the queue and resume on wake.
   * - `in_place`: pause_generation(in_place): requests freeze with their KV cache (for a weight update without
   *   offload); the cache is not flushed. */
  async drain(opts: DrainOptions): Promise<DrainReport> {
    this.checkDrain(opts.policy);
    const t0 = this.clock.now();
    const work = async () => (opts.inFlight?.() ?? 0) + (await this.engineWork());
    const inFlightAtStart = await work();
    const report: DrainReport = {
      policy: opts.policy,
      waitedMs: 0,
      inFlightAtStart,
      inFlightAtEnd: inFlightAtStart,
      timedOut: false,
      paused: null,
      aborted: false,
      flushed: false,
    };
    if (opts.policy === 'wait') {
      let left = inFlightAtStart;
      while (left > 0 && this.clock.now() - t0 < opts.deadlineMs) {
        await this.clock.sleep(Math.min(this.pollMs, Math.max(1, opts.deadlineMs - (this.clock.now() - t0))));
        left = await work();
      }
      report.inFlightAtEnd = left;
      if (left > 0) {
        report.timedOut = true;
        await this.client.abortAll(this.control);
        report.aborted = true;
      }
    } else {
      await this.client.pauseGeneration(opts.policy, this.control);
      this.paused = opts.policy;
      report.paused = opts.policy;
      if (opts.policy === 'abort') {
        await this.client.abortAll(this.control);
        report.aborted = true;
      }
    }
    if (opts.policy !== 'in_place') {
      const left = Math.max(1000, opts.deadlineMs - (this.clock.now() - t0));
      await this.client.flushCache({ deadlineMs: Math.min(left, this.flushDeadlineMs) });
      report.flushed = true;
    }
    report.waitedMs = this.clock.now() - t0;
    if (opts.policy !== 'wait') report.inFlightAtEnd = await work();
    this.logger?.info({ engineId: this.engineId, ...report }, 'engine drained');
    return report;
  }

  /** Loads new weights and returns the version the engine now reports (`loadWeights`, then `readBackVersion`). */
  async updateWeights(req: WeightUpdate): Promise<{ weightVersion: string }> {
    await this.loadWeights(req);
    return { weightVersion: await this.readBackVersion(req.weightVersion) };
  }

  /** The update call alone (see weightCall); a `{success: false}` answer throws `weight_update_failed`. */
  async loadWeights(req: WeightUpdate): Promise<void> {
    this.checkWeightUpdate(req.source);
    const call = weightCall(this.client, req, { load: this.weightLoad, control: this.control });
    this.requireSuccess(call.path, await call.result, `${req.source} weight update to ${req.weightVersion}`);
  }

  /** Reads the engine's version after an update to `expected`: another version throws
   * `weight_version_mismatch`; an engine that keeps no version (null) is taken at its word. */
  async readBackVersion(expected: string): Promise<string> {
    const reported = await this.weightVersion();
    if (reported !== null && reported !== expected) {
      throw new UisError({
        code: 'weight_version_mismatch',
        path: 'weightVersion',
        message: `${this.engineId} (${this.client.baseUrl}): engine reports weight version ${reported} after updating to ${expected}`,
      });
    }
    return reported ?? expected;
  }

  /** init_weights_update_group: joins the trainer's NCCL group; `success: false` throws `weight_update_failed`. */
  async initWeightsUpdateGroup(req: InitWeightsUpdateGroupRequest): Promise<void> {
    this.checkWeightUpdate('distributed', 'init');
    const r = await this.client.initWeightsUpdateGroup(req, this.control);
    this.requireSuccess(
      '/init_weights_update_group',
      r,
      `joining weight update group ${groupName(req)}`,
      'group_name',
    );
  }

  /** destroy_weights_update_group; `success: false` throws `weight_update_failed`. */
  async destroyWeightsUpdateGroup(req: DestroyWeightsUpdateGroupRequest): Promise<void> {
    this.checkWeightUpdate('distributed', 'destroy');
    const r = await this.client.destroyWeightsUpdateGroup(req, this.control);
    this.requireSuccess(
      '/destroy_weights_update_group',
      r,
      `leaving weight update group ${groupName(req)}`,
      'group_name',
    );
  }

  weightVersion(): Promise<string | null> {
    return this.client.weightVersion(this.control);
  }

  /** Stops the launched processes (a no-op for an attached engine) and closes the HTTP pool. Idempotent. */
  async shutdown(graceMs?: number): Promise<void> {
    this.stopping = true;
    this.stopSignal.abort(new Error(`${this.engineId} is shutting down`));
    await this.replica?.stop(graceMs);
    if (this.ownsClient) await this.client.close();
  }

  /** The tags of a release or resume the engine's release knows. A release whose memory endpoints take no `tags`
   * refuses a call by tag; a tag the release does not know (0.5.2 has no `cuda_graph`) names memory it does not
   * manage apart, and is left out. Unknown release: the tags as given. */
  private knownTags(tags: MemoryTag[] | undefined, verb: string): MemoryTag[] | undefined {
    const f = this.release.features;
    if (tags === undefined || f === undefined) return tags;
    this.release.require((x) => x.memoryTags.length > 0, `${verb} memory by tag (${tags.join(', ')})`);
    return tags.filter((t) => f.memoryTags.includes(t));
  }

  private handleExit(e: ProcessExit): void {
    if (this.stopping) return;
    this.lastExit = e;
    this.logger?.warn({ engineId: this.engineId, ...e }, 'engine process exited');
    for (const cb of this.exitCallbacks) cb(e);
  }

  /** Running + waiting requests over every DP rank (SGLang's `num_reqs` already counts the waiting ones); an
   * unreachable engine counts as idle (nothing to wait for). */
  private async engineWork(): Promise<number> {
    try {
      const load = await this.client.load({ timeoutMs: 10_000 });
      return load.reduce((n, r) => n + r.num_reqs, 0);
    } catch (e) {
      if (isEngineError(e)) return 0;
      throw e;
    }
  }

  /** A weight endpoint's `{success: false, message}` as `weight_update_failed`, naming the engine's endpoint. */
  private requireSuccess(path: string, result: SuccessMessage, what: string, field = 'weightVersion'): void {
    if (result.success) return;
    throw new UisError({
      code: 'weight_update_failed',
      path: field,
      message: `${this.engineId}: POST ${this.client.baseUrl}${path}: ${what} failed: ${result.message}`,
    });
  }

  /** A start given up because the engine is being shut down or the caller cancelled it. */
  private async cancelStart(): Promise<never> {
    this.stopping = true;
    await this.replica?.stop(5000);
    throw new UisError({
      code: 'engine_start_cancelled',
      path: this.engineId,
      message: `${this.engineId}: start cancelled (the engine is being stopped or another replica's start failed)`,
    });
  }

  private async failStart(reason: string): Promise<never> {
    const tail = this.logTail(50);
    // Capture the tail before stopping: stopping adds nothing the user needs.
    this.stopping = true;
    await this.replica?.stop(5000);
    throw new UisError({
      code: 'engine_start_failed',
      path: this.engineId,
      message: `${this.engineId} did not start: ${reason}${tail ? `\n--- engine log tail ---\n${tail}` : ''}`,
      details: { reason, logTail: tail },
    });
  }
}
