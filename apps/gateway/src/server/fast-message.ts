import { type IncomingHttpHeaders, type OutgoingHttpHeader, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastHead } from './fast-head.ts';

type Listener = (arg?: unknown) => void;

/** The few events the serving path listens to, without an EventEmitter per request: listeners in one array. */
class Events {
  #on: Array<{ event: string; fn: Listener; once: boolean }> | undefined;

  on(event: string, fn: Listener): this {
    this.#on ??= [];
    this.#on.push({ event, fn, once: false });
    return this;
  }

  once(event: string, fn: Listener): this {
    this.#on ??= [];
    this.#on.push({ event, fn, once: true });
    return this;
  }

  protected emit(event: string, arg?: unknown): void {
    const list = this.#on;
    if (list === undefined) return;
    for (let i = 0; i < list.length; i++) {
      const l = list[i]!;
      if (l.event !== event) continue;
      if (l.once) list.splice(i--, 1);
      l.fn(arg);
    }
  }
}

/**
 * A request the fast front parsed, with the part of IncomingMessage the serving path reads: method, url, headers,
 * rawHeaders, HTTP version, socket, and the body as `data`/`end` events (`close` when the client leaves first).
 */
export class FastRequest extends Events {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: string[];
  readonly httpVersionMajor = 1;
  readonly httpVersionMinor = 1;

  constructor(
    head: FastHead,
    readonly socket: Socket,
  ) {
    super();
    this.method = head.method;
    this.url = head.url;
    this.headers = head.headers;
    this.rawHeaders = head.rawHeaders;
  }

  /** Body bytes (the front reads them whether or not a listener takes them, as node dumps an unread body). */
  body(chunk: Buffer): void {
    this.emit('data', chunk);
  }

  ended(): void {
    this.emit('end');
  }

  closed(): void {
    this.emit('close');
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

const CHUNK_END = Buffer.from('\r\n');
const LAST_CHUNK = Buffer.from('0\r\n\r\n');

/** Callbacks of the connection a response belongs to. */
export interface ResponseOwner {
  /** The answer was written whole (`keepAlive`: the connection may take the next request). */
  answered(keepAlive: boolean): void;
}

/**
 * The part of ServerResponse the serving path uses, written straight on the socket: `writeHead` (flat list or
 * object), `setHeader` before it, `write`/`end` with node's framing (Content-Length as given; otherwise chunked,
 * unless the caller turns `chunkedEncoding` off to relay an engine's own chunk framing), `flushHeaders`,
 * `destroy`, `headersSent`/`writableFinished`/`destroyed`, and the `close`/`finish`/`drain` events. Its head carries
 * what node's does: Date and the connection's keep-alive or close.
 */
export class FastResponse extends Events {
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

  constructor(
    readonly socket: Socket,
    keepAlive: boolean,
    private readonly keepAliveHeader: string,
    private readonly owner: ResponseOwner,
  ) {
    super();
    this.shouldKeepAlive = keepAlive;
  }

  /** Nothing more can be written (node's `destroyed` also covers a socket already ended). */
  get destroyed(): boolean {
    return this.socket.destroyed || !this.socket.writable;
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
    return this.#out(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  }

  #out(b: Buffer): boolean {
    const s = this.socket;
    if (s.destroyed || !s.writable) return true;
    const head = this.#head;
    this.#head = undefined;
    if (this.#noBody || b.length === 0) return head === undefined ? true : s.write(head, 'latin1');
    if (this.chunkedEncoding) {
      s.cork();
      if (head !== undefined) s.write(head, 'latin1');
      s.write(`${b.length.toString(16)}\r\n`, 'latin1');
      s.write(b);
      const ok = s.write(CHUNK_END);
      s.uncork();
      return ok;
    }
    if (head === undefined) return s.write(b);
    // Head and body in one buffer, one write: the body copied once behind the head's latin1 bytes.
    const out = Buffer.allocUnsafe(head.length + b.length);
    out.write(head, 0, 'latin1');
    out.set(b, head.length);
    return s.write(out);
  }

  end(chunk?: Buffer | string): this {
    if (this.writableFinished) return this;
    if (!this.headersSent) {
      const n = chunk === undefined ? 0 : Buffer.byteLength(chunk);
      this.writeHead(this.statusCode, { 'content-length': n });
    }
    if (chunk !== undefined) this.#out(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    else if (this.#head !== undefined) this.#out(Buffer.alloc(0));
    if (this.chunkedEncoding && this.socket.writable) this.socket.write(LAST_CHUNK);
    this.writableFinished = true;
    // node's `finish` and `close` come after the call that ended the answer, never inside it.
    queueMicrotask(() => {
      this.emit('finish');
      this.#close();
      this.owner.answered(this.shouldKeepAlive);
    });
    return this;
  }

  /** The client left (or the connection was cut) before the answer ended. */
  socketClosed(): void {
    this.#close();
  }

  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.emit('close');
  }

  destroy(_err?: Error): this {
    this.socket.destroy();
    return this;
  }

  override once(event: string, fn: Listener): this {
    // `drain` is the socket's: the serving path waits on it only while a write was refused.
    if (event === 'drain') this.socket.once('drain', fn);
    else super.once(event, fn);
    return this;
  }
}
