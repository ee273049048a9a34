import { isEngineError, type SGLangClient } from '@uis/sglang-engine';
import { type Clock, type Logger, silentLogger, systemClock, UisError } from '@uis/spec';
import type {
  BatchInfo,
  BatchStore,
  GenrmInput,
  GenrmOutput,
  SampleRow,
  TeacherInput,
  TeacherOutput,
} from './batch-store.ts';
import type { EventLog } from './event-log.ts';
import { errorMessage } from './runtime.ts';
import { judgementScore, type ScoreParser } from './score-parsers.ts';

/** A scorer replica the runner may call: the model name engines answer to and its client. */
export interface ScoringTarget {
  engineId: string;
  servedModelName: string;
  client: Pick<SGLangClient, 'generate' | 'chatCompletions'>;
}

export interface BatchRunnerOptions {
  store: BatchStore;
  /** The scorer's eligible replicas at run time (read when a run starts). */
  targets: (batch: BatchInfo) => ScoringTarget[];
  /** Why a batch has no eligible replica (e.g. its model is held by an operator), for the error. */
  whyNoTarget?: (batch: BatchInfo) => string | undefined;
  /** Requests in flight per run. Default 16. */
  concurrency?: number;
  scoreParser?: ScoreParser;
  /** GenRM sampling defaults (Relax: temperature 0.2, top_p 1, top_k -1, 1024 new tokens); per-sample
   * `sampling_params` override them. */
  genrmSampling?: Record<string, unknown>;
  /** Attempts per sample across replicas before the batch fails. Default 2. */
  maxAttempts?: number;
  /** Per-request deadline. Default 10 min. */
  requestTimeoutMs?: number;
  logger?: Logger;
  /** Where each run is recorded as a timed `batch.run` audit event (its outcome, counts, and the phase it ran in):
   * the console's journal and the traces read it. */
  events?: Pick<EventLog, 'append'>;
  /** Time source of run durations. */
  clock?: Clock;
}

export interface BatchRunReport {
  batch: BatchInfo;
  /** Samples scored in this run. */
  scored: number;
  /** Samples whose result was already staged by an interrupted earlier run. */
  reused: number;
}

/** The activation group and phase whose work a run is (absent: a batch of a role without a defer schedule). */
export interface BatchRunPlace {
  group: string;
  phase: string;
}

/** How a run ended: committed, failed (a sample's own fault), requeued (engine fault, no replica), interrupted. */
type RunOutcome = 'committed' | 'failed' | 'requeued' | 'interrupted';

const DEFAULT_GENRM_SAMPLING = { temperature: 0.2, top_p: 1.0, top_k: -1, max_new_tokens: 1024 };

/** Runs a sealed batch against the scorer with bounded concurrency, validates every result, stages each one
 * durably, and commits the batch whole, or fails it whole with the reason. */
export class BatchRunner {
  private readonly concurrency: number;
  private readonly parse: ScoreParser;
  private readonly maxAttempts: number;
  private readonly logger: Logger;
  private readonly clock: Clock;

  constructor(private readonly opts: BatchRunnerOptions) {
    this.concurrency = Math.max(1, opts.concurrency ?? 16);
    this.parse = opts.scoreParser ?? judgementScore;
    this.maxAttempts = Math.max(1, opts.maxAttempts ?? 2);
    this.logger = opts.logger ?? silentLogger;
    this.clock = opts.clock ?? systemClock;
  }

  /** Runs every sealed batch of `role`, oldest first. The first failure stops the phase (and is thrown). */
  async runPending(role: string, signal?: AbortSignal, place?: BatchRunPlace): Promise<BatchRunReport[]> {
    const out: BatchRunReport[] = [];
    for (const b of this.opts.store.list({ state: 'sealed', role }))
      out.push(await this.run(b.id, signal, place));
    return out;
  }

