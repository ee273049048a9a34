import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { REQUEST_KEY_FIELDS } from '@uis/routing';
import { UisError, zodError } from '@uis/spec';
import { z } from 'zod';
import { type BodyBudget, bodyBudgetSpent } from './body-budget.ts';
import { ProxyErrorCode } from './errors.ts';
import { DEFAULT_MAX_JSON_DEPTH, jsonDepthError } from './json-depth.ts';
import { type ScannedMember, scanObject } from './json-scan.ts';

/** The request fields the gateway reads to route and to abort; everything else passes through untouched. */
export const ServingFieldsSchema = z.object({
  model: z.string().min(1).optional(),
  route_key: z.string().min(1).optional(),
  stream: z.boolean().optional(),
  rid: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]).optional(),
});
export type ServingFields = z.infer<typeof ServingFieldsSchema>;

/**
 * A serving request body read once: its bytes (forwarded as they are when nothing changes), its routing fields, and
 * where its top-level members are. The whole object is parsed only when something asks for `json` (the GenRM
 * adapter, cache-aware routing's prompt): routing reads single members, each parsed from its own bytes.
 */
export class ParsedBody {
  #json: Record<string, unknown> | undefined;

  constructor(
    readonly raw: Buffer,
    readonly fields: ServingFields,
    json: Record<string, unknown> | undefined,
    /** Top-level members from the scan; undefined when the body was parsed whole instead. */
    readonly members: readonly ScannedMember[] | undefined,
  ) {
    this.#json = json;
  }

  /** The whole object, parsed on first use (the bytes were checked already). */
  get json(): Record<string, unknown> {
    this.#json ??= JSON.parse(this.raw.toString('utf8')) as Record<string, unknown>;
    return this.#json;
  }

  /** Whether the object has `key`. */
  has(key: string): boolean {
    const members = this.members;
    return members === undefined ? Object.hasOwn(this.json, key) : lastMember(members, key) !== undefined;
  }

  /** The value of the top-level `key` (the last one when it repeats, as `JSON.parse` reads it). */
  get(key: string): unknown {
    const members = this.members;
    if (members === undefined) return Object.hasOwn(this.json, key) ? this.json[key] : undefined;
    const m = lastMember(members, key);
    return m === undefined ? undefined : JSON.parse(this.raw.toString('utf8', m.valueStart, m.end));
  }

  /** The members routing reads of a request (`requestKeys`), as an object: only they are decoded, the rest of the
   * body is forwarded as its bytes. */
  routingFields(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const key of REQUEST_KEY_FIELDS) {
      const value = this.get(key);
      if (value !== undefined) out[key] = value;
    }
    return out;
  }
}

function lastMember(members: readonly ScannedMember[], key: string): ScannedMember | undefined {
  for (let i = members.length - 1; i >= 0; i--) if (members[i]!.key === key) return members[i];
  return undefined;
}

/** Edits to the forwarded body: keys to set (e.g. `model` -> the engine's served name) and keys to remove. */
export interface BodyEdit {
  set?: Readonly<Record<string, unknown>>;
  remove?: readonly string[];
}

/** `/generate`: `model` and `route_key` are the gateway's fields; SGLang's native API knows neither. */
export const GENERATE_EDIT: BodyEdit = { remove: ['model', 'route_key'] };

/** Chat and completions: `model` becomes the engine's served name; `route_key` is the gateway's, never the engine's. */
export function openAIEdit(servedName: string): BodyEdit {
  return { set: { model: servedName }, remove: ['route_key'] };
}

/** The 413 of every route that reads a body (serving on the fast path; admin and tRPC through Hono). */
export function bodyTooLarge(limit: number): UisError {
  return new UisError({
    code: ProxyErrorCode.bodyTooLarge,
    path: 'body',
    message: `request body exceeds the ${limit} byte limit; send a smaller body or raise the gateway's body limit`,
  });
}

