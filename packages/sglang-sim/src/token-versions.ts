import type { SimSequence } from './request.ts';

/** Finished requests remembered. */
const KEPT = 100_000;

/** Which weight version produced each output token, per request: [first token index, version] runs, kept for
 * finished requests by rid (the ground truth a test holds the gateway's declared versions to). Bounded. */
export class TokenVersions {
  readonly #finished = new Map<string, Array<[number, string]>>();
  readonly #live = new WeakMap<SimSequence, Array<[number, string]>>();

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
}
