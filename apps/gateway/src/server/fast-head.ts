import type { IncomingHttpHeaders } from 'node:http';

/** node's default `maxHeaderSize` (request line and headers): a longer head goes to node, which answers 431. */
export const NODE_MAX_HEADER_BYTES = 16 * 1024;
/** More header lines than this go to node (a serving request carries about ten). */
const MAX_HEADER_LINES = 64;

const CR = 13;
const LF = 10;
const SP = 32;
const HTAB = 9;
const COLON = 58;
const HEAD_END = Buffer.from('\r\n\r\n');
const VERSION = Buffer.from(' HTTP/1.1\r\n');

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
  /** Whether `method` and `path` (no query) is a fast route. */
  accepts(method: string, path: string): boolean;
  /** Largest body taken (Content-Length above it: node's path answers). */
  maxBodyBytes: number;
}

/** Hop-by-hop and framing headers whose presence takes a request out of the subset. */
const REFUSED = new Set(['transfer-encoding', 'expect', 'upgrade', 'te', 'trailer', 'http2-settings']);

/**
 * Parses a request head from the start of `buf` if it is in the strict subset the fast front serves: request line
 * `METHOD SP target SP HTTP/1.1 CRLF` for a fast route, header names of token bytes directly followed by `:`,
 * values of visible ASCII, space and tab, CRLF line ends (no obs-fold, no bare CR or LF), each name once, a Host,
 * exactly one all-digit Content-Length within the body limit, no Transfer-Encoding, Expect, Upgrade or TE,
 * Connection only `keep-alive` or `close`, and the whole head within node's header limit. Anything else is `node`:
 * node's own parser answers it, so its refusals stay the product's answer (request smuggling needs two parsers
 * that disagree; this one agrees with node or steps aside).
 */
export function parseFastHead(buf: Buffer, rules: FastHeadRules): HeadParse {
  const lineEnd = buf.indexOf(LF);
  if (lineEnd === -1) return buf.length > NODE_MAX_HEADER_BYTES ? 'node' : 'more';
  const line = requestLine(buf, lineEnd, rules);
  if (line === undefined) return 'node';
  const end = buf.indexOf(HEAD_END, lineEnd - 1);
  if (end === -1) return buf.length > NODE_MAX_HEADER_BYTES ? 'node' : 'more';
  const headBytes = end + 4;
  if (headBytes > NODE_MAX_HEADER_BYTES) return 'node';
  const headers: IncomingHttpHeaders = {};
  const rawHeaders: string[] = [];
  let contentLength = -1;
  let close = false;
  let lines = 0;
  // One string for the header block; names and values are slices of it (one call into the buffer, not two per line).
  block = buf.toString('latin1', lineEnd + 1, end + 2);
  blockAt = lineEnd + 1;
  for (let at = lineEnd + 1; at < end + 2; ) {
    if (++lines > MAX_HEADER_LINES) return 'node';
    const next = headerLine(buf, at);
    if (next === -1) return 'node';
    const name = lineName;
    const value = lineValue;
    const lower = lineLower;
    if (headers[lower] !== undefined || REFUSED.has(lower)) return 'node';
    if (lower === 'content-length') {
      contentLength = digits(value, rules.maxBodyBytes);
      if (contentLength < 0 || tabAfterValue(buf, next)) return 'node';
    } else if (lower === 'connection') {
      const v = value.toLowerCase();
      if (v !== 'keep-alive' && v !== 'close') return 'node';
      close = v === 'close';
    }
    headers[lower] = value;
    rawHeaders.push(name, value);
    at = next;
  }
  if (contentLength < 0 || headers.host === undefined) return 'node';
  return { method: line.method, url: line.url, headers, rawHeaders, contentLength, close, headBytes };
}