/** Reads the whole request body, refusing (413) as soon as it exceeds `limit` bytes. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    collectBody(req, limit, (err, body) => {
      if (err !== null || body === undefined) reject(err);
      else resolve(body);
    });
  });
}

/** `readBody` in callback style, for the serving hot path (no promise per request). With a `budget`, the body's
 * bytes count against the process-wide budget while it arrives (503 `body_budget_exhausted` when spent). */
export function collectBody(
  req: IncomingMessage,
  limit: number,
  done: (err: Error | null, body?: Buffer) => void,
  budget?: BodyBudget,
): void {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    done(bodyTooLarge(limit));
    return;
  }
  if (budget !== undefined && !budget.open) {
    done(bodyBudgetSpent(budget.limit));
    return;
  }
  const c = new BodyCollector(limit, done, budget);
  // Anonymous listeners on purpose: tsx (esbuild keepNames) wraps every *named* closure in a defineProperty call,
  // which the serving hot path would pay on each request.
  req.on('data', (chunk: Buffer) => c.data(chunk));
  req.on('end', () => c.end());
  req.on('error', (err: Error) => c.error(err));
  // A client that goes away mid-body (or is cut at the body deadline) gives its bytes back.
  if (budget !== undefined) req.on('close', () => c.closed());
}

/** One request body being read; answers `done` exactly once. */
class BodyCollector {
  #first: Buffer | undefined;
  #chunks: Buffer[] | undefined;
  #size = 0;
  #settled = false;

  constructor(
    readonly limit: number,
    readonly done: (err: Error | null, body?: Buffer) => void,
    readonly budget: BodyBudget | undefined,
  ) {}

