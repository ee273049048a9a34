import type { VersionSpan } from './weight-declaration.ts';

/** An engine's continues after in-place pauses (the manager's live record, read once per event). */
export interface InPlaceResumes {
  count: number;
  to: ReadonlyArray<string | null>;
}

const EVENT_END = Buffer.from('\n\n');
const DATA = Buffer.from('data: ');
const DONE = Buffer.from('data: [DONE]');
const USAGE = Buffer.from('"usage":');
const COMPLETION_TOKENS = Buffer.from('"completion_tokens":');
const CHOICES = Buffer.from('"choices":');
const NULL = Buffer.from('null');
const EMPTY = Buffer.alloc(0);

/**
 * The weights of an OpenAI stream (chat or completions), which no SGLang release says per chunk. The gateway asked
 * the engine for `stream_options.continuous_usage_stats` (SGLang >= 0.5.6), so every chunk carries
 * `usage.completion_tokens`, the output tokens made up to it; the replica's in-place continues say which weights
 * made the tokens relayed after them: a chunk relayed after the n-th continue since the request was picked was
 * made by the version the engine continued with. Each chunk gets `system_fingerprint` (its version), the usage the
 * client did not ask for goes back to `null` (what SGLang sends without it), and an answer made by more than one
 * version gets one event `uis_weight_versions` after `data: [DONE]` (where clients that stop at it never see it)
 * with the whole answer's spans (SGLang's shape), or, when the engine sent no counts (0.5.2) or several choices
 * count their tokens each, its versions in order without the index. Exact when every token made before a switch's
 * pause has reached the gateway before the continue (the pause lasts the whole weight update); the same holds for
 * the `weight_version` SGLang stamps on native chunks (its tokenizer manager's value when the chunk passes).
 */
export class OpenAIStreamVersions {
  #pending: Buffer = EMPTY;
  /** Continues seen so far, and the version of the tokens relayed since the last one. */
  #seen: number;
  #version: string | null;
  /** Output tokens of the last chunk that said (-1: none said). */
  #tokens = -1;
  readonly #runs: Array<{ version: string | null; start: number }>;
  #fingerprint: Buffer;
  /** A chunk of another choice than the first was seen. */
  #several = false;

  constructor(
    /** The client did not ask for `continuous_usage_stats`: the counts are the gateway's, not the client's. */
    private readonly stripUsage: boolean,
    /** The replica's continues; null when the gateway does not know the engine (an SGLang router chose it):
     * the counts are then only taken back out, and nothing is declared that the gateway cannot know. */
    private readonly resumes: (() => InPlaceResumes) | null,
    /** The replica's version and continue count when the request was picked. */
    version: string | null,
    resumesAtPick: number,
  ) {
    this.#seen = resumesAtPick;
    this.#version = version;
    this.#runs = [{ version, start: 0 }];
    this.#fingerprint = resumes === null ? EMPTY : fingerprintOf(version);
  }

