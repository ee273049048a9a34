import { type IncomingHttpHeaders, type OutgoingHttpHeader, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastHead } from './fast-head.ts';

type Listener = (arg?: unknown) => void;
/** The listeners of one event: a request's events have one each (the body reader's, the exchange's), so no array
 * and no entry object is made for them. */
type Slot = Listener | Listener[] | undefined;

function added(slot: Slot, fn: Listener): Slot {
  if (slot === undefined) return fn;
  if (typeof slot === 'function') return [slot, fn];
  slot.push(fn);
  return slot;
}

function fire(slot: Slot, arg?: unknown): void {
  if (typeof slot === 'function') slot(arg);
  else if (slot !== undefined) for (const fn of slot.slice()) fn(arg);
}

function onceOnly(event: string): void {
  // Every other event of these objects happens at most once, where `once` and `on` are the same.
  if (event === 'data') throw new Error("once('data') is not supported on the fast front's requests");
}

/**
 * A request the fast front parsed, with the part of IncomingMessage the serving path reads: method, url, headers,
 * rawHeaders, HTTP version, socket, and the body as `data`/`end` events (`close` once, when the client leaves
 * first). `error` is never emitted (a client gone is its `close`), so its listeners are not kept.
 */
export class FastRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: string[];
  #onData: Slot;
  #onEnd: Slot;
  #onClose: Slot;
  #closed = false;

  constructor(
    head: FastHead,
    readonly socket: Socket,
  ) {
    this.method = head.method;
    this.url = head.url;
    this.headers = head.headers;
    this.rawHeaders = head.rawHeaders;
  }

  get httpVersionMajor(): number {
    return 1;
  }

  get httpVersionMinor(): number {
    return 1;
  }

  on(event: string, fn: Listener): this {
    if (event === 'data') this.#onData = added(this.#onData, fn);
    else if (event === 'end') this.#onEnd = added(this.#onEnd, fn);
    else if (event === 'close') this.#onClose = added(this.#onClose, fn);
    return this;
  }

  once(event: string, fn: Listener): this {
    onceOnly(event);
    return this.on(event, fn);
  }

  /** Body bytes (the front reads them whether or not a listener takes them, as node dumps an unread body). */
  body(chunk: Buffer): void {
    fire(this.#onData, chunk);
  }

  ended(): void {
    fire(this.#onEnd);
  }

  closed(): void {
    if (this.#closed) return;
    this.#closed = true;
    fire(this.#onClose);
  }

  /** node's `resume()` drains an unread body; the front always reads the body to its end. */
  resume(): this {
    return this;
  }
}

/** The date node puts in every answer, made once a second. */
let dateLine = '';
let dateAt = 0;
function date(): string {
  const now = Date.now();
  if (now - dateAt >= 1000 || dateLine === '') {
    dateAt = now - (now % 1000);
    dateLine = `Date: ${new Date(now).toUTCString()}\r\n`;
  }
  return dateLine;
}

const SIZED = 1;
const CHUNKED = 2;
const DATED = 4;
/** node's checks in writeHead (`checkIsHttpToken`, `checkInvalidHeaderChar`). */
const TOKEN_NAME = /^[\^_`a-zA-Z\-0-9!#$%&'*+.|~]+$/;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
/** Header names seen, lower-cased once (the serving path writes the same dozen names). */
const LOWER = new Map<string, string>();
const STATUS_LINES = new Map<number, string>();

function statusLine(status: number): string {
  let line = STATUS_LINES.get(status);
  if (line === undefined) {
    line = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'unknown'}\r\n`;
    STATUS_LINES.set(status, line);
  }
  return line;
}

function invalidHeader(code: string, message: string): TypeError {
  return Object.assign(new TypeError(message), { code });
}

const NO_BYTES = Buffer.alloc(0);
const CHUNK_END = Buffer.from('\r\n');
const LAST_CHUNK = Buffer.from('0\r\n\r\n');
const CHUNK_END_LAST = Buffer.from('\r\n0\r\n\r\n');
/** A body up to this size is copied behind its head (or chunk size) into one buffer; a larger one goes out corked
 * (still one writev), uncopied. */
const COPY_MAX = 64 * 1024;

/** Callbacks of the connection a response belongs to. */
export interface ResponseOwner {
  /** `end()` was called: the owner calls `finished()` after the current call returns, then takes the next
   * request. */
  ending(): void;
}

/**
 * The part of ServerResponse the serving path uses, written straight on the socket: `writeHead` (flat list or
 * object), `setHeader` before it, `write`/`end` with node's framing (Content-Length as given; otherwise chunked,
 * unless the caller turns `chunkedEncoding` off to relay an engine's own chunk framing), `flushHeaders`,
 * `destroy`, `headersSent`/`writableFinished`/`destroyed`, and the `close`/`finish`/`drain` events. Its head carries
 * what node's does: Date and the connection's keep-alive or close. Each write is one socket write: the head leaves
 * with the first body bytes, a chunk with its size line and its end (and the last chunk with `end`).
 */
export class FastResponse {
  statusCode = 200;
  shouldKeepAlive: boolean;
  chunkedEncoding = false;
  headersSent = false;
  writableFinished = false;
  #pending: Record<string, OutgoingHttpHeader> | undefined;
  #head: string | undefined;
  #noBody = false;
  #closed = false;
  /** The head being built by writeHead, and what its headers said about the framing (SIZED, CHUNKED, DATED). */
  #lines = '';
  #framing = 0;
  #onClose: Slot;
  #onFinish: Slot;

  constructor(
    readonly socket: Socket,
    keepAlive: boolean,
    private readonly keepAliveHeader: string,
    private readonly owner: ResponseOwner,
  ) {
    this.shouldKeepAlive = keepAlive;
  }

  /** Nothing more can be written (node's `destroyed` also covers a socket already ended). */
  get destroyed(): boolean {
    return this.socket.destroyed || !this.socket.writable;
  }

  on(event: string, fn: Listener): this {
    if (event === 'close') this.#onClose = added(this.#onClose, fn);
    else if (event === 'finish') this.#onFinish = added(this.#onFinish, fn);
    return this;
  }

  once(event: string, fn: Listener): this {
    // `drain` is the socket's: the serving path waits on it only while a write was refused.
    if (event === 'drain') this.socket.once('drain', fn);
    else this.on(event, fn);
    return this;
  }

  setHeader(name: string, value: OutgoingHttpHeader): this {
    this.#pending ??= {};
    this.#pending[name.toLowerCase()] = value;
    return this;
  }

  writeHead(status: number, headers?: OutgoingHttpHeader[] | Record<string, OutgoingHttpHeader>): this {
    this.statusCode = status;
    this.#lines = statusLine(status);
    this.#framing = 0;
    const pending = this.#pending;
    const given = pending === undefined ? undefined : new Set<string>();
    if (Array.isArray(headers)) {
      for (let i = 0; i < headers.length; i += 2) this.#header(String(headers[i]), headers[i + 1]!, given);
    } else if (headers !== undefined) {
      for (const name in headers) this.#header(name, headers[name]!, given);
    }
    if (pending !== undefined)
      for (const name in pending) if (!given!.has(name)) this.#header(name, pending[name]!, undefined);
    this.#noBody = status === 204 || status === 304 || status < 200;
    let lines = this.#lines;
    const chunked = (this.#framing & CHUNKED) !== 0;
    if (!this.#noBody && !chunked && (this.#framing & SIZED) === 0) {
      lines += 'Transfer-Encoding: chunked\r\n';
      this.chunkedEncoding = true;
    } else {
      this.chunkedEncoding = chunked && !this.#noBody;
    }
    // node's own Date only when the answer carries none (an engine's is relayed).
    if ((this.#framing & DATED) === 0) lines += date();
    lines += this.shouldKeepAlive ? this.keepAliveHeader : 'Connection: close\r\n';
    this.#head = `${lines}\r\n`;
    this.#lines = '';
    this.headersSent = true;
    return this;
  }

  /** One header into the head being built, checked as node's writeHead checks it (a name of token bytes, a
   * value without CR, LF or other control bytes: no header injection from an engine's or a config's text). */
  #header(name: string, value: OutgoingHttpHeader, given: Set<string> | undefined): void {
    let lower = LOWER.get(name);
    if (lower === undefined) {
      if (!TOKEN_NAME.test(name))
        throw invalidHeader('ERR_INVALID_HTTP_TOKEN', `Header name must be a valid HTTP token ["${name}"]`);
      lower = name.toLowerCase();
      if (LOWER.size < 256) LOWER.set(name, lower);
    }
    given?.add(lower);
    if (lower === 'content-length') this.#framing |= SIZED;
    else if (lower === 'transfer-encoding') this.#framing |= CHUNKED;
    else if (lower === 'date') this.#framing |= DATED;
    if (Array.isArray(value)) for (const v of value) this.#value(name, String(v));
    else this.#value(name, String(value));
  }

  #value(name: string, value: string): void {
    if (BAD_VALUE.test(value))
      throw invalidHeader('ERR_INVALID_CHAR', `Invalid character in header content ["${name}"]`);
    this.#lines += `${name}: ${value}\r\n`;
  }

  flushHeaders(): void {
    if (this.#head === undefined) return;
    this.socket.write(this.#head, 'latin1');
    this.#head = undefined;
  }

  write(chunk: Buffer | string): boolean {
    if (!this.headersSent) this.writeHead(this.statusCode);
    return this.#out(typeof chunk === 'string' ? Buffer.from(chunk) : chunk, false);
  }

  /** `b` with the head not sent yet and its chunk framing (`last`: and the last chunk), in one socket write. */
  #out(b: Buffer, last: boolean): boolean {
    const s = this.socket;
    if (s.destroyed || !s.writable) return true;
    // Head values are latin1 (writeHead refuses others): its length is its byte count.
    let before = this.#head ?? '';
    this.#head = undefined;
    const size = this.#noBody ? 0 : b.length;
    let after: Buffer | undefined;
    if (this.chunkedEncoding) {
      if (size > 0) {
        before += `${size.toString(16)}\r\n`;
        after = last ? CHUNK_END_LAST : CHUNK_END;
      } else if (last) {
        after = LAST_CHUNK;
      }
    }
    if (before === '' && after === undefined) return size === 0 ? true : s.write(b);
    if (size > COPY_MAX) {
      s.cork();
      if (before !== '') s.write(before, 'latin1');
      let ok = s.write(b);
      if (after !== undefined) ok = s.write(after);
      s.uncork();
      return ok;
    }
    const out = Buffer.allocUnsafe(before.length + size + (after === undefined ? 0 : after.length));
    out.write(before, 0, 'latin1');
    if (size > 0) out.set(b, before.length);
    if (after !== undefined) out.set(after, before.length + size);
    return s.write(out);
  }

  end(chunk?: Buffer | string): this {
    if (this.writableFinished) return this;
    if (!this.headersSent) {
      const n = chunk === undefined ? 0 : Buffer.byteLength(chunk);
      this.writeHead(this.statusCode, { 'content-length': n });
    }
    this.#out(chunk === undefined ? NO_BYTES : typeof chunk === 'string' ? Buffer.from(chunk) : chunk, true);
    this.writableFinished = true;
    // node's `finish` and `close` come after the call that ended the answer, never inside it.
    this.owner.ending();
    return this;
  }

  /** After the call that ended the answer: `finish`, then `close`. */
  finished(): void {
    fire(this.#onFinish);
    this.#close();
  }

  /** The client left (or the connection was cut) before the answer ended. */
  socketClosed(): void {
    this.#close();
  }

  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    fire(this.#onClose);
  }

  destroy(_err?: Error): this {
    this.socket.destroy();
    return this;
  }
}