  data(chunk: Buffer): void {
    if (this.#settled) return;
    if (this.budget !== undefined && !this.budget.take(chunk.length)) {
      this.#settle();
      this.done(bodyBudgetSpent(this.budget.limit));
      return;
    }
    this.#size += chunk.length;
    if (this.#size > this.limit) {
      this.#settle();
      this.done(bodyTooLarge(this.limit));
      return;
    }
    if (this.#first === undefined) this.#first = chunk;
    else {
      this.#chunks ??= [this.#first];
      this.#chunks.push(chunk);
    }
  }

  end(): void {
    if (this.#settled) return;
    this.#settle();
    const chunks = this.#chunks;
    this.done(
      null,
      chunks !== undefined ? Buffer.concat(chunks, this.#size) : (this.#first ?? Buffer.alloc(0)),
    );
  }

  /** The request closed: an error only when the body had not ended (its Error, stack and all, is made only then:
   * every request closes, and making one each time was ~5 % of the serving path's CPU). */
  closed(): void {
    if (!this.#settled) this.error(new Error('request closed before its body ended'));
  }

  error(err: Error): void {
    if (this.#settled) return;
    this.#settle();
    this.done(err);
  }

  /** Ends the read: its bytes leave the budget (a complete body is the request's own from here). */
  #settle(): void {
    this.#settled = true;
    this.budget?.release(this.#size);
  }
}

/** Parses a body that must be a JSON object (400 `invalid_json` / `invalid_body` at `body`, `json_too_deep` at
 * the path where it nests deeper than `maxDepth`, otherwise). */
export function parseJsonObject(
  raw: Buffer,
  maxDepth: number = DEFAULT_MAX_JSON_DEPTH,
): Record<string, unknown> | UisError {
  // JSON text is UTF-8 (RFC 8259): decoding other bytes would silently turn them into U+FFFD, so a body would be
  // routed or recorded as one text and reach the engine as another.
  if (!isUtf8(raw))
    return new UisError({
      code: ProxyErrorCode.invalidJson,
      path: 'body',
      message: 'request body is not valid UTF-8; send JSON encoded as UTF-8',
    });
  const deep = jsonDepthError(raw, maxDepth);
  if (deep !== undefined) return deep;
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch (e) {
    return new UisError({
      code: ProxyErrorCode.invalidJson,
      path: 'body',
      message: `request body is not valid JSON: ${e instanceof Error ? e.message : String(e)}`,
    });
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    return new UisError({
      code: ProxyErrorCode.invalidBody,
      path: 'body',
      message: 'request body must be a JSON object',
    });
  }
  return json as Record<string, unknown>;
}

/** The routing fields' keys. */
const FIELD_KEYS = ['model', 'route_key', 'stream', 'rid'] as const;

/**
 * Parses a serving body: must be a JSON object whose routing fields have the right types (400 otherwise). A valid
 * body is scanned, not parsed: only its routing fields are decoded. Anything the scan does not accept is parsed
 * whole, which words the error (`invalid_json`, `json_too_deep` at its path, `invalid_body`).
 */
export function parseServingBody(
  raw: Buffer,
  maxDepth: number = DEFAULT_MAX_JSON_DEPTH,
): ParsedBody | UisError {
  const members = isUtf8(raw) ? scanObject(raw, maxDepth) : undefined;
  let values: Record<string, unknown>;
  let json: Record<string, unknown> | undefined;
  if (members !== undefined) {
    values = {};
    for (const m of members)
      if ((FIELD_KEYS as readonly string[]).includes(m.key))
        values[m.key] = JSON.parse(raw.toString('utf8', m.valueStart, m.end));
  } else {
    const obj = parseJsonObject(raw, maxDepth);
    if (obj instanceof UisError) return obj;
    json = obj;
    values = obj;
  }
  const fields = quickFields(values);
  if (fields !== undefined) return new ParsedBody(raw, fields, json, members);
  // Only the routing fields are validated (the engine validates the rest); zod words the error.
  const result = ServingFieldsSchema.safeParse({
    model: values.model,
    route_key: values.route_key,
    stream: values.stream,
    rid: values.rid,
  });
  if (!result.success) return zodError(result.error, 'body', ProxyErrorCode.invalidBody);
  return new ParsedBody(raw, result.data, json, members);
}

const isName = (v: unknown) => v === undefined || (typeof v === 'string' && v.length > 0);

/** The hot path's check of the routing fields: the same rules as ServingFieldsSchema (a property test holds
 * them equal) without building zod's result objects; `undefined` sends the body through zod for the error. */
export function quickFields(obj: Record<string, unknown>): ServingFields | undefined {
  const { model, route_key, stream, rid } = obj;
  if (!isName(model) || !isName(route_key)) return undefined;
  if (stream !== undefined && typeof stream !== 'boolean') return undefined;
  if (rid !== undefined && !(typeof rid === 'string' ? rid.length > 0 : isRidList(rid))) return undefined;
  const out: ServingFields = {};
  if (model !== undefined) out.model = model as string;
  if (route_key !== undefined) out.route_key = route_key as string;
  if (stream !== undefined) out.stream = stream as boolean;
  if (rid !== undefined) out.rid = rid as string | string[];
  return out;
}

function isRidList(v: unknown): boolean {
  if (!Array.isArray(v) || v.length === 0) return false;
  for (const x of v) if (typeof x !== 'string' || x.length === 0) return false;
  return true;
}

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const COMMA = Buffer.from(',');

function isJsonSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

/** No member's value replaced (an edit that only removes keys, most requests'): shared, never written. */
const NOTHING_REPLACED: ReadonlyMap<ScannedMember, string> = new Map();

/** Bytes to forward: `prefix` (latin-1 text, often empty) then `bytes`. */
export interface ForwardedBody {
  prefix: string;
  bytes: Buffer;
}

/** Inserts `"rid": ...` right after the opening brace of a JSON object we already checked (so we know `rid` is
 * absent and the text is an object): the brace and the rid become a prefix, the client's bytes after the brace
 * stay where they are (the engine client writes both into its one buffer). The rid is one of ours (`nextId`: hex
 * digits and dashes), its own JSON text in ASCII: no stringify and no check. */
function spliceRid(raw: Buffer, rid: string): ForwardedBody {
  let open = 0;
  while (open < raw.length && raw[open] !== OPEN_BRACE) open++;
  let next = open + 1;
  while (next < raw.length && isJsonSpace(raw[next]!)) next++;
  const empty = raw[next] === CLOSE_BRACE;
  return { prefix: empty ? `{"rid":"${rid}"` : `{"rid":"${rid}",`, bytes: raw.subarray(open + 1) };
}

/**
 * The bytes to forward: the original bytes when nothing changes; a splice when only a rid is added; otherwise the
 * object rebuilt from its members' own bytes: removed keys left out, a set key's value replaced where it was (or
 * added at the end), then the rid (the members nobody edits keep their bytes as the client sent them).
 * `injectRid` is an id of ours (`nextId`).
 */
export function forwardedBody(
  body: ParsedBody,
  edit: BodyEdit | undefined,
  injectRid: string | undefined,
): ForwardedBody {
  const members = body.members;
  if (members === undefined) return editedWhole(body, edit, injectRid);
  const raw = body.raw;
  const dropped: ScannedMember[] = [];
  if (edit?.remove) for (const m of members) if (edit.remove.includes(m.key)) dropped.push(m);
  let replaced: ReadonlyMap<ScannedMember, string> = NOTHING_REPLACED;
  let added = '';
  if (edit?.set) {
    const map = new Map<ScannedMember, string>();
    replaced = map;
    for (const key in edit.set) {
      const text = JSON.stringify(edit.set[key]);
      let first: ScannedMember | undefined;
      let last: ScannedMember | undefined;
      for (const m of members) {
        if (m.key !== key || dropped.includes(m)) continue;
        first ??= m;
        last = m;
      }
      // The value as JSON text already (the client wrote it the way JSON.stringify would): nothing to change.
      if (last !== undefined && raw.toString('utf8', last.valueStart, last.end) === text) continue;
      // Where JSON.parse + JSON.stringify would put it: in the first one's place, once.
      if (first === undefined) added += `,${JSON.stringify(key)}:${text}`;
      else {
        map.set(first, text);
        for (const m of members) if (m !== first && m.key === key && !dropped.includes(m)) dropped.push(m);
      }
    }
  }
  if (dropped.length === 0 && replaced.size === 0 && added === '')
    return injectRid === undefined ? { prefix: '', bytes: raw } : spliceRid(raw, injectRid);
  if (injectRid !== undefined) added += `,"rid":${JSON.stringify(injectRid)}`;
  // The kept members' bytes, commas between, the added members, in one buffer.
  const pieces: Array<Buffer | string> = [];
  let length = 2;
  for (const m of members) {
    if (dropped.includes(m)) continue;
    if (pieces.length > 0) pieces.push(COMMA);
    const value = replaced.get(m);
    if (value === undefined) pieces.push(raw.subarray(m.start, m.end));
    else pieces.push(raw.subarray(m.start, m.valueStart), value);
  }
  pieces.push(pieces.length === 0 ? added.slice(1) : added);
  for (const p of pieces) length += typeof p === 'string' ? Buffer.byteLength(p) : p.length;
  const out = Buffer.allocUnsafe(length);
  out[0] = OPEN_BRACE;
  let at = 1;
  for (const p of pieces) at += typeof p === 'string' ? out.write(p, at, 'utf8') : p.copy(out, at);
  out[at] = CLOSE_BRACE;
  return { prefix: '', bytes: out };
}

/** `forwardedBody` of a body parsed whole: one `JSON.stringify` of the edited object (edits its `json`). */
function editedWhole(
  body: ParsedBody,
  edit: BodyEdit | undefined,
  injectRid: string | undefined,
): ForwardedBody {
  const json = body.json;
  let changed = false;
  if (edit?.remove) {
    for (const key of edit.remove) {
      if (key in json) {
        delete json[key];
        changed = true;
      }
    }
  }
  if (edit?.set) {
    for (const key in edit.set) {
      const value = edit.set[key];
      if (json[key] !== value) {
        json[key] = value;
        changed = true;
      }
    }
  }
  if (!changed)
    return injectRid === undefined ? { prefix: '', bytes: body.raw } : spliceRid(body.raw, injectRid);
  if (injectRid !== undefined) json.rid = injectRid;
  return { prefix: '', bytes: Buffer.from(JSON.stringify(json)) };
}