  /** The bytes to relay for `chunk` (whole events only; a partial one waits for its end). */
  push(chunk: Buffer): Buffer {
    const buf = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    const out: Buffer[] = [];
    let from = 0;
    for (let end = buf.indexOf(EVENT_END); end !== -1; end = buf.indexOf(EVENT_END, from)) {
      this.#event(buf.subarray(from, end + 2), out);
      from = end + 2;
    }
    this.#pending = from === buf.length ? EMPTY : Buffer.from(buf.subarray(from));
    return out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out);
  }

  /** What is left at the answer's end (an unterminated event, as the engine sent it). */
  end(): Buffer {
    return this.#pending;
  }

  /** The answer's spans (null: the engine sent no token counts, or a version is unknown) and its versions in
   * order. */
  declared(): { version: string | null; spans: VersionSpan[] | null; versions: Array<string | null> } {
    const versions: Array<string | null> = [];
    for (const r of this.#runs) if (versions[versions.length - 1] !== r.version) versions.push(r.version);
    const total = this.#tokens;
    if (total < 0 || this.#several) return { version: this.#version, spans: null, versions };
    const spans: VersionSpan[] = [];
    for (let i = 0; i < this.#runs.length; i++) {
      const r = this.#runs[i] as { version: string | null; start: number };
      const end = Math.min(this.#runs[i + 1]?.start ?? total, total);
      // A version that made no token is left out, as SGLang's compute_weight_version_spans leaves it.
      if (end <= Math.min(r.start, total)) continue;
      if (r.version === null) return { version: this.#version, spans: null, versions };
      const last = spans[spans.length - 1];
      if (last?.version === r.version) last.end = end;
      else spans.push({ version: r.version, start: last?.end ?? 0, end });
    }
    // No output: one empty span of the current version (SGLang's shape for it).
    if (spans.length === 0 && this.#version !== null)
      spans.push({ version: this.#version, start: 0, end: 0 });
    return { version: this.#version, spans, versions };
  }

  #event(ev: Buffer, out: Buffer[]): void {
    if (!startsWith(ev, DATA)) {
      out.push(ev);
      return;
    }
    if (ev[DATA.length] === 0x5b && startsWith(ev, DONE)) {
      out.push(ev);
      const final = this.resumes === null ? undefined : this.#finalEvent();
      if (final !== undefined) out.push(final);
      return;
    }
    // Chunks only (an error event is left as it is): `"choices"` comes before `usage` in SGLang's chunks.
    const choices = ev[DATA.length] === 0x7b ? ev.indexOf(CHOICES) : -1;
    if (choices === -1) {
      out.push(ev);
      return;
    }
    this.#observeResumes();
    // Several choices (`n` > 1, a list of prompts) count their tokens each: one count is no index for them.
    if (!this.#several && !firstChoice(ev, choices + CHOICES.length)) this.#several = true;
    // `system_fingerprint` goes last in a chunk (SGLang's have none): before its closing brace.
    let brace = ev.length - 3;
    while (brace > choices && ev[brace] !== 0x7d) brace--;
    let from = 0;
    const usage = ev.lastIndexOf(USAGE, brace);
    if (usage > choices && ev[usage + USAGE.length] === 0x7b) {
      const open = usage + USAGE.length;
      const close = closingBrace(ev, open);
      const n = close === -1 ? -1 : countIn(ev, open, close);
      if (n >= 0) this.#tokens = n;
      // The final usage chunk (`"choices":[]`) is the client's own (`include_usage`): kept.
      const none = ev[choices + CHOICES.length] === 0x5b && ev[choices + CHOICES.length + 1] === 0x5d;
      if (this.stripUsage && close !== -1 && close < brace && !none) {
        out.push(ev.subarray(0, open), NULL);
        from = close + 1;
      }
    }
    if (brace <= choices) out.push(ev.subarray(from));
    else out.push(ev.subarray(from, brace), this.#fingerprint, ev.subarray(brace));
  }

  /** A continue since the last event: the tokens from here on are the continued version's. */
  #observeResumes(): void {
    if (this.resumes === null) return;
    const r = this.resumes();
    if (r.count === this.#seen) return;
    this.#seen = r.count;
    const version = r.to[r.to.length - 1] ?? null;
    if (version === this.#version) return;
    this.#version = version;
    this.#fingerprint = fingerprintOf(version);
    this.#runs.push({ version, start: Math.max(this.#tokens, 0) });
  }

  /** Only an answer made by more than one version gets the event: any other stream stays as the engine sent it
   * but for its fingerprints. */
  #finalEvent(): Buffer | undefined {
    const d = this.declared();
    if ((d.spans === null ? d.versions : d.spans).length < 2) return undefined;
    const body =
      d.spans === null
        ? { weight_version: d.version, uis_weight_versions: d.versions }
        : { weight_version: d.version, weight_versions: d.spans };
    return Buffer.from(`event: uis_weight_versions\ndata: ${JSON.stringify(body)}\n\n`);
  }
}

const FIRST_CHOICE = Buffer.from('[{"index":0,');
const NO_CHOICE = Buffer.from('[]');

/** Whether the choices at `at` are none or only the first (`[{"index":0,...}]`, SGLang's order). */
function firstChoice(b: Buffer, at: number): boolean {
  return (
    b.compare(FIRST_CHOICE, 0, FIRST_CHOICE.length, at, at + FIRST_CHOICE.length) === 0 ||
    b.compare(NO_CHOICE, 0, NO_CHOICE.length, at, at + NO_CHOICE.length) === 0
  );
}

function startsWith(b: Buffer, prefix: Buffer): boolean {
  return b.length >= prefix.length && b.compare(prefix, 0, prefix.length, 0, prefix.length) === 0;
}

function fingerprintOf(version: string | null): Buffer {
  return version === null ? EMPTY : Buffer.from(`,"system_fingerprint":${JSON.stringify(version)}`);
}

/** The `}` closing the object that opens at `open` (usage holds numbers, null and objects of them). */
function closingBrace(b: Buffer, open: number): number {
  let depth = 0;
  for (let i = open; i < b.length; i++) {
    const c = b[i];
    if (c === 0x7b) depth++;
    else if (c === 0x7d && --depth === 0) return i;
    else if (c === 0x22 && depth === 0) return -1;
  }
  return -1;
}

/** `completion_tokens` of the usage object in [open, close] (-1: absent or not a count). */
function countIn(b: Buffer, open: number, close: number): number {
  const at = b.indexOf(COMPLETION_TOKENS, open);
  if (at === -1 || at > close) return -1;
  let n = 0;
  let i = at + COMPLETION_TOKENS.length;
  while (b[i] === 0x20) i++;
  const first = i;
  for (; b[i]! >= 0x30 && b[i]! <= 0x39; i++) n = n * 10 + (b[i]! - 0x30);
  return i === first ? -1 : n;
}
