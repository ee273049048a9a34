import type { IncomingHttpHeaders } from 'node:http';
import { CREDENTIAL_HEADERS, type FastHandler } from '../proxy/index.ts';

/** node's default `maxHeaderSize` (request line and headers): a longer head goes to node, which answers 431. */
export const NODE_MAX_HEADER_BYTES = 16 * 1024;
/** More header lines than this go to node (a serving request carries about ten). */
export const MAX_HEADER_LINES = 64;
/** A longer method is not one of the serving routes' (node's parser takes it). */
const MAX_METHOD_BYTES = 16;

const CR = 13;
const LF = 10;
const SP = 32;
const HTAB = 9;
const COLON = 58;
const SLASH = 47;
const QUERY = 63;
const VERSION = Buffer.from('HTTP/1.1\r\n');

/** RFC 9110 tchar: the bytes a header name may have. */
const TOKEN = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~") TOKEN[c.charCodeAt(0)] = 1;
for (let c = 48; c <= 57; c++) TOKEN[c] = 1;
for (let c = 65; c <= 90; c++) TOKEN[c] = 1;
for (let c = 97; c <= 122; c++) TOKEN[c] = 1;

/** A request head the fast front understood completely: one of its routes, HTTP/1.1, one Content-Length. */
export interface FastHead {
  method: string;
  /** The request target as sent (path and query). */
  url: string;
  /** The fast route the method and path name, found by the parse (the dispatch does not match the URL again). */
  route: FastHandler;
  /** Lower-case names, each present once (a repeated name is not in the subset). */
  headers: IncomingHttpHeaders;
  /** `[name, value, ...]` as sent (values trimmed), like node's `rawHeaders`. */
  rawHeaders: string[];
  contentLength: number;
  /** `Connection: close`: the connection ends after this answer. */
  close: boolean;
  /** Bytes of the head, its blank line included: the body starts there. */
  headBytes: number;
}

/** `more`: the head is not complete yet. `node`: not in the fast subset; node:http's parser decides. */
export type HeadParse = FastHead | 'more' | 'node';

export interface FastHeadRules {
  /** The fast route of `method` and `path` (no query), if it is one. A path's route never changes once found
   * (routes are only added): the parser remembers the request lines it has routed. */
  route(method: string, path: string): FastHandler | undefined;
  /** Largest body taken (Content-Length above it: node's path answers). */
  maxBodyBytes: number;
}

/** What a header name means to the parse (by its lower case). */
const PLAIN = 0;
const CONTENT_LENGTH = 1;
const CONNECTION = 2;
const HOST = 3;
/** Hop-by-hop and framing headers whose presence takes a request out of the subset. */
const REFUSED = 4;
const REFUSED_NAMES = new Set(['transfer-encoding', 'expect', 'upgrade', 'te', 'trailer', 'http2-settings']);

/** A lower-case header name, one object per name: `seen` holds the number of the last parse that met it, so a
 * repeated name (in any spelling) is found without a lookup in the headers made so far. */
interface LowerName {
  text: string;
  kind: number;
  seen: number;
  /** The one object of its name (false past the bound: another may have the same text). */
  shared: boolean;
  /** The last value read under this name, as bytes and as the string made of them: a client sends the same Host,
   * Content-Type, User-Agent... on every request, which then get the same string (no string made, and compared by
   * identity downstream). Never kept for credentials (a byte comparison with another request's token would time
   * its common prefix). */
  value: string;
  /** Its bytes (its first `valueLength`); undefined: not kept. */
  valueBytes: Uint8Array | undefined;
  valueLength: number;
}
/** Longer values are made per request. */
const MAX_KEPT_VALUE_BYTES = 64;

/** A header name as its bytes were spelled, with its lower case: the same strings for every request that spells it
 * so (a fresh string per header, hashed and internalized again as each request's header key, was most of the
 * parse's time). */
interface KnownName {
  bytes: Uint8Array;
  name: string;
  lower: LowerName;
}

/** Spellings by a hash of their bytes and lower-case names, bounded: past the bound new names are made per request,
 * still right (their repeats are then found in the headers object). */
const NAMES = new Map<number, KnownName>();
const LOWERS = new Map<string, LowerName>();
const MAX_NAMES = 256;

function lowerName(text: string): LowerName {
  const known = LOWERS.get(text);
  if (known !== undefined) return known;
  const kind =
    text === 'content-length'
      ? CONTENT_LENGTH
      : text === 'connection'
        ? CONNECTION
        : text === 'host'
          ? HOST
          : REFUSED_NAMES.has(text)
            ? REFUSED
            : PLAIN;
  const shared = LOWERS.size < MAX_NAMES;
  const keeps = shared && !CREDENTIAL_HEADERS.has(text);
  const lower = {
    text,
    kind,
    seen: 0,
    shared,
    value: '',
    valueBytes: keeps ? new Uint8Array(MAX_KEPT_VALUE_BYTES) : undefined,
    valueLength: 0,
  };
  if (shared) LOWERS.set(text, lower);
  return lower;
}

