import type { IncomingHttpHeaders } from 'node:http';

/**
 * The HTTP/1.1 wire pieces of the gateway's own engine client: the request head, the response head parser and
 * the chunked-body framing scanner. Small on purpose: engines are SGLang servers (uvicorn) and sglang-sim on a
 * trusted network, but every answer is still checked, and a malformed one is an error, never a guess.
 */

/** Why an engine's answer could not be read as HTTP/1.1 (the connection is dropped). */
export class ProtocolError extends Error {
  readonly code = 'UPSTREAM_BAD_RESPONSE';
  constructor(message: string) {
    super(message);
    this.name = 'ProtocolError';
  }
}

/** Largest response head accepted (status line + headers), as node's own default. */
export const MAX_HEAD_BYTES = 16 * 1024;

const UNSAFE_HEADER_TEXT = /[\r\n\0]/;

/**
 * The request head as one latin1 string: request line, `host`, the given headers (flat `[name, value, ...]`)
 * and `content-length`. Names and values with CR, LF or NUL are refused: they would split the request.
 */
export function requestHead(
  method: string,
  path: string,
  host: string,
  headers: readonly string[],
  contentLength: number,
): string {
  if (UNSAFE_HEADER_TEXT.test(path) || path.includes(' '))
    throw new TypeError(`invalid request path ${JSON.stringify(path)}`);
  let head = `${method} ${path} HTTP/1.1\r\nhost: ${host}\r\n`;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const value = headers[i + 1]!;
    if (UNSAFE_HEADER_TEXT.test(name) || UNSAFE_HEADER_TEXT.test(value))
      throw new TypeError(`invalid header ${JSON.stringify(name)}`);
    head += `${name}: ${value}\r\n`;
  }
  return `${head}content-length: ${contentLength}\r\n\r\n`;
}

/** How the body after a response head is delimited. */
export type BodyFraming = 'none' | 'length' | 'chunked' | 'close';

export interface ResponseHead {
  status: number;
  headers: IncomingHttpHeaders;
  framing: BodyFraming;
  /** Body bytes for `length` framing. */
  contentLength: number;
  /** The connection may carry another request once this body ended. */
  keepAlive: boolean;
  /** Seconds from the engine's `Keep-Alive: timeout=N`, when it sent one. */
  keepAliveHintS: number | undefined;
  /** Offset in the buffer just after the head's blank line. */
  end: number;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const DIGITS = /^\d{1,15}$/;
const KEEP_ALIVE_TIMEOUT = /(?:^|[\s,])timeout=(\d+)/i;
const CODE_0 = 0x30;
const CODE_9 = 0x39;
const HTTP_1 = 'HTTP/1.';

/** The status line's code, or -1 when the line is not `HTTP/1.x NNN[ reason]` (the reason: no CR or LF). Checked
 * by character, not by a regular expression: every engine answer has one. */
function statusOf(text: string, lineEnd: number): number {
  if (lineEnd < 12 || !text.startsWith(HTTP_1)) return -1;
  const minor = text.charCodeAt(7);
  if ((minor !== CODE_0 && minor !== CODE_0 + 1) || text.charCodeAt(8) !== 0x20) return -1;
  let status = 0;
  for (let i = 9; i < 12; i++) {
    const c = text.charCodeAt(i);
    if (c < CODE_0 || c > CODE_9) return -1;
    status = status * 10 + c - CODE_0;
  }
  if (lineEnd > 12) {
    if (text.charCodeAt(12) !== 0x20) return -1;
    for (let i = 13; i < lineEnd; i++) {
      const c = text.charCodeAt(i);
      if (c === 0x0a || c === 0x0d) return -1;
    }
  }
  return status;
}

/** Header names as engines spell them, lower-cased and checked once: a name read from the wire is a new string
 * each time, and looking it up as an object key would hash and intern it per header (the most of this parser's
 * time); a Map lookup only hashes. Bounded, so an engine inventing names cannot grow it. */
const NAMES = new Map<string, string>();
const MAX_NAMES = 256;

function headerName(raw: string): string {
  const known = NAMES.get(raw);
  if (known !== undefined) return known;
  const name = raw.toLowerCase();
  if (!TOKEN.test(name)) throw new ProtocolError(`bad header name ${JSON.stringify(name.slice(0, 100))}`);
  if (NAMES.size < MAX_NAMES) NAMES.set(raw, name);
  return name;
}

/** The last `Keep-Alive` value and its timeout: an engine sends the same one on every answer. */
let lastKeepAlive: string | undefined;
let lastKeepAliveS: number | undefined;

/** Seconds of a `Keep-Alive: timeout=N` value, or undefined. */
function keepAliveTimeout(value: string): number | undefined {
  if (value !== lastKeepAlive) {
    const hint = KEEP_ALIVE_TIMEOUT.exec(value);
    lastKeepAliveS = hint === null ? undefined : Number(hint[1]);
    lastKeepAlive = value;
  }
  return lastKeepAliveS;
}

const CR = 0x0d;
const LF = 0x0a;

/** Offset of the `\r\n\r\n` ending a head within its first `limit` bytes, or -1. A byte loop: heads are short, and
 * it spares a call into C++ per answer. */
function headEnd(buf: Buffer, limit: number): number {
  const n = Math.min(buf.length, limit);
  for (let i = 3; i < n; i++) {
    if (buf[i] !== LF) continue;
    if (buf[i - 1] === CR && buf[i - 2] === LF && buf[i - 3] === CR) return i - 3;
  }
  return -1;
}

/** How the answer's body is delimited (RFC 9112 6.3). */
export function bodyFraming(
  requestMethod: string,
  status: number,
  hasTransferEncoding: boolean,
  chunked: boolean,
  contentLength: number | undefined,
): BodyFraming {
  if (requestMethod === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200))
    return 'none';
  if (hasTransferEncoding) return chunked ? 'chunked' : 'close';
  if (contentLength !== undefined) return contentLength === 0 ? 'none' : 'length';
  return 'close';
}

