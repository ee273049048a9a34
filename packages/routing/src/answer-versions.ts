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
 * The spans of a streamed `/generate` answer, chunk by chunk (each chunk repeats the output so far): a chunk's new
 * tokens are recorded under its `weight_version`, the engine's when it sent them (exact with one chunk per token,
 * SGLang's default `--stream-interval 1`), so a stream across an in-place switch is split where the version
 * changed even from a release without spans; the finished chunk's `weight_versions`, when given, replace them.
 */
export class StreamVersionSpans {
  #spans: TokenVersionSpan[] = [];
  #seen = 0;

  add(chunk: unknown): void {
    if (!isObj(chunk) || !isObj(chunk.meta_info)) return;
    const meta = chunk.meta_info;
    const produced = producedOf(chunk, meta);
    if (Array.isArray(meta.weight_versions) && meta.weight_versions.length > 0) {
      this.#spans = answerVersionSpans(chunk);
    } else if (produced > this.#seen) {
      const version = typeof meta.weight_version === 'string' ? meta.weight_version : null;
      const last = this.#spans[this.#spans.length - 1];
      if (last !== undefined && last.version === version && last.end === this.#seen) last.end = produced;
      else this.#spans.push({ version, start: this.#seen, end: produced });
    }
    this.#seen = produced;
  }

  get spans(): TokenVersionSpan[] {
    return this.#spans.map((s) => ({ ...s }));
  }
}
