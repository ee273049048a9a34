import { performance } from 'node:perf_hooks';
import { featuresOf, MEMORY_TAGS, type MemoryTag, type PauseMode } from '@uis/sglang-engine';
import { Arrivals } from './arrivals.ts';
import type { EngineStatus, MemoryState, SimState, SimStats } from './engine-types.ts';
import { PROCESS_GPUS, SimMemoryModel } from './gpu-memory.ts';
import { hashString, mix, prng } from './hash.ts';
import { initialContext } from './model.ts';
import type { SimOptions } from './options.ts';
import type { QueueTimeHistogram } from './queue-time.ts';
import { type SequenceSpec, SimSequence } from './request.ts';
import { Scheduler } from './scheduler.ts';
import { TokenVersions } from './token-versions.ts';

export type { EngineStatus, MemoryState, SimState, SimStats } from './engine-types.ts';

/** A failure the HTTP layer turns into SGLang's answer for that endpoint. */
export class SimFailure extends Error {
  constructor(
    message: string,
    readonly status = 400,
  ) {
    super(message);
  }
}

export type Admission = 'ok' | 'error' | 'hang';

const realSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The engine behind the HTTP API: weights, memory saver, scheduler, prefix cache and injected faults. */
export class SimEngine {
  status: EngineStatus = 'starting';
  readonly scheduler: Scheduler;
  readonly memory: Record<MemoryTag, MemoryState> = {
    weights: 'resident',
    kv_cache: 'resident',
    cuda_graph: 'resident',
  };
  weightVersion: string;
  modelPath: string;
  weightsFingerprint: number;
  weightsValid = true;
  /** Released weights without a CPU backup come back as uninitialised memory. */
  private weightsLost = false;
  readonly groups = new Set<string>();
  connectedNodes = 1;
  private readonly prefixCache = new Set<number>();
  private readonly random: () => number;
  private accepted = 0;
  private readonly counters = {
    requests: 0,
    completed: 0,
    aborted: 0,
    errors: 0,
    promptTokens: 0,
    completionTokens: 0,
    cachedTokens: 0,
  };
  private readonly pendingTimers = new Set<NodeJS.Timeout>();
  /** Fault injection: this many weight updates fail next (SGLang answers 400 and keeps the old weights). */
  failWeightUpdates = 0;
  /** Which weight version produced each output token (see TokenVersions). */
  readonly versions: TokenVersions;
  /** Fault injection: generation requests held before their rid is registered (see Arrivals). */
  readonly arrivals = new Arrivals();
  /** Arrival number of the sequence that crashes the engine (fault injection). */
  private readonly crashAt: number | undefined;
  /** Bytes per tag on its GPUs and the times they take to move (null: no model size given, fixed times only). */
  readonly bytes: SimMemoryModel | null;

  constructor(
    readonly options: SimOptions,
    /** Called when an injected fault kills the engine (the CLI exits; in-process servers drop their sockets). */
    private readonly onCrash: (reason: string) => void,
    readonly now: () => number = () => performance.now(),
    /** The timer of modelled durations (release, resume, weight loads); tests pass a manual clock's. */
    private readonly sleep: (ms: number) => Promise<void> = realSleep,
  ) {
    this.bytes = SimMemoryModel.sized(options) ? new SimMemoryModel(options, PROCESS_GPUS, this) : null;
    this.bytes?.holdAll();
    this.weightVersion = options.weightVersion;
    this.versions = new TokenVersions(featuresOf(options.simSglangVersion)?.weightVersionSpans ?? false);
    this.modelPath = options.modelPath;
    this.weightsFingerprint = hashString(`${options.modelPath}\u0000${options.weightVersion}`);
    this.random = prng(mix(options.simSeed, 0xfa017));
    this.crashAt = options.simCrashAfter === undefined ? undefined : options.simCrashAfter + 1;
    this.scheduler = new Scheduler(
      {
        maxRunningRequests: Math.min(
          options.simMaxRunningRequests,
          options.maxRunningRequests ?? Number.POSITIVE_INFINITY,
        ),
        kvCapacityTokens: options.simKvCapacityTokens,
        prefillUsPerToken: options.simPrefillUsPerToken,
        decodeUsPerToken: options.simDecodeUsPerToken,
        now,
      },
      (s) => this.finished(s),
    );
  }

  get servedModelName(): string {
    return this.options.servedModelName ?? this.modelPath;
  }

  /** Decides the fate of a new generation request (fault injection), counting it. */
  admit(): Admission {
    if (this.status === 'hung') return 'hang';
    this.accepted++;
    this.counters.requests++;
    if (this.options.simHangAfter !== undefined && this.accepted > this.options.simHangAfter) {
      this.status = 'hung';
      this.scheduler.freeze();
      return 'hang';
    }
    if (this.options.simErrorRate > 0 && this.random() < this.options.simErrorRate) {
      this.counters.errors++;
      return 'error';
    }
    return 'ok';
  }

