import type { PauseMode } from '@uis/sglang-engine';
import { QueueTimeHistogram } from './queue-time.ts';
import type { SimSequence } from './request.ts';

/** How far a busy engine may run ahead to make up for late timers (a long GC pause is not replayed). */
const MAX_CATCH_UP_MS = 50;

export interface SchedulerConfig {
  maxRunningRequests: number;
  kvCapacityTokens: number;
  prefillUsPerToken: number;
  decodeUsPerToken: number;
  /** Milliseconds, monotonic. */
  now: () => number;
}

export interface SchedulerCounters {
  steps: number;
  prefillTokens: number;
  decodeTokens: number;
}

/**
 * Continuous batching with a step clock. Each step admits waiting sequences while there is room (running slots and
 * KV tokens), prefills them (cost: prompt tokens x prefill time) and advances every running sequence by one token
 * (cost: one decode step for the whole batch, as on a GPU). A step's tokens come out when its cost has elapsed,
 * so prefill shows in the time to first token. With zero cost the loop yields with setImmediate only: there is no
 * timer per token or per request.
 */
export class Scheduler {
  readonly waiting: SimSequence[] = [];
  readonly running: SimSequence[] = [];
  readonly counters: SchedulerCounters = { steps: 0, prefillTokens: 0, decodeTokens: 0 };
  /** `sglang:queue_time_seconds`: each sequence's wait before its first batch. */
  readonly queueTime = new QueueTimeHistogram();
  private kvUsed = 0;
  private pausedMode: PauseMode | null = null;
  private holding = false;
  private readonly held: SimSequence[] = [];
  private frozen = false;
  /** A test's break point (see breakAt) and whether generation stands at it. */
  private brk: { rid: string; tokens: number; reached: () => void } | null = null;
  private broken = false;
  private scheduled = false;
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  private nextStepAt = 0;
  /** A planned step whose cost is being waited out; its tokens come out when it ends. */
  private inFlight = false;
  /** True while steps run back to back; an idle or paused engine restarts its clock from now. */
  private continuous = false;

  constructor(
    private readonly config: SchedulerConfig,
    /** Called after a sequence produced tokens or finished; finished ones are already out of the queues. */
    private readonly onFinished: (s: SimSequence) => void,
  ) {}

  get kvTokensUsed(): number {
    return this.kvUsed;
  }

  get paused(): PauseMode | null {
    return this.pausedMode;
  }

  get busy(): boolean {
    return this.waiting.length + this.running.length > 0;
  }

  /** Whether a queued or running sequence has exactly this rid. */
  holds(rid: string): boolean {
    return this.waiting.some((s) => s.spec.rid === rid) || this.running.some((s) => s.spec.rid === rid);
  }

  submit(seq: SimSequence): void {
    if (this.holding) {
      this.held.push(seq);
      return;
    }
    this.enqueue(seq);
    this.kick();
  }

  private enqueue(seq: SimSequence): void {
    seq.queuedAt ??= this.config.now();
    this.waiting.push(seq);
  }

  /** A weight update's writer lock: while held, new sequences wait outside the queues (SGLang's tokenizer manager
   * holds them before they reach the scheduler); released, they join the queue in arrival order. */
  hold(on: boolean): void {
    this.holding = on;
    if (on) return;
    for (const s of this.held.splice(0)) if (s.state === 'waiting') this.enqueue(s);
    this.kick();
  }

  /** Stops all progress for good (a hung engine). */
  freeze(): void {
    this.frozen = true;
    this.cancelTimers();
  }

  pause(mode: PauseMode): void {
    this.pausedMode = mode;
    if (mode === 'abort') this.abortWhere(() => true);
    else if (mode === 'retract') {
      // Retracted sequences keep their tokens but lose their KV; they are prefilled again on continue.
      for (const s of this.running.splice(0).reverse()) {
        this.release(s);
        s.state = 'waiting';
        this.waiting.unshift(s);
      }
    }
  }

  resume(): void {
    this.pausedMode = null;
    this.kick();
  }

  /** A test's break point: every step stops once the sequence `rid` has `tokens` output tokens (each one already
   * handed to its answer) until `unbreak()`; resolves then. Pause and continue leave it standing. */
  breakAt(rid: string, tokens: number): Promise<void> {
    return new Promise((reached) => {
      this.brk = { rid, tokens, reached };
    });
  }

  /** The break point stands: every step waits for `unbreak()`. */
  get atBreak(): boolean {
    return this.broken;
  }

  unbreak(): void {
    this.brk = null;
    this.broken = false;
    this.kick();
  }

