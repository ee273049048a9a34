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
  const at = body.lastIndexOf(KEY);
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

const isSpan = (s: unknown): boolean =>
  typeof s === 'object' &&
  s !== null &&
  typeof (s as VersionSpan).version === 'string' &&
  Number.isInteger((s as VersionSpan).start) &&
  Number.isInteger((s as VersionSpan).end);

/** The declaration of an answer: the engine's spans when it sent them (the versions before the last span's), else
 * the versions the replica served before the in-place switches the request was in flight across. */
export function declarationOf(
  read: AnswerVersions,
  fallbackVersion: string | null,
  earlier: () => ReadonlyArray<string | null>,
): WeightDeclaration {
  if (read.spans !== null)
    return { weightVersion: read.version, earlier: read.spans.slice(0, -1).map((s) => s.version) };
  return { weightVersion: read.version ?? fallbackVersion, earlier: earlier() };
}

/** The versions a declaration names, oldest first, once each (consecutive repeats dropped). */
export function declaredVersions(d: WeightDeclaration): string[] {
  const all: string[] = [];
  for (const v of [...d.earlier, d.weightVersion]) if (v !== null && all[all.length - 1] !== v) all.push(v);
  return all;
}

/** The headers that declare the versions: `X-UIS-Weight-Version` (the last token's) and, for a request in-place
 * switches spanned, `X-UIS-Weight-Versions: <started on>,...,<finished on>` (each version it was in flight on). */
export function declarationHeaders(d: WeightDeclaration): OutgoingHttpHeader[] {
  const out: OutgoingHttpHeader[] = [];
  if (d.weightVersion === null) return out;
  out.push('x-uis-weight-version', d.weightVersion);
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
