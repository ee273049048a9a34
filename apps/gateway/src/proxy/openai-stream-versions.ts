import { ChunkedScanner } from './upstream/http1.ts';
import type { VersionSpan } from './weight-declaration.ts';

/** An engine's continues after in-place pauses (the manager's live record, read once per event). */
export interface InPlaceResumes {
  count: number;
  to: ReadonlyArray<string | null>;
}

const HEX_DIGITS = Buffer.from('0123456789abcdef');
const DATA = Buffer.from('data: ');
const DONE = Buffer.from('data: [DONE]');
const USAGE = Buffer.from('"usage":');
const COMPLETION_TOKENS = Buffer.from('"completion_tokens":');
const CHOICES = Buffer.from('"choices":');
const NULL = Buffer.from('null');
const EMPTY = Buffer.alloc(0);
/** Only the first choice (`[{"index":0,...}]`, SGLang's order), or none. */
const FIRST_CHOICE = Buffer.from('[{"index":0,');
const NO_CHOICE = Buffer.from('[]');
const LAST_CHUNK = Buffer.from('0\r\n\r\n');

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
  /** The bytes to send for the current read, as runs of the engine's bytes and inserted pieces (reused: one
   * output buffer per read is the only allocation). */
  #runs: Buffer[] = [];
  #runStart: number[] = [];
  #runEnd: number[] = [];
  #count = 0;
  #bytes = 0;
  /** Set when the input is the engine's chunked body (see `reframe`). */
  #unframe: ChunkedScanner | undefined;
  readonly #take = (slice: Buffer) => this.#events(slice);
  /** Continues seen so far, and the version of the tokens relayed since the last one. */
  #seen: number;
  #version: string | null;
  /** Output tokens of the last chunk that said (-1: none said). */
  #tokens = -1;
  readonly #versionRuns: Array<{ version: string | null; start: number }>;
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
    this.#versionRuns = [{ version, start: 0 }];
    this.#fingerprint = resumes === null ? EMPTY : fingerprintOf(version);
  }

  /**
   * From now on `push` takes the engine's chunked body as read (its framing already checked by the engine client)
   * and returns one chunk per read with the rewritten events, and `end` the last chunk: the relay then writes each
   * read once, straight on the client socket, as it relays an unedited stream.
   */
  reframe(): void {
    this.#unframe = new ChunkedScanner();
  }

  /** The bytes to relay for `chunk` (whole events only; a partial one waits for its end). */
  push(chunk: Buffer): Buffer {
    const unframe = this.#unframe;
    if (unframe === undefined) this.#events(chunk);
    else unframe.scan(chunk, 0, this.#take);
    return this.#output(unframe !== undefined);
  }

  /** What is left at the answer's end (an unterminated event, as the engine sent it; reframed: and the last
   * chunk). */
  end(): Buffer {
    if (this.#unframe === undefined) return this.#pending;
    if (this.#pending.length > 0) this.#run(this.#pending, 0, this.#pending.length);
    this.#pending = EMPTY;
    this.#run(LAST_CHUNK, 0, LAST_CHUNK.length);
    return this.#output(false);
  }

  /** Splits `data` into events (an event split across reads waits in `#pending`, copied: it outlives the read). */
  #events(data: Buffer): void {
    let buf = data;
    let from = 0;
    // Where the next event end can be: an unfinished event has none before its last byte.
    let search = 0;
    if (this.#pending.length > 0) {
      search = this.#pending.length - 1;
      buf = Buffer.concat([this.#pending, data]);
    }
    for (let end = eventEnd(buf, search); end !== -1; end = eventEnd(buf, from)) {
      this.#event(buf, from, end + 2);
      from = end + 2;
    }
    this.#pending = from === buf.length ? EMPTY : Buffer.from(buf.subarray(from));
  }

  /** Bytes `[start, end)` of `buf` go out next. */
  #run(buf: Buffer, start: number, end: number): void {
    if (end === start) return;
    const i = this.#count++;
    this.#runs[i] = buf;
    this.#runStart[i] = start;
    this.#runEnd[i] = end;
    this.#bytes += end - start;
  }

  /** The runs gathered since the last call, in one buffer (`framed`: as one chunk). */
  #output(framed: boolean): Buffer {
    const count = this.#count;
    if (count === 0) return EMPTY;
    const bytes = this.#bytes;
    let digits = 0;
    if (framed) for (let n = bytes; n > 0; n >>>= 4) digits++;
    const out = Buffer.allocUnsafe(framed ? digits + bytes + 4 : bytes);
    let at = 0;
    if (framed) {
      for (let i = digits - 1, n = bytes; i >= 0; i--, n >>>= 4) out[i] = HEX_DIGITS[n & 15]!;
      at = digits;
      out[at++] = 0x0d;
      out[at++] = 0x0a;
    }
    const runs = this.#runs;
    for (let i = 0; i < count; i++) {
      const run = runs[i]!;
      const start = this.#runStart[i]!;
      const end = this.#runEnd[i]!;
      // Short runs (the fingerprint, `null`, a closing brace) by hand: a copy call makes a view of its own.
      if (end - start > 64) at += run.copy(out, at, start, end);
      else for (let j = start; j < end; j++) out[at++] = run[j]!;
      runs[i] = EMPTY; // the read is not kept past its turn
    }
    if (framed) {
      out[at++] = 0x0d;
      out[at] = 0x0a;
    }
    this.#count = 0;
    this.#bytes = 0;
    return out;
  }

  /** The answer's spans (null: the engine sent no token counts, or a version is unknown) and its versions in
   * order. */
  declared(): { version: string | null; spans: VersionSpan[] | null; versions: Array<string | null> } {
    const versions: Array<string | null> = [];
    for (const r of this.#versionRuns)
      if (versions[versions.length - 1] !== r.version) versions.push(r.version);
    const total = this.#tokens;
    if (total < 0 || this.#several) return { version: this.#version, spans: null, versions };
    const spans: VersionSpan[] = [];
    for (let i = 0; i < this.#versionRuns.length; i++) {
      const r = this.#versionRuns[i] as { version: string | null; start: number };
      const end = Math.min(this.#versionRuns[i + 1]?.start ?? total, total);
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

  /** The event at `[s, e)` of `b` (its `\n\n` included) goes out, rewritten when it is a chunk. */
  #event(b: Buffer, s: number, e: number): void {
    if (!matchAt(b, s, e, DATA)) {
      this.#run(b, s, e);
      return;
    }
    const first = b[s + DATA.length];
    if (first === 0x5b && matchAt(b, s, e, DONE)) {
      this.#run(b, s, e);
      const final = this.resumes === null ? undefined : this.#finalEvent();
      if (final !== undefined) this.#run(final, 0, final.length);
      return;
    }
    // Chunks only (an error event is left as it is): `"choices"` comes before `usage` in SGLang's chunks.
    const choices = first === 0x7b ? find(b, CHOICES, s, e) : -1;
    if (choices === -1) {
      this.#run(b, s, e);
      return;
    }
    this.#observeResumes();
    const list = choices + CHOICES.length;
    // Several choices (`n` > 1, a list of prompts) count their tokens each: one count is no index for them.
    if (!this.#several && !matchAt(b, list, e, FIRST_CHOICE) && !matchAt(b, list, e, NO_CHOICE))
      this.#several = true;
    // `system_fingerprint` goes last in a chunk (SGLang's have none): before its closing brace.
    let brace = e - 3;
    while (brace > choices && b[brace] !== 0x7d) brace--;
    let from = s;
    // SGLang's usage is a chunk's last member: its object ends just before the chunk's closing brace, and is
    // found back from there in one pass.
    let open = -1;
    let close = -1;
    if (b[brace - 1] === 0x7d) {
      open = openingBrace(b, brace - 1, choices);
      if (open !== -1 && matchAt(b, open - USAGE.length, open, USAGE)) close = brace - 1;
      else open = -1;
    }
    if (open === -1) {
      // Elsewhere, or null: the chunk's last `"usage":`.
      const usage = findLast(b, USAGE, brace, choices + 1);
      if (usage !== -1 && b[usage + USAGE.length] === 0x7b) {
        open = usage + USAGE.length;
        close = closingBrace(b, open, e);
      }
    }
    if (open !== -1) {
      const n = close === -1 ? -1 : countIn(b, open, close);
      if (n >= 0) this.#tokens = n;
      // The final usage chunk (`"choices":[]`) is the client's own (`include_usage`): kept.
      if (this.stripUsage && close !== -1 && close < brace && !matchAt(b, list, e, NO_CHOICE)) {
        this.#run(b, s, open);
        this.#run(NULL, 0, NULL.length);
        from = close + 1;
      }
    }
    if (brace <= choices) {
      this.#run(b, from, e);
      return;
    }
    this.#run(b, from, brace);
    this.#run(this.#fingerprint, 0, this.#fingerprint.length);
    this.#run(b, brace, e);
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
    this.#versionRuns.push({ version, start: Math.max(this.#tokens, 0) });
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

/** Offset of the `\n\n` ending the next event from `from`, or -1 (a one-byte search finds each LF quickly). */
function eventEnd(b: Buffer, from: number): number {
  for (let i = b.indexOf(0x0a, from); i !== -1; i = b.indexOf(0x0a, i + 1)) if (b[i + 1] === 0x0a) return i;
  return -1;
}

/** Offset of `key` (a quoted name) within `[from, end)`, or -1. A byte loop: `Buffer.indexOf` with a Buffer
 * needle sets a search up in C++ on every call, which costs more than this loop over a whole event. */
function find(b: Buffer, key: Buffer, from: number, end: number): number {
  const second = key[1];
  for (let i = from, last = end - key.length; i <= last; i++)
    if (b[i] === 0x22 && b[i + 1] === second && matchAt(b, i, end, key)) return i;
  return -1;
}

/** Offset of the last `key` starting at or before `from` and not before `min`, or -1 (as `find`, backwards). */
function findLast(b: Buffer, key: Buffer, from: number, min: number): number {
  const second = key[1];
  for (let i = from; i >= min; i--)
    if (b[i] === 0x22 && b[i + 1] === second && matchAt(b, i, b.length, key)) return i;
  return -1;
}

/** Whether `pattern` is at `at` in `b`, within `[at, end)` (short patterns: a byte loop, no call into C++). */
function matchAt(b: Buffer, at: number, end: number, pattern: Buffer): boolean {
  const n = pattern.length;
  if (at + n > end) return false;
  for (let i = 0; i < n; i++) if (b[at + i] !== pattern[i]) return false;
  return true;
}

function fingerprintOf(version: string | null): Buffer {
  return version === null ? EMPTY : Buffer.from(`,"system_fingerprint":${JSON.stringify(version)}`);
}

/** The `{` after `min` opening the object that `}` at `close` ends, or -1 (backwards, as `closingBrace`). */
function openingBrace(b: Buffer, close: number, min: number): number {
  let depth = 0;
  for (let i = close; i > min; i--) {
    const c = b[i];
    if (c === 0x7d) depth++;
    else if (c === 0x7b && --depth === 0) return i;
  }
  return -1;
}

/** The `}` before `end` closing the object that opens at `open` (usage holds numbers, null and objects of them). */
function closingBrace(b: Buffer, open: number, end: number): number {
  let depth = 0;
  for (let i = open; i < end; i++) {
    const c = b[i];
    if (c === 0x7b) depth++;
    else if (c === 0x7d && --depth === 0) return i;
    else if (c === 0x22 && depth === 0) return -1;
  }
  return -1;
}

/** `completion_tokens` of the usage object in [open, close] (-1: absent or not a count). */
function countIn(b: Buffer, open: number, close: number): number {
  const at = find(b, COMPLETION_TOKENS, open, close);
  if (at === -1) return -1;
  let n = 0;
  let i = at + COMPLETION_TOKENS.length;
  while (b[i] === 0x20) i++;
  const first = i;
  for (; b[i]! >= 0x30 && b[i]! <= 0x39; i++) n = n * 10 + (b[i]! - 0x30);
  return i === first ? -1 : n;
}