/**
 * Parses a response head from `buf` (the bytes received so far). Returns undefined while the blank line has not
 * arrived; throws ProtocolError on anything that is not an HTTP/1.x response head. One pass over the head's text,
 * line by line, with no intermediate arrays (it runs for every engine answer).
 */
export function parseResponseHead(buf: Buffer, requestMethod = 'POST'): ResponseHead | undefined {
  const at = headEnd(buf, MAX_HEAD_BYTES + 4);
  if (at === -1) {
    if (buf.length > MAX_HEAD_BYTES) throw new ProtocolError('response head too large');
    return undefined;
  }
  if (at > MAX_HEAD_BYTES) throw new ProtocolError('response head too large');
  const text = buf.toString('latin1', 0, at);
  let lineEnd = text.indexOf('\r\n');
  if (lineEnd === -1) lineEnd = at;
  const status = statusOf(text, lineEnd);
  if (status === -1)
    throw new ProtocolError(`bad status line ${JSON.stringify(text.slice(0, Math.min(lineEnd, 100)))}`);
  const http10 = text.charCodeAt(7) === CODE_0;
  const headers: IncomingHttpHeaders = {};
  let contentLength: number | undefined;
  let chunked = false;
  let hasTransferEncoding = false;
  let connectionClose = false;
  let connectionKeepAlive = false;
  let keepAliveHintS: number | undefined;
  for (let start = lineEnd + 2; start < at; start = lineEnd + 2) {
    lineEnd = text.indexOf('\r\n', start);
    if (lineEnd === -1) lineEnd = at;
    const colon = text.indexOf(':', start);
    if (colon <= start || colon >= lineEnd) {
      const line = text.slice(start, lineEnd);
      throw new ProtocolError(`bad header line ${JSON.stringify(line.slice(0, 100))}`);
    }
    const name = headerName(text.slice(start, colon));
    const value = text.slice(colon + 1, lineEnd).trim();
    const prior = headers[name];
    if (prior === undefined) headers[name] = name === 'set-cookie' ? [value] : value;
    else if (Array.isArray(prior)) prior.push(value);
    else headers[name] = `${prior}, ${value}`;
    switch (name) {
      case 'content-length': {
        if (!DIGITS.test(value)) throw new ProtocolError(`bad content-length ${JSON.stringify(value)}`);
        const n = Number(value);
        if (contentLength !== undefined && contentLength !== n)
          throw new ProtocolError('conflicting content-length headers');
        contentLength = n;
        break;
      }
      case 'transfer-encoding': {
        hasTransferEncoding = true;
        const codings = value.toLowerCase().split(',');
        chunked = codings[codings.length - 1]!.trim() === 'chunked';
        break;
      }
      case 'connection':
        for (const t of value.toLowerCase().split(',')) {
          const token = t.trim();
          if (token === 'close') connectionClose = true;
          else if (token === 'keep-alive') connectionKeepAlive = true;
        }
        break;
      case 'keep-alive':
        keepAliveHintS = keepAliveTimeout(value);
        break;
    }
  }
  const framing = bodyFraming(requestMethod, status, hasTransferEncoding, chunked, contentLength);
  const keepAlive =
    framing !== 'close' &&
    !connectionClose &&
    // Both framings at once is a smuggling pattern (RFC 9112 6.3): read by transfer-encoding, then drop it.
    !(hasTransferEncoding && contentLength !== undefined) &&
    (!http10 || connectionKeepAlive);
  return {
    status,
    headers,
    framing,
    contentLength: contentLength ?? 0,
    keepAlive,
    keepAliveHintS,
    end: at + 4,
  };
}

/** States of the chunked framing scanner. */
const CHUNK_SIZE = 0;
const CHUNK_EXTENSION = 1;
const CHUNK_SIZE_LF = 2;
const CHUNK_DATA = 3;
const CHUNK_DATA_CR = 4;
const CHUNK_DATA_LF = 5;
const CHUNK_TRAILER_START = 6;
const CHUNK_TRAILER_LINE = 7;
const CHUNK_TRAILER_LF = 8;
const CHUNK_DONE = 9;

