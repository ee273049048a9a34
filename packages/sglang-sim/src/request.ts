import type { FinishReason, TokenLogprob } from '@uis/sglang-engine';
import { alternatives, extend, sampleNext, tokenLogprob } from './model.ts';
import { EOS_ID, tokenText } from './tokenizer.ts';

/** What a caller asks one sequence to do (already normalised from a /generate item or a chat request). */
export interface SequenceSpec {
  rid: string;
  inputIds: number[];
  maxNewTokens: number;
  minNewTokens: number;
  stop: string[];
  stopTokenIds: number[];
  ignoreEos: boolean;
  noStopTrim: boolean;
  /** 0 = greedy. */
  seedKey: number;
  returnLogprob: boolean;
  /** -1 = output logprobs only. */
  logprobStartLen: number;
  topLogprobsNum: number;
  /** Token ids whose logprobs are reported at every position (SGLang's token_ids_logprob). */
  tokenIdsLogprob: number[];
  returnTextInLogprobs: boolean;
  dpRank: number;
}

export type SequenceState = 'waiting' | 'running' | 'finished';

/** One sequence inside the scheduler; it advances one token per decode step. */
export class SimSequence {
  state: SequenceState = 'waiting';
  readonly outputIds: number[] = [];
  readonly outputLogprobs: number[] = [];
  /** Context hash after every prompt position (index i = after tokens 0..i). */
  private readonly promptCtx: number[];
  private ctx: number;
  text = '';
  finishReason: FinishReason | null = null;
  cachedTokens = 0;
  /** KV tokens reserved while running. */
  reserved = 0;
  /** Prefill is done once; a retracted sequence re-prefills its whole context. */
  prefilled = false;
  /** When it entered the scheduler's waiting queue first (ms), for its queue time. */
  queuedAt: number | null = null;
  readonly createdAt: number;

  constructor(
    readonly spec: SequenceSpec,
    private readonly startCtx: number,
    now: number,
    readonly onProgress: (s: SimSequence) => void,
  ) {
    this.createdAt = now;
    this.promptCtx = new Array(spec.inputIds.length);
    let c = startCtx;
    for (let i = 0; i < spec.inputIds.length; i++) {
      c = extend(c, spec.inputIds[i] as number);
      this.promptCtx[i] = c;
    }
    this.ctx = c;
  }

  /** Context hash of each prompt prefix: the prefix cache keys on these. */
  prefixHashes(): readonly number[] {
    return this.promptCtx;
  }

  get contextTokens(): number {
    return this.spec.inputIds.length + this.outputIds.length;
  }

  /** Produces the next token; returns true when the sequence finished with it. */
  step(): boolean {
    const { spec } = this;
    if (spec.maxNewTokens === 0) {
      this.finishReason = { type: 'length', length: 0 };
      return true;
    }
    const allowEos = !spec.ignoreEos && this.outputIds.length >= spec.minNewTokens;
    const { token, logprob } = sampleNext(this.ctx, spec.seedKey, allowEos);
    this.ctx = extend(this.ctx, token);
    this.outputIds.push(token);
    this.outputLogprobs.push(logprob);
    if (token === EOS_ID) {
      this.finishReason = { type: 'stop', matched: EOS_ID };
      return true;
    }
    if (spec.stopTokenIds.includes(token)) {
      this.finishReason = { type: 'stop', matched: token };
      return true;
    }
    const before = this.text.length;
    this.text += tokenText(token);
    for (const stop of spec.stop) {
      if (stop.length === 0) continue;
      const idx = this.text.indexOf(stop, Math.max(0, before - stop.length + 1));
      if (idx !== -1) {
        if (!spec.noStopTrim) this.text = this.text.slice(0, idx);
        this.finishReason = { type: 'stop', matched: stop };
        return true;
      }
    }
    if (this.outputIds.length >= spec.maxNewTokens) {
      this.finishReason = { type: 'length', length: spec.maxNewTokens };
      return true;
    }
    return false;
  }