  /** Throws the error SGLang gives when memory needed for generation is released. */
  assertCanGenerate(): void {
    const gone = (['weights', 'kv_cache'] as const).filter((t) => this.memory[t] !== 'resident');
    if (gone.length > 0) {
      throw new SimFailure(
        `Cannot run generation: GPU memory for ${gone.join(', ')} is released (release_memory_occupation); call resume_memory_occupation first.`,
      );
    }
  }

  /** Throws the 400 SGLang gives for a sequence that can never run here. */
  check(spec: SequenceSpec): void {
    if (spec.inputIds.length >= this.options.contextLength) {
      throw new SimFailure(
        `The input (${spec.inputIds.length} tokens) is longer than the model's context length (${this.options.contextLength} tokens).`,
      );
    }
    if (spec.inputIds.length + 1 > this.options.simKvCapacityTokens) {
      throw new SimFailure(
        `The input (${spec.inputIds.length} tokens) does not fit the KV cache (${this.options.simKvCapacityTokens} tokens).`,
      );
    }
  }

  /** Creates and queues a sequence. The callbacks run on every produced token and once at the end. */
  start(
    spec: SequenceSpec,
    onProgress: (s: SimSequence) => void,
    onDone: (s: SimSequence) => void,
  ): SimSequence {
    this.check(spec);
    const arrival = this.accepted;
    const crashes = this.crashAt !== undefined && arrival >= this.crashAt;
    const seq = new SimSequence(spec, initialContext(this.weightsFingerprint), this.now(), (s) => {
      this.versions.note(s, this.weightVersion);
      onProgress(s);
      // After the token's bytes left (http uncorks on nextTick), so the client sees a stream cut mid-way.
      if (crashes) setImmediate(() => this.crash(`injected crash during request ${arrival}`));
    });
    doneCallbacks.set(seq, (s) => {
      onDone(s);
      if (crashes && this.status !== 'crashed') this.crash(`injected crash after request ${arrival}`);
    });
    seq.cachedTokens = this.cachedPrefix(seq.prefixHashes());
    this.counters.cachedTokens += seq.cachedTokens;
    this.scheduler.submit(seq);
    return seq;
  }

  /** Client went away: drop the sequence silently (SGLang aborts it in the background). */
  drop(seq: SimSequence): void {
    if (seq.state === 'finished') return;
    doneCallbacks.delete(seq);
    this.scheduler.drop(seq);
    this.counters.aborted++;
  }

  /** SGLang's abort_request: with `all` every request; else nothing unless a request has exactly this rid (the
   * tokenizer manager's check), then every request whose rid starts with it (the scheduler's match, which also
   * takes the `rid-k` samples of a parallel-sampling request). An empty rid aborts nothing. */
  abort(rid: string | undefined, all: boolean): number {
    if (all) return this.scheduler.abortWhere(() => true);
    if (!rid || !this.scheduler.holds(rid)) return 0;
    return this.scheduler.abortWhere((s) => s.spec.rid.startsWith(rid));
  }

  pause(mode: PauseMode): void {
    this.scheduler.pause(mode);
  }

  resumeGeneration(): void {
    this.scheduler.resume();
  }

  /** false while requests are queued or running (SGLang answers 400 then), except retracted ones. */
  flushCache(): boolean {
    const { running, waiting, paused } = this.scheduler;
    // Retracted requests hold no KV (they prefill again on continue), so SGLang lets a retract pause flush.
    if (running.length > 0 || (waiting.length > 0 && paused !== 'retract')) return false;
    this.prefixCache.clear();
    return true;
  }

  private requireMemorySaver(action: string): void {
    if (!this.options.enableMemorySaver) {
      throw new SimFailure(
        `${action} requires the server to be launched with --enable-memory-saver (memory saver is disabled).`,
      );
    }
  }

  private tagsOf(tags: readonly MemoryTag[] | null | undefined): MemoryTag[] {
    return tags == null || tags.length === 0 ? [...MEMORY_TAGS] : [...new Set(tags)];
  }