const MAX_CHUNK_SIZE_DIGITS = 13;

/** Value of each byte as a hex digit, -1 for any other byte (a chunk size is read with one lookup per digit). */
const HEX = new Int8Array(256).fill(-1);
for (let c = 0; c < 10; c++) HEX[0x30 + c] = c;
for (let c = 0; c < 6; c++) {
  HEX[0x41 + c] = 10 + c;
  HEX[0x61 + c] = 10 + c;
}

/**
 * Follows the framing of a chunked body across reads. `scan` walks one read and says where the body ended in
 * it (or -1); with `onData` it also hands out the decoded data slices (no copies). A spliced relay passes no
 * callback and forwards the reads as they are: the cost is per chunk, not per byte, as data is skipped whole and
 * a size line and the CRLF after a chunk's data are each read in one step when they are whole in the read (an
 * SSE event is one chunk: a few loop turns per event, not one per byte).
 */
export class ChunkedScanner {
  #state = CHUNK_SIZE;
  #remaining = 0;
  #digits = 0;

  get done(): boolean {
    return this.#state === CHUNK_DONE;
  }

  /** Returns the offset just past the body's last byte when it ends inside `buf`, else -1. */
  scan(buf: Buffer, start = 0, onData?: (slice: Buffer) => void): number {
    let i = start;
    const n = buf.length;
    while (i < n) {
      switch (this.#state) {
        case CHUNK_SIZE: {
          let size = this.#remaining;
          let digits = this.#digits;
          let c = buf[i]!;
          for (let v = HEX[c]!; v >= 0; v = HEX[c]!) {
            if (++digits > MAX_CHUNK_SIZE_DIGITS) throw new ProtocolError('chunk size too large');
            size = size * 16 + v;
            if (++i === n) break;
            c = buf[i]!;
          }
          this.#remaining = size;
          this.#digits = digits;
          if (i === n) return -1;
          if (digits === 0) throw new ProtocolError('chunk size missing');
          i++;
          if (c === 13) {
            // The size line's LF, most often in the same read.
            if (i === n) this.#state = CHUNK_SIZE_LF;
            else if (buf[i++] !== 10) throw new ProtocolError('bad chunk size line ending');
            else this.#endSizeLine();
          } else if (c === 10) this.#endSizeLine();
          else if (c === 59 /* ; */ || c === 32 || c === 9) this.#state = CHUNK_EXTENSION;
          else throw new ProtocolError('bad chunk size');
          break;
        }
        case CHUNK_EXTENSION: {
          const lf = buf.indexOf(10, i);
          if (lf === -1) return -1;
          i = lf + 1;
          this.#endSizeLine();
          break;
        }
        case CHUNK_SIZE_LF:
          if (buf[i] !== 10) throw new ProtocolError('bad chunk size line ending');
          i++;
          this.#endSizeLine();
          break;
        case CHUNK_DATA: {
          const take = Math.min(this.#remaining, n - i);
          if (onData !== undefined) onData(buf.subarray(i, i + take));
          i += take;
          this.#remaining -= take;
          if (this.#remaining > 0) break;
          if (i + 1 < n && buf[i] === 13 && buf[i + 1] === 10) {
            // The CRLF after the data, whole in this read: straight to the next size line.
            i += 2;
            this.#state = CHUNK_SIZE;
          } else this.#state = CHUNK_DATA_CR;
          break;
        }
        case CHUNK_DATA_CR: {
          const c = buf[i++];
          if (c === 13) this.#state = CHUNK_DATA_LF;
          else if (c === 10) this.#state = CHUNK_SIZE;
          else throw new ProtocolError('chunk data longer than its size');
          break;
        }
        case CHUNK_DATA_LF:
          if (buf[i++] !== 10) throw new ProtocolError('chunk data longer than its size');
          this.#state = CHUNK_SIZE;
          break;
        case CHUNK_TRAILER_START: {
          const c = buf[i++];
          if (c === 13) this.#state = CHUNK_TRAILER_LF;
          else if (c === 10) {
            this.#state = CHUNK_DONE;
            return i;
          } else this.#state = CHUNK_TRAILER_LINE;
          break;
        }
        case CHUNK_TRAILER_LINE: {
          const lf = buf.indexOf(10, i);
          if (lf === -1) return -1;
          i = lf + 1;
          this.#state = CHUNK_TRAILER_START;
          break;
        }
        case CHUNK_TRAILER_LF:
          if (buf[i++] !== 10) throw new ProtocolError('bad trailer line ending');
          this.#state = CHUNK_DONE;
          return i;
        case CHUNK_DONE:
          return i;
      }
    }
    return -1;
  }

  #endSizeLine(): void {
    this.#digits = 0;
    this.#state = this.#remaining === 0 ? CHUNK_TRAILER_START : CHUNK_DATA;
  }
}