/** Whether `len` bytes of `buf` at `at` equal `bytes`. */
function sameBytes(bytes: Uint8Array, buf: Buffer, at: number, len: number): boolean {
  if (bytes.length !== len) return false;
  for (let j = 0; j < len; j++) if (bytes[j] !== buf[at + j]) return false;
  return true;
}

/** A request line (method, target) already routed, by a hash of its bytes. */
interface KnownLine {
  bytes: Uint8Array;
  method: string;
  url: string;
  route: FastHandler;
}
/** Request lines remembered, and the longest one kept (a long query string is routed again each time). */
const MAX_LINES = 256;
const MAX_LINE_BYTES = 256;

/** The parse's per-line results (module state: a parse is synchronous and leaves nothing behind). */
const lineNames: KnownName[] = [];
/** Each line's value when it is its name's last one (undefined: made from the bytes). */
const lineValues: Array<string | undefined> = [];
const valueFrom = new Int32Array(MAX_HEADER_LINES);
const valueTo = new Int32Array(MAX_HEADER_LINES);
/** Numbers each parse, for LowerName.seen. */
let parseNumber = 0;

/**
 * Parses request heads from the start of a buffer when they are in the strict subset the fast front serves: request
 * line `METHOD SP target SP HTTP/1.1 CRLF` for a fast route, header names of token bytes directly followed by `:`,
 * values of visible ASCII, space and tab, CRLF line ends (no obs-fold, no bare CR or LF), each name once, a Host,
 * exactly one all-digit Content-Length within the body limit, no Transfer-Encoding, Expect, Upgrade or TE,
 * Connection only `keep-alive` or `close`, and the whole head within node's header limit. Anything else is `node`:
 * node's own parser answers it, so its refusals stay the product's answer (request smuggling needs two parsers
 * that disagree; this one agrees with node or steps aside). One pass over the head's bytes; names, routed request
 * lines and repeated values are the strings made for them before.
 */