function requestLine(
  buf: Buffer,
  lineEnd: number,
  rules: FastHeadRules,
): { method: string; url: string } | undefined {
  const sp = buf.indexOf(SP);
  if (sp <= 0 || sp > 16) return undefined;
  for (let i = 0; i < sp; i++) {
    const c = buf[i]!;
    if (c < 65 || c > 90) return undefined;
  }
  const versionAt = lineEnd + 1 - VERSION.length;
  if (versionAt <= sp + 1 || buf.compare(VERSION, 0, VERSION.length, versionAt, lineEnd + 1) !== 0)
    return undefined;
  if (buf[sp + 1] !== 47) return undefined; // origin form only: `/...`
  let query = -1;
  for (let i = sp + 1; i < versionAt; i++) {
    const c = buf[i]!;
    if (c <= SP || c >= 127) return undefined;
    if (c === 63 && query === -1) query = i;
  }
  const text = buf.toString('latin1', 0, versionAt);
  const method = text.slice(0, sp);
  const url = text.slice(sp + 1);
  const path = query === -1 ? url : url.slice(0, query - sp - 1);
  return rules.accepts(method, path) ? { method, url } : undefined;
}

/** The last line `headerLine` read (module state: the parse is synchronous; no object per header). */
let lineName = '';
let lineLower = '';
let lineValue = '';
/** The header block as text, and where it starts in the buffer. */
let block = '';
let blockAt = 0;

/** A header name as its bytes were spelled, with its lower case: the same two strings for every request that
 * spells it so (a fresh string per header, hashed and internalized again as each request's header key, was most
 * of the parse's time). */
interface KnownName {
  bytes: Uint8Array;
  name: string;
  lower: string;
}
/** Spellings by a hash of their bytes, bounded: past the bound new spellings are made per request, still right. */
const NAMES = new Map<number, KnownName>();
const MAX_NAMES = 256;

function nameAt(buf: Buffer, at: number, end: number, hash: number): KnownName {
  const known = NAMES.get(hash);
  if (known !== undefined && known.bytes.length === end - at) {
    let j = 0;
    while (j < known.bytes.length && known.bytes[j] === buf[at + j]) j++;
    if (j === known.bytes.length) return known;
  }
  // Its own string (a slice would keep the whole head it came from alive in the cache).
  const name = buf.toString('latin1', at, end);
  const fresh = { bytes: Uint8Array.prototype.slice.call(buf, at, end), name, lower: name.toLowerCase() };
  if (known === undefined && NAMES.size < MAX_NAMES) NAMES.set(hash, fresh);
  return fresh;
}

/** Reads one `name: value CRLF` line at `at` into lineName/lineValue; the next line's start, or -1 when the line
 * is not in the subset. */
function headerLine(buf: Buffer, at: number): number {
  let i = at;
  let hash = 0;
  for (let c = buf[i]!; TOKEN[c] === 1; c = buf[++i]!) hash = (Math.imul(hash, 31) + c) | 0;
  if (i === at || buf[i] !== COLON) return -1;
  const known = nameAt(buf, at, i, hash);
  i++;
  while (buf[i] === SP || buf[i] === HTAB) i++;
  const from = i;
  let to = i;
  for (;;) {
    const c = buf[i]!;
    if (c === CR) break;
    if ((c < SP && c !== HTAB) || c >= 127) return -1;
    i++;
    if (c !== SP && c !== HTAB) to = i;
  }
  if (buf[i + 1] !== LF) return -1;
  lineName = known.name;
  lineLower = known.lower;
  lineValue = block.slice(from - blockAt, to - blockAt);
  return i + 2;
}

/** Whether the value of the line ending at `next` has a tab after it: node's parser refuses one after a
 * Content-Length (HPE_INVALID_CONTENT_LENGTH), though it takes spaces there and tabs before. */
function tabAfterValue(buf: Buffer, next: number): boolean {
  for (let j = next - 3; buf[j] === SP || buf[j] === HTAB; j--) if (buf[j] === HTAB) return true;
  return false;
}

/** An all-digit length no larger than `max`, else -1. */
function digits(value: string, max: number): number {
  if (value.length === 0 || value.length > 15) return -1;
  let n = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    n = n * 10 + c;
  }
  return n <= max ? n : -1;
}