  /** Ends the sequence as SGLang's scheduler aborts it: a queued one is answered by the tokenizer manager
   * (`Abort in waiting queue`), a running one finishes with `FINISH_ABORT().to_json()`. */
  abort(): void {
    this.finishReason =
      this.state === 'waiting'
        ? { type: 'abort', message: 'Abort in waiting queue' }
        : { type: 'abort', message: 'Aborted', status_code: null, err_type: null };
  }

  private triple(logprob: number | null, id: number): TokenLogprob {
    return [logprob, id, this.spec.returnTextInLogprobs ? tokenText(id) : null];
  }

  inputTokenLogprobs(): TokenLogprob[] {
    const { inputIds, logprobStartLen } = this.spec;
    if (logprobStartLen < 0) return [];
    const out: TokenLogprob[] = [];
    for (let i = logprobStartLen; i < inputIds.length; i++) {
      const id = inputIds[i] as number;
      const prev = i === 0 ? undefined : this.promptCtx[i - 1];
      out.push(this.triple(prev === undefined ? null : tokenLogprob(prev, id), id));
    }
    return out;
  }

  outputTokenLogprobs(): TokenLogprob[] {
    return this.outputIds.map((id, i) => this.triple(this.outputLogprobs[i] as number, id));
  }

  outputTopLogprobs(): TokenLogprob[][] {
    const k = this.spec.topLogprobsNum;
    const out: TokenLogprob[][] = [];
    let c = this.promptCtx[this.promptCtx.length - 1] ?? this.startCtx;
    for (let i = 0; i < this.outputIds.length; i++) {
      const id = this.outputIds[i] as number;
      out.push(
        alternatives(c, id, this.outputLogprobs[i] as number, k).map((s) => this.triple(s.logprob, s.token)),
      );
      c = extend(c, id);
    }
    return out;
  }

  /** k candidates at each prompt position from logprob_start_len (the actual token first; null at position 0). */
  inputTopLogprobs(): (TokenLogprob[] | null)[] {
    const { inputIds, logprobStartLen, topLogprobsNum } = this.spec;
    if (logprobStartLen < 0) return [];
    const out: (TokenLogprob[] | null)[] = [];
    for (let i = logprobStartLen; i < inputIds.length; i++) {
      const prev = i === 0 ? undefined : this.promptCtx[i - 1];
      const id = inputIds[i] as number;
      out.push(
        prev === undefined
          ? null
          : alternatives(prev, id, tokenLogprob(prev, id), topLogprobsNum).map((a) =>
              this.triple(a.logprob, a.token),
            ),
      );
    }
    return out;
  }

  /** Logprobs of the requested token ids after each prompt position from logprob_start_len (null at position 0). */
  inputTokenIdsLogprobs(): (TokenLogprob[] | null)[] {
    const { inputIds, logprobStartLen, tokenIdsLogprob } = this.spec;
    if (logprobStartLen < 0) return [];
    const out: (TokenLogprob[] | null)[] = [];
    for (let i = logprobStartLen; i < inputIds.length; i++) {
      const prev = i === 0 ? undefined : this.promptCtx[i - 1];
      out.push(
        prev === undefined ? null : tokenIdsLogprob.map((id) => this.triple(tokenLogprob(prev, id), id)),
      );
    }
    return out;
  }

  /** Logprobs of the requested token ids at each output position (the context before that token). */
  outputTokenIdsLogprobs(): TokenLogprob[][] {
    const ids = this.spec.tokenIdsLogprob;
    const out: TokenLogprob[][] = [];
    let c = this.promptCtx[this.promptCtx.length - 1] ?? this.startCtx;
    for (const tok of this.outputIds) {
      const ctx = c;
      out.push(ids.map((id) => this.triple(tokenLogprob(ctx, id), id)));
      c = extend(c, tok);
    }
    return out;
  }
}