  async run(id: string, signal?: AbortSignal, place?: BatchRunPlace): Promise<BatchRunReport> {
    const store = this.opts.store;
    const before = store.get(id);
    const todo = store.beginRun(id);
    const batch = store.get(id);
    const reused = batch.results;
    const targets = this.opts.targets(batch);
    const started = this.clock.now();
    const record = (outcome: RunOutcome, error?: string) =>
      this.record(batch, place, { outcome, started, reused, error });
    const controller = new AbortController();
    const onAbort = () => controller.abort(signal?.reason);
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await this.scoreAll(batch, todo, targets, controller, signal);
      const committed = store.commit(id);
      this.logger.info({ batch: id, samples: committed.samples, reused }, 'batch committed');
      record('committed');
      return { batch: committed, scored: todo.length, reused };
    } catch (e) {
      // Cut short by the caller (the service stopping): the reason is the caller's, not the failed request's.
      const interrupted = signal?.aborted === true;
      const reason = interrupted ? `run interrupted: ${errorMessage(signal.reason)}` : errorMessage(e);
      const outcome = this.settle(batch, before.state, e, interrupted, reason);
      record(outcome, reason);
      if (interrupted && signal.reason instanceof UisError) throw signal.reason;
      throw e instanceof UisError
        ? e
        : new UisError({
            code: 'batch_failed',
            message: `batch ${id} failed: ${reason}`,
            cause: e,
          });
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Scores `todo` with `concurrency` workers over the batch's targets; the first sample that fails on every attempt
   * stops the others and is thrown as `batch_sample_failed` (its cause the last attempt's error). */
  private async scoreAll(
    batch: BatchInfo,
    todo: SampleRow[],
    targets: ScoringTarget[],
    controller: AbortController,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    if (targets.length === 0) {
      const why = this.opts.whyNoTarget?.(batch);
      throw new UisError({
        code: 'no_scorer_replica',
        message: `no eligible ${batch.role} replica to run batch ${batch.id}${why === undefined ? '' : `: ${why}`}`,
      });
    }
    let next = 0;
    let rr = 0;
    // The first failure is the reason; the aborts it causes in the other workers are not.
    let firstError: UisError | undefined;
    const worker = async () => {
      while (!controller.signal.aborted) {
        const sample = todo[next++];
        if (!sample) return;
        let lastErr: unknown;
        let done = false;
        for (let attempt = 0; attempt < this.maxAttempts && !done; attempt++) {
          const target = targets[rr++ % targets.length] as ScoringTarget;
          try {
            const output =
              batch.kind === 'genrm_score'
                ? await this.scoreGenrm(target, sample as SampleRow<GenrmInput>, controller.signal)
                : await this.scoreTeacher(target, sample as SampleRow<TeacherInput>, controller.signal);
            this.opts.store.stageResult(batch.id, sample.idx, output);
            done = true;
          } catch (e) {
            lastErr = e;
            // A fault of the sample, not of the replica: another replica would answer the same.
            if (isSampleFault(e)) break;
          }
        }
        if (done) continue;
        if (controller.signal.aborted && firstError !== undefined) return;
        firstError ??= new UisError({
          code: 'batch_sample_failed',
          path: `samples[${sample.idx}]`,
          message: `sample ${sample.sample_id}: ${errorMessage(lastErr)}`,
          cause: lastErr,
        });
        controller.abort();
        throw firstError;
      }
      if (controller.signal.aborted && signal?.aborted) throw new Error('batch run aborted');
    };
    const results = await Promise.allSettled(
      Array.from({ length: Math.min(this.concurrency, todo.length) }, worker),
    );
    const failure = results.find((r) => r.status === 'rejected');
    if (failure) throw firstError ?? failure.reason;
  }

  /** After a failed run: only a sample fault fails the batch (a rerun cannot change it, and a requeued batch would
   * block every later scorer phase). Engine faults (unreachable, timeouts, bad answers, no replica) and
   * interruptions leave it sealed with its staged results for the next run. */
  private settle(
    batch: BatchInfo,
    previous: string,
    e: unknown,
    interrupted: boolean,
    reason: string,
  ): RunOutcome {
    const id = batch.id;
    const sampleFault =
      !interrupted && e instanceof UisError && e.code === 'batch_sample_failed' && isSampleFault(e.cause);
    try {
      if (sampleFault) this.opts.store.fail(id, reason);
      else this.opts.store.requeue(id, reason);
    } catch {
      // Already final (e.g. committed by nobody else): keep the original error.
    }
    // A failed batch needs the operator; a requeued one runs again in the next scorer phase (a stop that cuts a run
    // short lands here too).
    if (sampleFault) {
      this.logger.error({ batch: id, previous, reason }, 'batch failed');
      return 'failed';
    }
    if (interrupted) {
      this.logger.info(
        { batch: id, previous, reason, requeued: true },
        'batch run interrupted; batch requeued',
      );
      return 'interrupted';
    }
    this.logger.warn({ batch: id, previous, reason, requeued: true }, 'batch run failed; batch requeued');
    return 'requeued';
  }

  /** The run's timed audit record (bounded: counts and a shortened reason, never the samples). */
  private record(
    batch: BatchInfo,
    place: BatchRunPlace | undefined,
    run: { outcome: RunOutcome; started: number; reused: number; error?: string | undefined },
  ): void {
    const events = this.opts.events;
    if (events === undefined) return;
    try {
      this.appendRun(events, batch, place, run);
    } catch (e) {
      // The record is for people reading the journal: it never changes how the run ended.
      this.logger.warn({ batch: batch.id, err: errorMessage(e) }, 'batch run not recorded');
    }
  }

  private appendRun(
    events: Pick<EventLog, 'append'>,
    batch: BatchInfo,
    place: BatchRunPlace | undefined,
    run: { outcome: RunOutcome; started: number; reused: number; error?: string | undefined },
  ): void {
    events.append({
      kind: 'batch.run',
      subject: batch.id,
      actor: batch.role,
      duration_ms: this.clock.now() - run.started,
      data: {
        kind: batch.kind,
        model: batch.model,
        outcome: run.outcome,
        samples: batch.samples,
        reused: run.reused,
        ...(place === undefined ? {} : { group: place.group, phase: place.phase }),
        ...(run.error === undefined ? {} : { error: run.error.slice(0, 300) }),
      },
    });
  }

  private async scoreGenrm(
    target: ScoringTarget,
    s: SampleRow<GenrmInput>,
    signal: AbortSignal,
  ): Promise<GenrmOutput> {
    const sampling = { ...DEFAULT_GENRM_SAMPLING, ...this.opts.genrmSampling, ...s.input.sampling_params };
    const { max_new_tokens, ...rest } = sampling as Record<string, unknown> & { max_new_tokens?: number };
    const res = await target.client.chatCompletions(
      {
        model: target.servedModelName,
        messages: s.input.messages,
        ...(max_new_tokens === undefined ? {} : { max_tokens: max_new_tokens }),
        ...rest,
      },
      { signal, timeoutMs: this.opts.requestTimeoutMs ?? 600_000 },
    );
    const text = (res.choices[0]?.message.content ?? '').trim();
    const score = this.parse(text);
    if (score === null || !Number.isFinite(score))
      throw new UisError({
        code: 'invalid_result',
        message: `judge answer has no finite score: ${JSON.stringify(text.slice(0, 200))}`,
      });
    return { response: text, score };
  }

  private async scoreTeacher(
    target: ScoringTarget,
    s: SampleRow<TeacherInput>,
    signal: AbortSignal,
  ): Promise<TeacherOutput> {
    const { input_ids, logprob_start_len, response_length } = s.input;
    const res = await target.client.generate(
      {
        input_ids,
        sampling_params: { temperature: 0, max_new_tokens: 0, skip_special_tokens: false },
        return_logprob: true,
        logprob_start_len,
      },
      { signal, timeoutMs: this.opts.requestTimeoutMs ?? 600_000 },
    );
    const got = res.meta_info.input_token_logprobs ?? [];
    const expected = input_ids.length - logprob_start_len;
    const invalid = (message: string) =>
      new UisError({ code: 'invalid_result', message: `teacher logprobs: ${message}` });
    if (got.length !== expected) throw invalid(`expected ${expected} positions, got ${got.length}`);
    const keep = response_length ?? expected;
    const selected = got.slice(expected - keep);
    const logprobs: Array<number | null> = [];
    const tokenIds: number[] = [];
    selected.forEach(([lp, tok], j) => {
      const pos = logprob_start_len + expected - keep + j;
      if (tok !== input_ids[pos])
        throw invalid(`position ${pos} has token ${tok}, input has ${input_ids[pos]}`);
      if (lp === null ? pos !== 0 : !Number.isFinite(lp))
        throw invalid(`position ${pos} has no finite logprob`);
      logprobs.push(lp);
      tokenIds.push(tok);
    });
    return { logprobs, token_ids: tokenIds };
  }
}

/** The sample's own fault, whichever replica answers: an invalid result, or the engine refusing the request as
 * such (SGLang answers 400 to a prompt over the context length or to bad sampling params, 413/422 alike). */
function isSampleFault(e: unknown): boolean {
  if (e instanceof UisError && e.code === 'invalid_result') return true;
  return isEngineError(e, 'engine_http_error') && [400, 413, 422].includes(e.engineStatus ?? 0);
}