  async releaseMemory(tags: readonly MemoryTag[] | null | undefined): Promise<void> {
    this.requireMemorySaver('release_memory_occupation');
    if (this.scheduler.busy) {
      throw new SimFailure('Cannot release memory while requests are running; pause or abort them first.');
    }
    const list = this.tagsOf(tags);
    // SGLang pauses each tag's memory with torch_memory_saver, which exits the process when asked to pause memory
    // that is not active: releasing a tag twice kills the engine (the scheduler dies, the server with it).
    const paused = list.filter((t) => this.memory[t] !== 'resident');
    if (paused.length > 0)
      this.die(`torch_memory_saver: Cannot pause allocation that is not active. tag=${paused[0]}`);
    for (const t of list) this.memory[t] = 'releasing';
    if (list.includes('weights') && !this.options.enableWeightsCpuBackup) this.weightsLost = true;
    if (list.length === 0) return;
    const done = () => {
      for (const t of list)
        if (this.memory[t] === 'releasing') {
          this.memory[t] = 'released';
          this.bytes?.free(t);
        }
    };
    const ms = this.options.simOffloadMs + (this.bytes?.ms(list, this.now()) ?? 0);
    if (this.options.simEarlyRelease) {
      // The trap users hit: success comes back while the memory is still held.
      this.later(ms, done);
      return;
    }
    await this.sleep(ms);
    done();
  }

  async resumeMemory(tags: readonly MemoryTag[] | null | undefined): Promise<void> {
    this.requireMemorySaver('resume_memory_occupation');
    const list = this.tagsOf(tags);
    const busy = list.filter((t) => this.memory[t] === 'releasing');
    if (busy.length > 0) {
      throw new SimFailure(
        `CUDA out of memory: memory of ${busy.join(', ')} is still being released; wait before resuming.`,
      );
    }
    // SGLang's scheduler removes each tag from its offload_tags set: a tag that was not released raises KeyError in
    // the scheduler, which takes the server down.
    const resident = list.filter((t) => this.memory[t] === 'resident');
    if (resident.length > 0)
      this.die(`resume_memory_occupation: KeyError: '${resident[0]}' (offload_tags.remove)`);
    const oom = this.bytes?.allocate(list) ?? null;
    if (oom !== null) this.die(oom);
    await this.sleep(this.options.simOnloadMs + (this.bytes?.ms(list, this.now()) ?? 0));
    for (const t of list) this.memory[t] = 'resident';
    if (list.includes('weights') && this.weightsLost) {
      // The engine serves again, with whatever the memory held: outputs are wrong until weights are synced.
      this.weightsLost = false;
      this.weightsValid = false;
      this.weightsFingerprint = mix(this.weightsFingerprint, 0xdeadbeef);
    }
  }

  private requireWeights(): void {
    if (this.memory.weights !== 'resident') {
      throw new SimFailure('Cannot update weights while the weights are released; resume them first.');
    }
  }

  /** SGLang's model_update_lock: an update on an engine that is not paused takes the writer lock, so it waits for
   * every request in flight to finish while new requests wait behind it; a paused engine updates at once. */
  private async writerLock(fn: () => void | Promise<void>): Promise<void> {
    if (this.scheduler.paused !== null) return fn();
    this.scheduler.hold(true);
    try {
      while (this.scheduler.busy && this.status !== 'closed' && this.status !== 'crashed') await realSleep(1);
      await fn();
    } finally {
      this.scheduler.hold(false);
    }
  }

  /** An injected failure as SGLang's model runner reports a load that failed (the old weights stay). */
  private injectedFailure(): void {
    if (this.failWeightUpdates <= 0) return;
    this.failWeightUpdates--;
    throw new SimFailure(
      'Failed to update weights: injected fault (--sim fault).\nRolling back to original weights.',
    );
  }

  private applyWeights(
    source: string,
    version: string | null | undefined,
    abortAll: boolean | undefined,
  ): void {
    if (abortAll) this.abort(undefined, true);
    // Same source and version on two engines give the same weights; an unversioned update still changes them.
    this.weightsFingerprint = version
      ? hashString(`${source}\u0000${version}`)
      : mix(hashString(source, this.weightsFingerprint), 0x5eed);
    if (version) this.weightVersion = version;
    this.weightsValid = true;
    this.prefixCache.clear();
  }

  async updateWeightsFromDisk(
    modelPath: string,
    version: string | null | undefined,
    abortAll?: boolean,
  ): Promise<void> {
    this.requireWeights();
    if (abortAll) this.abort(undefined, true);
    await this.writerLock(async () => {
      await this.sleep(this.options.simOnloadMs + (this.bytes?.syncMs(this.now()) ?? 0));
      this.injectedFailure();
      this.modelPath = modelPath;
      this.applyWeights(modelPath, version, abortAll);
    });
  }

  initGroup(name: string): void {
    if (this.groups.has(name)) throw new SimFailure(`Process group ${name} already exists.`);
    this.groups.add(name);
  }

  destroyGroup(name: string): void {
    if (!this.groups.delete(name)) throw new SimFailure(`Process group ${name} does not exist.`);
  }

  async updateWeightsFromDistributed(
    group: string,
    names: readonly string[],
    version: string | null | undefined,
    abortAll?: boolean,
  ): Promise<void> {
    if (!this.groups.has(group)) {
      throw new SimFailure(
        `Process group ${group} is not initialized; call init_weights_update_group first.`,
      );
    }
    this.requireWeights();
    if (abortAll) this.abort(undefined, true);
    await this.writerLock(() => {
      this.injectedFailure();
      this.applyWeights(`dist:${names.join(',')}`, version, abortAll);
    });
  }

