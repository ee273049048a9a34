import type { OutgoingHttpHeader } from 'node:http';

/** What an answer says about the weights that produced it: the version of its last token and, when the request
 * was running on its replica while in-place switches changed its weights, the versions it ran on before. */
export interface WeightDeclaration {
  weightVersion: string | null;
  /** The versions the replica served before each in-place switch the request was in flight across, oldest first. */
  earlier: ReadonlyArray<string | null>;
}

/** One span of SGLang's `weight_versions`: output tokens [start, end) came from `version`. */
export interface VersionSpan {
  version: string;
  start: number;
  end: number;
}

/** What the engine's answer says of its weights: the version of its last token, SGLang's spans when it sent them
 * (SGLang >= 0.5.19 on every finished answer), and where the version field ends (to insert after it). */
export interface AnswerVersions {
  version: string | null;
  spans: VersionSpan[] | null;
  /** Byte offset just after the read field's value (0: no field read). */
  end: number;
}

const KEY = Buffer.from('"weight_version');
const FINGERPRINT = Buffer.from('"system_fingerprint":');
const NONE: AnswerVersions = { version: null, spans: null, end: 0 };

/**
 * Reads an engine answer's weights with one backward byte search, no parse of the answer: SGLang stamps
 * `meta_info.weight_version` (OpenAI answers: `metadata.weight_version`) with the version of the final tokens and,
 * from 0.5.19, adds `weight_versions` after it (add_weight_versions_to_meta_info), so the last `"weight_version`
 * is the spans when the engine sent them. Only the spans' own array is parsed. The last occurrence is the
 * answer's own (a batch answers one per prompt).
 */
export function readAnswerVersions(body: Buffer): AnswerVersions {
  const at = lastKey(body);
  if (at === -1) return NONE;
  let i = at + KEY.length;
  const spans = body[i] === 0x73; // "weight_versions"
  if (spans) i++;
  if (body[i] !== 0x22 || body[i + 1] !== 0x3a) return NONE;
  i += 2;
  while (body[i] === 0x20) i++;
  if (spans) return spansAt(body, i);
  if (body[i] !== 0x22) return NONE;
  const end = body.indexOf(0x22, i + 1);
  if (end === -1) return NONE;
  const v = body.toString('utf8', i + 1, end);
  return v.includes('\\') ? NONE : { version: v, spans: null, end: end + 1 };
}

function spansAt(body: Buffer, i: number): AnswerVersions {
  if (body[i] !== 0x5b) return NONE;
  const quick = quickSpans(body, i);
  if (quick !== undefined) return quick;
  // A span holds no array, so the first ']' closes the list (a version with a ']' in it fails the parse below).
  const close = body.indexOf(0x5d, i);
  if (close === -1) return NONE;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8', i, close + 1));
  } catch {
    return NONE;
  }
  if (!Array.isArray(parsed) || parsed.length === 0 || !parsed.every(isSpan)) return NONE;
  const spans = parsed as VersionSpan[];
  return { version: (spans[spans.length - 1] as VersionSpan).version, spans, end: close + 1 };
}

/** Bytes of `"version"`, `"start"`, `"end"` after their opening quote (what SGLang writes in each span). */
const VERSION = Buffer.from('version"');
const START = Buffer.from('start"');
const END = Buffer.from('end"');

/** Where SGLang puts the field: at the answer's end (meta_info is its last key). */
const NEAR_END_BYTES = 256;

/** `body.lastIndexOf(KEY)`: the last bytes in a byte loop (the field is there, and it spares a call into C++
 * per answer), the rest, if the key is not among them, by the search. */
function lastKey(body: Buffer): number {
  const near = Math.max(0, body.length - NEAR_END_BYTES);
  for (let at = body.length - KEY.length; at >= near; at--)
    if (body[at] === 0x22 && keyIs(body, at, KEY)) return at;
  return near === 0 ? -1 : body.lastIndexOf(KEY, near - 1);
}

/** The last version read, as bytes and text: a replica serves one version for many answers (no string made
 * per answer). */
const lastVersion = Buffer.alloc(64);
let lastVersionLength = -1;
let lastVersionText = '';

function versionText(body: Buffer, from: number, to: number): string {
  const n = to - from;
  if (n === lastVersionLength) {
    let k = 0;
    while (k < n && body[from + k] === lastVersion[k]) k++;
    if (k === n) return lastVersionText;
  }
  const text = body.toString('utf8', from, to);
  if (n <= lastVersion.length) {
    body.copy(lastVersion, 0, from, to);
    lastVersionLength = n;
    lastVersionText = text;
  }
  return text;
}

const isWs = (c: number | undefined) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

function keyIs(body: Buffer, at: number, key: Buffer): boolean {
  for (let k = 0; k < key.length; k++) if (body[at + k] !== key[k]) return false;
  return true;
}

/**
 * The spans list as SGLang writes it (`[{"version": "v", "start": 0, "end": 8}, ...]`: each span exactly those
 * three keys, plain digits, versions without escapes), read byte by byte with no parse and no intermediate text:
 * the answer of every sized request from SGLang >= 0.5.19 has one. Anything else (an escape, another key, a
 * repeat, a sign or fraction) is undefined, and the JSON parse above decides; a ']' inside a version is NONE,
 * as the parse up to the first ']' makes it.
 */
