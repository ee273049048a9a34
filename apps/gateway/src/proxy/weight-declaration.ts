import type { OutgoingHttpHeader } from 'node:http';

/** What an answer says about the weights that produced it: the version of its last token and, when the request
 * was running on its replica while in-place switches changed its weights, the versions it ran on before. */
export interface WeightDeclaration {
  weightVersion: string | null;
  /** The versions the replica served before each in-place switch the request was in flight across, oldest first. */
  earlier: ReadonlyArray<string | null>;
}

const KEY = Buffer.from('"weight_version":');
const FINGERPRINT = Buffer.from('"system_fingerprint":');

/** The version of an engine answer's last token: SGLang stamps `meta_info.weight_version` (the OpenAI answers:
 * `metadata.weight_version`) with the engine's version when it builds the answer, i.e. the version that produced
 * the final tokens. The last occurrence is the answer's own (a batch answers one per prompt, all the same). */
export function answerWeightVersion(body: Buffer): string | null {
  const at = body.lastIndexOf(KEY);
  if (at === -1) return null;
  let i = at + KEY.length;
  while (body[i] === 0x20) i++;
  if (body[i] !== 0x22) return null;
  const end = body.indexOf(0x22, i + 1);
  if (end === -1) return null;
  const v = body.toString('utf8', i + 1, end);
  return v.includes('\\') ? null : v;
}

/** The headers that declare the versions: `X-UIS-Weight-Version` (the last token's) and, for a request in-place
 * switches spanned, `X-UIS-Weight-Versions: <started on>,...,<finished on>` (each version it was in flight on). */
export function declarationHeaders(d: WeightDeclaration): OutgoingHttpHeader[] {
  const out: OutgoingHttpHeader[] = [];
  if (d.weightVersion === null) return out;
  out.push('x-uis-weight-version', d.weightVersion);
  const all: string[] = [];
  for (const v of [...d.earlier, d.weightVersion]) if (v !== null && all[all.length - 1] !== v) all.push(v);
  if (all.length > 1) out.push('x-uis-weight-versions', all.join(','));
  return out;
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
