import type { WeightVersionSpan } from '@uis/sglang-engine';
import type { SimSequence } from './request.ts';

/** Finished requests remembered. */
const KEPT = 100_000;

/** Which weight version produced each output token, per request: [first token index, version] runs, kept for
 * finished requests by rid (the ground truth a test holds the gateway's declared versions to). Bounded. */
export class TokenVersions {
  readonly #finished = new Map<string, Array<[number, string]>>();
  readonly #live = new WeakMap<SimSequence, Array<[number, string]>>();

  /** `reportsSpans`: the simulated release puts SGLang's `weight_versions` on finished answers. */
  constructor(readonly reportsSpans: boolean) {}

  /** Records `version` as the producer of the sequence's newest token (weights change only between steps). */
  note(s: SimSequence, version: string): void {
    const n = s.outputIds.length;
    if (n === 0) return;
    let runs = this.#live.get(s);
    if (runs === undefined) {
      runs = [];
      this.#live.set(s, runs);
    }
    const last = runs[runs.length - 1];
    if (last === undefined || last[1] !== version) runs.push([n - 1, version]);
  }

  /** Keeps a finished sequence's runs under its rid. */
  finish(s: SimSequence): void {
    if (typeof s.spec.rid !== 'string') return;
    this.#finished.set(s.spec.rid, this.#live.get(s) ?? []);
    if (this.#finished.size > KEPT) {
      const oldest = this.#finished.keys().next().value;
      if (oldest !== undefined) this.#finished.delete(oldest);
    }
  }

  /** The runs of a finished request (undefined: an unknown rid). */
  of(rid: string): Array<[number, string]> | undefined {
    return this.#finished.get(rid);
  }

  /**
   * SGLang's `weight_versions` of a finished sequence, as its scheduler computes them (compute_weight_version_spans
   * over the version changes seen while the request lived, then add_weight_versions_to_meta_info): one
   * `{version, start, end}` per version that produced output tokens, in order; a sequence with no output has one
   * empty span of `current`. Undefined: the release reports none, or the sequence is still running (SGLang sets
   * them only on the finished answer, streamed or not).
   */
  spans(s: SimSequence, current: string): WeightVersionSpan[] | undefined {
    if (!this.reportsSpans || s.finishReason === null) return undefined;
    const n = s.outputIds.length;
    const runs = this.#live.get(s);
    if (runs === undefined || runs.length === 0 || n === 0) return [{ version: current, start: 0, end: n }];
    // A stop string trimmed from the output drops the runs past its end, as SGLang drops spans past the count.
    const seen = runs.filter(([start]) => start < n);
    return seen.map(([start, version], i) => ({ version, start, end: seen[i + 1]?.[0] ?? n }));
  }
}