export class FastHeadParser {
  readonly #rules: FastHeadRules;
  /** This server's routed request lines (routes are per server, so the cache is too). */
  readonly #lines = new Map<number, KnownLine>();
  /** The head returned last: valid until the next parse (the caller copies what it keeps). */
  readonly #head: FastHead = {
    method: '',
    url: '',
    route: () => {},
    headers: {},
    rawHeaders: [],
    contentLength: 0,
    close: false,
    headBytes: 0,
  };

  constructor(rules: FastHeadRules) {
    this.#rules = rules;
  }

  parse(buf: Buffer): HeadParse {
    const n = buf.length;
    const incomplete = n > NODE_MAX_HEADER_BYTES ? 'node' : 'more';
    // Method: capital letters, then one space.
    let i = 0;
    let hash = 0;
    for (;;) {
      if (i === n) return incomplete;
      const c = buf[i]!;
      if (c === SP) break;
      if (c < 65 || c > 90 || i === MAX_METHOD_BYTES) return 'node';
      hash = (Math.imul(hash, 31) + c) | 0;
      i++;
    }
    const sp = i;
    if (sp === 0) return 'node';
    // Origin-form target (`/...`) of visible ASCII, then ` HTTP/1.1` CRLF.
    i++;
    if (i === n) return incomplete;
    if (buf[i] !== SLASH) return 'node';
    let query = -1;
    for (;;) {
      if (i === n) return incomplete;
      const c = buf[i]!;
      if (c === SP) break;
      if (c < SP || c >= 127) return 'node';
      if (c === QUERY && query === -1) query = i;
      hash = (Math.imul(hash, 31) + c) | 0;
      i++;
    }
    const targetEnd = i;
    for (let j = 0; j < VERSION.length; j++) {
      if (++i === n) return incomplete;
      if (buf[i] !== VERSION[j]) return 'node';
    }
    const line = this.#line(buf, sp, targetEnd, query, hash);
    if (line === undefined) return 'node';
    return this.#fields(buf, i + 1, line);
  }

  /** The routed request line of bytes [0, targetEnd), or undefined when it names no fast route. */
  #line(buf: Buffer, sp: number, targetEnd: number, query: number, hash: number): KnownLine | undefined {
    const known = this.#lines.get(hash);
    if (known !== undefined && sameBytes(known.bytes, buf, 0, targetEnd)) return known;
    const text = buf.toString('latin1', 0, targetEnd);
    const method = text.slice(0, sp);
    const url = text.slice(sp + 1);
    const route = this.#rules.route(method, query === -1 ? url : text.slice(sp + 1, query));
    if (route === undefined) return undefined;
    const line = { bytes: Uint8Array.prototype.slice.call(buf, 0, targetEnd), method, url, route };
    if (known === undefined && targetEnd <= MAX_LINE_BYTES && this.#lines.size < MAX_LINES)
      this.#lines.set(hash, line);
    return line;
  }

  /** The header lines from `start` to the blank line, into the head. */
  #fields(buf: Buffer, start: number, line: KnownLine): HeadParse {
    const n = buf.length;
    const incomplete = n > NODE_MAX_HEADER_BYTES ? 'node' : 'more';
    const stamp = ++parseNumber;
    let contentLength = -1;
    let connection = -1;
    let host = false;
    let unshared = false;
    let count = 0;
    let at = start;
    for (;;) {
      if (at + 1 >= n) return incomplete;
      if (buf[at] === CR) {
        if (buf[at + 1] !== LF) return 'node';
        break;
      }
      if (count === MAX_HEADER_LINES) return 'node';
      let i = at;
      let hash = 0;
      for (let c = buf[i]!; TOKEN[c] === 1; c = buf[++i]!) hash = (Math.imul(hash, 31) + c) | 0;
      if (i >= n) return incomplete;
      if (i === at || buf[i] !== COLON) return 'node';
      const known = nameAt(buf, at, i, hash);
      i++;
      while (i < n && (buf[i] === SP || buf[i] === HTAB)) i++;
      const from = i;
      let to = i;
      for (;;) {
        if (i >= n) return incomplete;
        const c = buf[i]!;
        if (c === CR) break;
        if ((c < SP && c !== HTAB) || c >= 127) return 'node';
        i++;
        if (c !== SP && c !== HTAB) to = i;
      }
      if (i + 1 >= n) return incomplete;
      if (buf[i + 1] !== LF) return 'node';
      const lower = known.lower;
      if (lower.seen === stamp) return 'node';
      lower.seen = stamp;
      if (!lower.shared) unshared = true;
      switch (lower.kind) {
        case REFUSED:
          return 'node';
        case CONTENT_LENGTH:
          contentLength = digits(buf, from, to, this.#rules.maxBodyBytes);
          // node's parser refuses a tab after the digits (HPE_INVALID_CONTENT_LENGTH), though it takes spaces there.
          if (contentLength < 0) return 'node';
          for (let j = to; j < i; j++) if (buf[j] === HTAB) return 'node';
          break;
        case CONNECTION:
          connection = count;
          break;
        case HOST:
          host = true;
      }
      lineNames[count] = known;
      lineValues[count] = keptValue(lower, buf, from, to);
      valueFrom[count] = from;
      valueTo[count] = to;
      count++;
      at = i + 2;
    }
    const headBytes = at + 2;
    if (headBytes > NODE_MAX_HEADER_BYTES || contentLength < 0 || !host) return 'node';
    const headers: IncomingHttpHeaders = {};
    const rawHeaders: string[] = [];
    let close = false;
    for (let k = 0; k < count; k++) {
      const known = lineNames[k]!;
      const lower = known.lower.text;
      // A name made for this request alone may repeat another one's lower case unseen by the stamps.
      if (unshared && headers[lower] !== undefined) return 'node';
      const value = lineValues[k] ?? newValue(buf, valueFrom[k]!, valueTo[k]!, known.lower);
      if (k === connection) {
        const v = value.toLowerCase();
        if (v !== 'keep-alive' && v !== 'close') return 'node';
        close = v === 'close';
      }
      headers[lower] = value;
      rawHeaders.push(known.name, value);
    }
    const head = this.#head;
    head.method = line.method;
    head.url = line.url;
    head.route = line.route;
    head.headers = headers;
    head.rawHeaders = rawHeaders;
    head.contentLength = contentLength;
    head.close = close;
    head.headBytes = headBytes;
    return head;
  }
}

/** A value not kept from the last request, made from its bytes (and kept when it may be). */
function newValue(buf: Buffer, from: number, to: number, lower: LowerName): string {
  const value = buf.toString('latin1', from, to);
  const kept = lower.valueBytes;
  if (kept !== undefined && to - from <= MAX_KEPT_VALUE_BYTES) {
    for (let i = from; i < to; i++) kept[i - from] = buf[i]!;
    lower.valueLength = to - from;
    lower.value = value;
  }
  return value;
}

/** The value under `lower` the last request sent, if these bytes are it. */
function keptValue(lower: LowerName, buf: Buffer, from: number, to: number): string | undefined {
  const kept = lower.valueBytes;
  if (kept === undefined || lower.valueLength !== to - from) return undefined;
  for (let i = from; i < to; i++) if (kept[i - from] !== buf[i]) return undefined;
  return lower.value;
}

function nameAt(buf: Buffer, at: number, end: number, hash: number): KnownName {
  const known = NAMES.get(hash);
  if (known !== undefined && sameBytes(known.bytes, buf, at, end - at)) return known;
  // Its own string (a slice would keep the whole head it came from alive in the cache).
  const name = buf.toString('latin1', at, end);
  const lower = lowerName(name.toLowerCase());
  const fresh = { bytes: Uint8Array.prototype.slice.call(buf, at, end), name, lower };
  if (lower.shared && known === undefined && NAMES.size < MAX_NAMES) NAMES.set(hash, fresh);
  return fresh;
}

/** The all-digit length in bytes [from, to) if it is no larger than `max`, else -1. */
function digits(buf: Buffer, from: number, to: number, max: number): number {
  if (to === from || to - from > 15) return -1;
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = buf[i]! - 48;
    if (c < 0 || c > 9) return -1;
    n = n * 10 + c;
  }
  return n <= max ? n : -1;
}