  async updateWeightsFromTensor(
    count: number,
    version: string | null | undefined,
    abortAll?: boolean,
    flushCache = true,
  ): Promise<void> {
    this.requireWeights();
    if (abortAll) this.abort(undefined, true);
    await this.writerLock(async () => {
      if (flushCache && this.bytes) await this.sleep(this.bytes.tensorSyncMs(this.now()));
      this.injectedFailure();
      this.applyWeights(`tensor:${count}`, version, abortAll);
    });
  }

  setWeightVersion(version: string, abortAll?: boolean): void {
    if (abortAll) this.abort(undefined, true);
    this.weightVersion = version;
  }

  /** A fault SGLang does not survive: the scheduler dies (the server with it) and the call gets no answer. */
  private die(reason: string): never {
    this.crash(reason);
    throw new SimFailure(`scheduler died: ${reason}`, 500);
  }

  crash(reason: string): void {
    if (this.status === 'crashed' || this.status === 'closed') return;
    this.status = 'crashed';
    this.scheduler.close();
    // A dead process holds no GPU memory.
    this.bytes?.free();
    this.onCrash(reason);
  }

  close(): void {
    this.status = 'closed';
    this.scheduler.close();
    this.bytes?.free();
    for (const t of this.pendingTimers) clearTimeout(t);
    this.pendingTimers.clear();
  }

  private later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.pendingTimers.delete(t);
      fn();
    }, ms);
    this.pendingTimers.add(t);
  }

  private cachedPrefix(hashes: readonly number[]): number {
    let n = 0;
    while (n < hashes.length && this.prefixCache.has(hashes[n] as number)) n++;
    // Bounded like a KV pool: forget everything rather than grow without limit.
    if (this.prefixCache.size + hashes.length > this.options.simKvCapacityTokens) this.prefixCache.clear();
    for (let i = n; i < hashes.length; i++) this.prefixCache.add(hashes[i] as number);
    return n;
  }

  /** The [first token index, version] segments of a finished request's output (undefined: unknown rid). */
  tokenVersions(rid: string): Array<[number, string]> | undefined {
    return this.versions.of(rid);
  }

  private finished(s: SimSequence): void {
    // A step's last token is noted here; an abort adds none (its last one was noted when made, maybe on older weights).
    if (s.finishReason?.type !== 'abort') this.versions.note(s, this.weightVersion);
    this.versions.finish(s);
    if (s.finishReason?.type === 'abort') this.counters.aborted++;
    else this.counters.completed++;
    this.counters.promptTokens += s.spec.inputIds.length;
    this.counters.completionTokens += s.outputIds.length;
    const cb = doneCallbacks.get(s);
    doneCallbacks.delete(s);
    cb?.(s);
  }

  countError(): void {
    this.counters.errors++;
  }

  stats(): SimStats {
    return {
      ...this.counters,
      running: this.scheduler.running.length,
      waiting: this.scheduler.waiting.length,
      steps: this.scheduler.counters.steps,
      kvTokensUsed: this.scheduler.kvTokensUsed,
    };
  }

  state(): SimState {
    return {
      status: this.status,
      paused: this.scheduler.paused,
      memory: { ...this.memory },
      weightVersion: this.weightVersion,
      modelPath: this.modelPath,
      weightsFingerprint: this.weightsFingerprint,
      weightsValid: this.weightsValid,
      weightUpdateGroups: [...this.groups],
      connectedNodes: this.connectedNodes,
    };
  }

  /** `sglang:queue_time_seconds` of this engine's scheduler. */
  get queueTime(): QueueTimeHistogram {
    return this.scheduler.queueTime;
  }

  /** Per-DP-rank load as /get_load reports it. */
  load(): { dp_rank: number; num_reqs: number; num_waiting_reqs: number; num_tokens: number }[] {
    const out = Array.from({ length: this.options.dpSize }, (_, dp_rank) => ({
      dp_rank,
      num_reqs: 0,
      num_waiting_reqs: 0,
      num_tokens: 0,
    }));
    for (const s of this.scheduler.running) {
      const e = out[s.spec.dpRank % out.length];
      if (!e) continue;
      e.num_reqs++;
      e.num_tokens += s.contextTokens;
    }
    for (const s of this.scheduler.waiting) {
      const e = out[s.spec.dpRank % out.length];
      if (!e) continue;
      e.num_reqs++;
      e.num_waiting_reqs++;
    }
    return out;
  }
}

/** Completion callbacks by sequence, kept outside the sequence so the scheduler stays unaware of them. */
const doneCallbacks = new WeakMap<SimSequence, (s: SimSequence) => void>();
