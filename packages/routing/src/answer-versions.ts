/** Output tokens [start, end) of an answer were produced by weight `version` (null: not known). */
export interface TokenVersionSpan {
  version: string | null;
  start: number;
  end: number;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function isSpan(s: unknown): s is { version: string; start: number; end: number } {
  return isObj(s) && typeof s.version === 'string' && Number.isInteger(s.start) && Number.isInteger(s.end);
}

/** The output token count of a /generate answer (meta_info.completion_tokens, else its output_ids) or an OpenAI
 * answer (usage.completion_tokens). */
function producedOf(answer: Obj, meta: Obj): number {
  if (typeof meta.completion_tokens === 'number') return meta.completion_tokens;
  if (Array.isArray(answer.output_ids)) return answer.output_ids.length;
  const usage = answer.usage;
  return isObj(usage) && typeof usage.completion_tokens === 'number' ? usage.completion_tokens : 0;
}

/**
 * Which weight version produced which output tokens of one answer: a /generate answer or a stream's finished chunk
 * (`meta_info`), or an OpenAI answer (`metadata`). SGLang's `weight_versions` when the engine reports them (from
 * 0.5.19, on every finished answer; split at the output token where an in-place switch changed the weights);
 * one span of unknown version (null) when the gateway says the answer ran on several versions without saying where
 * (`uis_weight_versions`: an older release across an in-place switch); else one span of `weight_version`. The
 * Python client's `uis_client.rollout` reads answers the same way.
 */
export function answerVersionSpans(answer: unknown): TokenVersionSpan[] {
  if (!isObj(answer)) return [];
  const meta = isObj(answer.meta_info) ? answer.meta_info : isObj(answer.metadata) ? answer.metadata : {};
  const produced = producedOf(answer, meta);
  const given = meta.weight_versions;
  if (Array.isArray(given) && given.length > 0 && given.every(isSpan))
    return given.map((s) => ({ version: s.version, start: s.start, end: Math.min(s.end, produced) }));
  const unsplit = meta.uis_weight_versions;
  if (Array.isArray(unsplit) && unsplit.length > 1) return [{ version: null, start: 0, end: produced }];
  const version = typeof meta.weight_version === 'string' ? meta.weight_version : null;
  return [{ version, start: 0, end: produced }];
}

/**
 * The spans of a streamed answer, event by event: give `add` the data of every event up to the stream's end (not
 * only up to `[DONE]`: the uis gateway sends its spans after it).
 * - `/generate` chunks (each repeats the output so far): a chunk's new tokens are recorded under its
 *   `weight_version`, the engine's when it sent them (exact with one chunk per token, SGLang's default
 *   `--stream-interval 1`), so a stream across an in-place switch is split where the version changed even from a
 *   release without spans; the finished chunk's `weight_versions`, when given, replace them.
 * - OpenAI chunks (chat or completions, through the gateway): a chunk's tokens are recorded under its
 *   `system_fingerprint`, the version the gateway says made them; counted by `usage.completion_tokens` when the
 *   client asked for `stream_options.continuous_usage_stats`, else one per chunk with text. The event
 *   `uis_weight_versions` the gateway sends after `[DONE]` when several versions made the answer replaces them
 *   with the engine's spans, or, when it names the versions without an index (SGLang 0.5.2, `n` > 1), makes the
 *   answer one span of unknown version (null). Several fingerprints without that event and without counts are
 *   also one unknown span: a count of chunks is no token index.
 */
export class StreamVersionSpans {
  #spans: TokenVersionSpan[] = [];
  #seen = 0;
  /** The answer's spans from the gateway's final event (null: none came). */
  #final: TokenVersionSpan[] | null = null;
  /** OpenAI chunks came without token counts. */
  #uncounted = false;

  add(chunk: unknown): void {
    if (!isObj(chunk)) return;
    if (Array.isArray(chunk.choices)) this.#openAI(chunk, chunk.choices);
    else if (isObj(chunk.meta_info)) this.#generate(chunk, chunk.meta_info);
    else this.#finalEvent(chunk);
  }

  get spans(): TokenVersionSpan[] {
    if (this.#final !== null) return this.#final.map((s) => ({ ...s }));
    if (this.#uncounted && new Set(this.#spans.map((s) => s.version)).size > 1)
      return [{ version: null, start: 0, end: this.#seen }];
    return this.#spans.map((s) => ({ ...s }));
  }

  #generate(chunk: Obj, meta: Obj): void {
    const produced = producedOf(chunk, meta);
    if (Array.isArray(meta.weight_versions) && meta.weight_versions.length > 0) {
      this.#spans = answerVersionSpans(chunk);
    } else this.#record(typeof meta.weight_version === 'string' ? meta.weight_version : null, produced);
    this.#seen = produced;
  }

  #record(version: string | null, produced: number): void {
    if (produced <= this.#seen) return;
    const last = this.#spans[this.#spans.length - 1];
    if (last !== undefined && last.version === version && last.end === this.#seen) last.end = produced;
    else this.#spans.push({ version, start: this.#seen, end: produced });
  }

  #openAI(chunk: Obj, choices: unknown[]): void {
    const usage = chunk.usage;
    let produced = this.#seen;
    if (isObj(usage) && typeof usage.completion_tokens === 'number') produced = usage.completion_tokens;
    else if (choices.some(hasText)) {
      this.#uncounted = true;
      produced++;
    }
    this.#record(typeof chunk.system_fingerprint === 'string' ? chunk.system_fingerprint : null, produced);
    this.#seen = Math.max(this.#seen, produced);
  }

  /** `{weight_version, weight_versions}` or `{weight_version, uis_weight_versions}`, the gateway's last event. */
  #finalEvent(event: Obj): void {
    const given = event.weight_versions;
    if (Array.isArray(given) && given.length > 0 && given.every(isSpan))
      this.#final = given.map((s) => ({ version: s.version, start: s.start, end: s.end }));
    else if (Array.isArray(event.uis_weight_versions) && event.uis_weight_versions.length > 1)
      this.#final = [{ version: null, start: 0, end: this.#seen }];
  }
}

/** A first choice's chunk with output text (chat `delta.content` or completions `text`); the role chunk has none. */
function hasText(c: unknown): boolean {
  if (!isObj(c) || (c.index !== undefined && c.index !== 0)) return false;
  const text = isObj(c.delta) ? c.delta.content : c.text;
  return typeof text === 'string' && text !== '';
}
