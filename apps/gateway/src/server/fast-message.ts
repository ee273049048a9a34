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
    let lines = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'unknown'}\r\n`;
    let sized = false;
    let chunked = false;
    let dated = false;
    const add = (name: string, value: OutgoingHttpHeader) => {
      const lower = name.toLowerCase();
      if (lower === 'content-length') sized = true;
      else if (lower === 'transfer-encoding') chunked = true;
      else if (lower === 'date') dated = true;
      if (Array.isArray(value)) for (const v of value) lines += `${name}: ${v}\r\n`;
      else lines += `${name}: ${value}\r\n`;
    };
    const given = new Set<string>();
    if (Array.isArray(headers)) {
      for (let i = 0; i < headers.length; i += 2) {
        const name = String(headers[i]);
        given.add(name.toLowerCase());
        add(name, headers[i + 1]!);
      }
    } else if (headers !== undefined) {
      for (const name in headers) {
        given.add(name.toLowerCase());
        add(name, headers[name]!);
      }
    }
    if (this.#pending !== undefined)
      for (const name in this.#pending) if (!given.has(name)) add(name, this.#pending[name]!);
    this.#noBody = status === 204 || status === 304 || status < 200;
    if (!this.#noBody && !sized && !chunked) {
      lines += 'Transfer-Encoding: chunked\r\n';
      chunked = true;
    }
    this.chunkedEncoding = chunked && !this.#noBody;
    // node's own Date only when the answer carries none (an engine's is relayed).
    if (!dated) lines += date();
    lines += this.shouldKeepAlive ? this.keepAliveHeader : 'Connection: close\r\n';
    this.#head = `${lines}\r\n`;
    this.headersSent = true;
    return this;
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
    return s.write(Buffer.concat([Buffer.from(head, 'latin1'), b]));
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