  /** Aborts matching sequences; returns how many. */
  abortWhere(match: (s: SimSequence) => boolean): number {
    let n = 0;
    for (const queue of [this.waiting, this.running]) {
      for (let i = queue.length - 1; i >= 0; i--) {
        const s = queue[i] as SimSequence;
        if (!match(s)) continue;
        queue.splice(i, 1);
        this.release(s);
        s.abort();
        this.finish(s);
        n++;
      }
    }
    return n;
  }

  /** Removes a sequence whose client went away, without answering it. */
  drop(seq: SimSequence): void {
    for (const queue of [this.waiting, this.running, this.held]) {
      const i = queue.indexOf(seq);
      if (i !== -1) queue.splice(i, 1);
    }
    this.release(seq);
    seq.state = 'finished';
  }

  close(): void {
    this.cancelTimers();
    this.frozen = true;
  }

  private cancelTimers(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.immediate) clearImmediate(this.immediate);
    this.timer = null;
    this.immediate = null;
    this.scheduled = false;
  }

  private release(s: SimSequence): void {
    this.kvUsed -= s.reserved;
    s.reserved = 0;
  }

  private finish(s: SimSequence): void {
    s.state = 'finished';
    this.onFinished(s);
  }

  private kick(): void {
    if (this.scheduled || this.frozen) return;
    if (this.pausedMode !== null || this.broken || (!this.inFlight && !this.busy)) {
      this.continuous = false;
      return;
    }
    this.scheduled = true;
    const wait = this.nextStepAt - this.config.now();
    if (wait >= 1) this.timer = setTimeout(this.tick, wait);
    else this.immediate = setImmediate(this.tick);
  }

  private readonly tick = (): void => {
    this.scheduled = false;
    this.timer = null;
    this.immediate = null;
    if (this.frozen || this.pausedMode !== null || this.broken) return;
    if (this.inFlight) {
      this.inFlight = false;
      this.execute();
      if (this.broken) return;
    }
    if (this.busy) {
      const now = this.config.now();
      // While busy without a break, steps follow each other on the modelled clock: a late timer is caught up
      // (up to MAX_CATCH_UP_MS) instead of stretching every later step.
      const base = this.continuous ? Math.max(this.nextStepAt, now - MAX_CATCH_UP_MS) : now;
      this.continuous = true;
      this.nextStepAt = base + this.admit() / 1000;
      // Sub-millisecond steps run at once: their cost stays in nextStepAt, so the average rate is still right.
      if (this.nextStepAt - now < 1) this.execute();
      else this.inFlight = true;
    }
    this.kick();
  };

  /** Admits waiting sequences while slots and KV allow; returns the modelled cost of the step in microseconds. */
  private admit(): number {
    const { maxRunningRequests, kvCapacityTokens, prefillUsPerToken, decodeUsPerToken } = this.config;
    let prefillTokens = 0;
    while (this.waiting.length > 0 && this.running.length < maxRunningRequests) {
      const s = this.waiting[0] as SimSequence;
      const need = Math.min(s.contextTokens + (s.spec.maxNewTokens - s.outputIds.length), kvCapacityTokens);
      if (this.kvUsed + need > kvCapacityTokens && this.running.length > 0) break;
      this.waiting.shift();
      s.reserved = need;
      this.kvUsed += need;
      s.state = 'running';
      // A retracted sequence lost its KV: it prefills its whole context again.
      prefillTokens += s.prefilled ? s.contextTokens : s.contextTokens - s.cachedTokens;
      if (!s.prefilled)
        this.queueTime.observe((this.config.now() - (s.queuedAt ?? this.config.now())) / 1000);
      s.prefilled = true;
      this.running.push(s);
    }
    let decoding = 0;
    for (const s of this.running) if (s.spec.maxNewTokens > 0) decoding++;
    this.counters.prefillTokens += prefillTokens;
    this.counters.decodeTokens += decoding;
    return prefillTokens * prefillUsPerToken + (decoding > 0 ? decodeUsPerToken : 0);
  }

  /** Ends a step: every running sequence produces its token. */
  private execute(): void {
    for (let i = 0; i < this.running.length; ) {
      const s = this.running[i] as SimSequence;
      if (s.step()) {
        this.running.splice(i, 1);
        this.release(s);
        this.finish(s);
      } else {
        s.onProgress(s);
        i++;
      }
      const brk = this.brk;
      if (brk !== null && s.spec.rid === brk.rid && s.outputIds.length >= brk.tokens && !this.broken) {
        this.broken = true;
        brk.reached();
      }
    }
    this.counters.steps++;
  }
}