function quickSpans(body: Buffer, i: number): AnswerVersions | undefined {
  const spans: VersionSpan[] = [];
  i++;
  while (isWs(body[i])) i++;
  if (body[i] === 0x5d) return NONE;
  for (;;) {
    if (body[i] !== 0x7b) return undefined;
    i++;
    let version: string | undefined;
    let start = -1;
    let end = -1;
    for (let n = 0; n < 3; n++) {
      while (isWs(body[i])) i++;
      if (body[i] !== 0x22) return undefined;
      i++;
      let which: number;
      if (version === undefined && keyIs(body, i, VERSION)) which = 0;
      else if (start < 0 && keyIs(body, i, START)) which = 1;
      else if (end < 0 && keyIs(body, i, END)) which = 2;
      else return undefined;
      i += which === 0 ? VERSION.length : which === 1 ? START.length : END.length;
      while (isWs(body[i])) i++;
      if (body[i] !== 0x3a) return undefined;
      i++;
      while (isWs(body[i])) i++;
      if (which === 0) {
        if (body[i] !== 0x22) return undefined;
        const from = ++i;
        for (let c = body[i]; c !== 0x22; c = body[++i]) {
          if (c === undefined || c === 0x5c || c < 0x20) return undefined;
          if (c === 0x5d) return NONE;
        }
        version = versionText(body, from, i);
        i++;
      } else {
        const from = i;
        let v = 0;
        for (let c = body[i]; c !== undefined && c >= 0x30 && c <= 0x39; c = body[++i]) v = v * 10 + c - 0x30;
        // JSON numbers have no leading zeros; a fraction, exponent or sign goes to the parse.
        if (i === from || (body[from] === 0x30 && i > from + 1) || i - from > 15) return undefined;
        if (which === 1) start = v;
        else end = v;
      }
      while (isWs(body[i])) i++;
      if (n < 2 && body[i++] !== 0x2c) return undefined;
    }
    if (body[i] !== 0x7d) return undefined;
    i++;
    spans.push({ version: version as string, start, end });
    while (isWs(body[i])) i++;
    if (body[i] === 0x5d) break;
    if (body[i] !== 0x2c) return undefined;
    i++;
    while (isWs(body[i])) i++;
  }
  return { version: (spans[spans.length - 1] as VersionSpan).version, spans, end: i + 1 };
}

const isSpan = (s: unknown): boolean =>
  typeof s === 'object' &&
  s !== null &&
  typeof (s as VersionSpan).version === 'string' &&
  Number.isInteger((s as VersionSpan).start) &&
  Number.isInteger((s as VersionSpan).end);

/** Shared: most answers ran on one version. */
const NO_EARLIER: ReadonlyArray<string | null> = Object.freeze([]);

/** The declaration of an answer: the engine's spans when it sent them (the versions before the last span's), else
 * the versions the replica served before the in-place switches the request was in flight across (`earlier` of
 * `target`, asked only then). */
export function declarationOf<T>(
  read: AnswerVersions,
  fallbackVersion: string | null,
  earlier: (target: T) => ReadonlyArray<string | null>,
  target: T,
): WeightDeclaration {
  const spans = read.spans;
  if (spans === null) return { weightVersion: read.version ?? fallbackVersion, earlier: earlier(target) };
  if (spans.length === 1) return { weightVersion: read.version, earlier: NO_EARLIER };
  const before: string[] = [];
  for (let i = 0; i < spans.length - 1; i++) before.push((spans[i] as VersionSpan).version);
  return { weightVersion: read.version, earlier: before };
}

/** The versions a declaration names, oldest first, once each (consecutive repeats dropped). */
export function declaredVersions(d: WeightDeclaration): string[] {
  const all: string[] = [];
  for (const v of d.earlier) if (v !== null && all[all.length - 1] !== v) all.push(v);
  const last = d.weightVersion;
  if (last !== null && all[all.length - 1] !== last) all.push(last);
  return all;
}

/** The headers that declare the versions, added to `out`: `X-UIS-Weight-Version` (the last token's) and, for a
 * request in-place switches spanned, `X-UIS-Weight-Versions: <started on>,...,<finished on>` (each version it was
 * in flight on). */
export function declarationHeaders(
  d: WeightDeclaration,
  out: OutgoingHttpHeader[] = [],
): OutgoingHttpHeader[] {
  if (d.weightVersion === null) return out;
  out.push('x-uis-weight-version', d.weightVersion);
  if (d.earlier.length === 0) return out;
  const all = declaredVersions(d);
  if (all.length > 1) out.push('x-uis-weight-versions', all.join(','));
  return out;
}

/**
 * An answer of a release without spans that ran across in-place switches: `uis_weight_versions` (every version it
 * ran on, oldest first) is inserted beside its `weight_version`, in the same object (`meta_info`, or an OpenAI
 * answer's `metadata`). The output token where the version changed is unknown here (the engine's answer does not
 * say, and guessing it would tag tokens with weights that did not produce them): a trainer masks or drops such a
 * sample, or runs SGLang >= 0.5.19, whose spans the gateway passes on. A batch answer is left as it is (its last
 * item's field is no place for the whole request's versions; the headers still name them).
 */
export function withUnsplitVersions(body: Buffer, read: AnswerVersions, versions: readonly string[]): Buffer {
  if (read.end === 0 || read.spans !== null || body[0] === 0x5b) return body;
  const field = Buffer.from(`,"uis_weight_versions":${JSON.stringify(versions)}`);
  return Buffer.concat([body.subarray(0, read.end), field, body.subarray(read.end)]);
}

/** An OpenAI answer (a JSON object) with `system_fingerprint` set to the weight version that produced it, unless
 * the engine set one. SGLang's answers have none; a byte insertion before the closing brace spares a parse. */
export function withFingerprint(body: Buffer, version: string): Buffer {
  if (body.indexOf(FINGERPRINT) !== -1) return body;
  let end = body.length - 1;
  while (end >= 0 && body[end] !== 0x7d) end--;
  if (end <= 0 || body[0] !== 0x7b) return body;
  const field = Buffer.from(`,"system_fingerprint":${JSON.stringify(version)}`);
  return Buffer.concat([body.subarray(0, end), field, body.subarray(end)]);
}
