import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { UisError } from '@uis/spec';
import { answeredOnSocket, type FastHandler } from '../proxy/index.ts';
import { answerClientError } from './client-error.ts';
import { FastHeadParser, type FastHeadRules } from './fast-head.ts';
import { FastRequest, FastResponse } from './fast-message.ts';

export interface FastFrontOptions extends FastHeadRules {
  /** Answers a parsed request: the server's checks before any route (Host, auth limiter), then `route`, the fast
   * route the parse found. The front passes its own request and response objects, which carry the part of node's
   * that the serving routes use. */
  serve(req: IncomingMessage, res: ServerResponse, route: FastHandler): void;
  /** Deadline of a request head (408 after it), as node's `headersTimeout`. */
  headersTimeoutMs: number;
  /** Deadline of a whole request, head and body, as node's `requestTimeout`. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this, as node's `keepAliveTimeout`. */
  keepAliveTimeoutMs: number;
}

/**
 * The serving front on raw sockets: it takes the server's connections, parses each request head itself when it is
 * in the strict subset `parseFastHead` accepts (the serving routes, as clients send them), and answers through
 * `FastRequest`/`FastResponse` instead of node's IncomingMessage/ServerResponse and their streams (what node:http
 * costs per request even in a bare relay). Anything else, at a request boundary, goes to node:http unchanged: the
 * bytes are put back on the socket and node's own connection listener takes the connection from then on, so node's
 * parser, its limits and its refusals answer whatever this front does not fully understand. Requests on one
 * connection are answered one at a time, in order (pipelined ones wait, the socket paused).
 */
export class FastFront {
  readonly #conns = new Set<FastConn>();
  readonly #server: Server;
  readonly #node: (socket: Socket) => void;
  readonly #sweep: NodeJS.Timeout;
  readonly keepAliveHeader: string;
  readonly parser: FastHeadParser;

  constructor(
    server: Server,
    readonly opts: FastFrontOptions,
  ) {
    this.#server = server;
    this.parser = new FastHeadParser(opts);
    // node:http installs its connection listener when the server is made: it is kept to hand connections over.
    const [node] = server.listeners('connection') as Array<(socket: Socket) => void>;
    if (node === undefined) throw new Error('node:http server without its connection listener');
    this.#node = node;
    server.removeListener('connection', node);
    server.prependListener('connection', (socket: Socket) => this.#accept(socket));
    this.keepAliveHeader = `Connection: keep-alive\r\nKeep-Alive: timeout=${Math.floor(opts.keepAliveTimeoutMs / 1000)}\r\n`;
    this.#sweep = setInterval(() => this.#expire(Date.now()), 1000);
    this.#sweep.unref();
  }

  #accept(socket: Socket): void {
    const conn = new FastConn(socket, this);
    this.#conns.add(conn);
    socket.on('close', () => this.#conns.delete(conn));
  }

  /** Gives `conn`'s socket to node:http with `bytes` (unparsed, at a request boundary) in front of what follows. */
  handOff(conn: FastConn, bytes: Buffer | undefined): void {
    this.#conns.delete(conn);
    conn.release();
    const socket = conn.socket;
    if (bytes !== undefined) socket.unshift(bytes);
    this.#node.call(this.#server, socket);
    socket.resume();
  }

  /** Connections between requests are closed (a graceful close lets the others finish their answer). */
  closeIdle(): void {
    for (const c of this.#conns) if (c.idle) c.socket.destroy();
  }

  closeAll(): void {
    clearInterval(this.#sweep);
    for (const c of this.#conns) c.socket.destroy();
    this.#conns.clear();
  }

  #expire(now: number): void {
    for (const c of this.#conns) c.expire(now);
  }
}

/** The 408 node's path answers for a request that did not arrive in time (see uis-server's answerClientError). */
function requestTimeout(): UisError {
  return new UisError({
    code: 'request_timeout',
    path: 'body',
    message: "the request (headers and body) did not arrive within the gateway's deadline; send it faster",
  });
}

/** node's parser error for a connection ended in the middle of a request (answered 400 `invalid_http`). */
function cutShort(): Error & { code: string } {
  return Object.assign(new Error('Parse Error: Invalid EOF state'), { code: 'HPE_INVALID_EOF_STATE' });
}

/** One client connection while the fast front serves it. */
class FastConn {
  #buf: Buffer | undefined;
  #req: FastRequest | undefined;
  #res: FastResponse | undefined;
  /** Body bytes of the current request still to come. */
  #bodyLeft = 0;
  /** When the request being read began (its first byte seen), 0 when none is. A new connection counts from its
   * accept, as node's head deadline does: one that never sends a byte gets the 408 then, not the idle timeout. */
  #readingSince = Date.now();
  #headDone = false;
  #idleSince = Date.now();
  #closing = false;
  /** The socket is paused by this connection (a pipelined request waits, or the answers drain). */
  #paused = false;
  readonly #onData = (b: Buffer) => this.#data(b);
  readonly #onEnd = () => this.#ended();
  readonly #onClose = () => this.#closed();
  readonly #onError = () => {}; // a reset client: `close` follows and ends what is in flight
  /** Waiting for the answers written to drain before reading the next request. */
  #draining = false;
  readonly #onDrain = () => {
    this.#draining = false;
    this.#free();
  };
  /** After the call that ended an answer (one function per connection, not a closure per answer). */
  readonly #afterEnd = () => {
    const res = this.#res!;
    res.finished();
    this.#answered(res.shouldKeepAlive);
  };

  constructor(
    readonly socket: Socket,
    private readonly front: FastFront,
  ) {
    socket.on('data', this.#onData);
    socket.on('error', this.#onError);
    socket.on('end', this.#onEnd);
    socket.on('close', this.#onClose);
  }

  /** Stops listening to the socket: node:http takes it. */
  release(): void {
    this.#closing = true;
    const s = this.socket;
    s.removeListener('data', this.#onData);
    s.removeListener('error', this.#onError);
    s.removeListener('end', this.#onEnd);
    s.removeListener('close', this.#onClose);
  }

  get idle(): boolean {
    return this.#req === undefined && this.#buf === undefined;
  }

  #data(b: Buffer): void {
    if (this.#closing) return;
    if (this.#req !== undefined && this.#bodyLeft > 0) {
      const take = Math.min(this.#bodyLeft, b.length);
      this.#body(take === b.length ? b : b.subarray(0, take));
      if (take === b.length) return;
      b = b.subarray(take);
    }
    this.#buf = this.#buf === undefined ? b : Buffer.concat([this.#buf, b]);
    if (this.#res === undefined && this.#req === undefined) {
      if (this.#readingSince === 0) this.#readingSince = Date.now();
      this.#next();
    } else {
      this.#pause(); // a pipelined request waits for the answer before it
    }
  }

  #pause(): void {
    this.#paused = true;
    this.socket.pause();
  }

  /** Parses the next request from the buffered bytes, if the connection is free. */
  #next(): void {
    const buf = this.#buf;
    if (buf === undefined || this.#req !== undefined || this.#closing || this.#draining) return;
    const front = this.front;
    const head = front.parser.parse(buf);
    if (head === 'more') return;
    if (head === 'node') {
      front.handOff(this, buf);
      return;
    }
    this.#buf = buf.length === head.headBytes ? undefined : buf.subarray(head.headBytes);
    this.#headDone = true;
    const req = new FastRequest(head, this.socket);
    const res = new FastResponse(this.socket, !head.close, front.keepAliveHeader, this);
    this.#req = req;
    this.#res = res;
    this.#bodyLeft = head.contentLength;
    front.opts.serve(req as unknown as IncomingMessage, res as unknown as ServerResponse, head.route);
    if (this.#bodyLeft === 0) {
      this.#bodyDone();
      return;
    }
    const rest = this.#buf;
    if (rest === undefined) return;
    this.#buf = undefined;
    this.#data(rest);
  }

  #body(chunk: Buffer): void {
    this.#bodyLeft -= chunk.length;
    this.#req!.body(chunk);
    if (this.#bodyLeft === 0) this.#bodyDone();
  }

  #bodyDone(): void {
    this.#readingSince = 0;
    this.#headDone = false;
    this.#req!.ended();
    // Answered before its body ended (a refusal): the connection is free now.
    if (this.#res === undefined) this.#free();
  }

  /** The request and its answer are done: the next one may be read. */
  #free(): void {
    this.#req = undefined;
    this.#idleSince = Date.now();
    if (this.#buf !== undefined) this.#readingSince = this.#idleSince;
    // As node does, no next request is read while the answers before it wait to be written: a client that
    // pipelines and never reads holds one socket buffer of answers, not all of them.
    if (this.socket.writableNeedDrain) {
      this.#draining = true;
      this.#pause();
      this.socket.once('drain', this.#onDrain);
      return;
    }
    if (this.#paused) {
      this.#paused = false;
      this.socket.resume();
    }
    this.#next();
  }

  /** The current answer's `end()` was called. */
  ending(): void {
    queueMicrotask(this.#afterEnd);
  }

  /** The current answer was written whole. */
  #answered(keepAlive: boolean): void {
    this.#res = undefined;
    if (this.#bodyLeft > 0) {
      // Answered before its body arrived (a refusal): the rest of the body is read and dropped, as node does,
      // unless the connection closes after this answer.
      if (!keepAlive) this.#finishSocket();
      return;
    }
    if (!keepAlive) {
      this.#finishSocket();
      return;
    }
    // The client left while the answer went out: nothing more is read from this connection.
    if (this.socket.destroyed) return;
    this.#free();
  }

  #finishSocket(): void {
    this.#closing = true;
    this.socket.end();
    this.socket.destroySoon();
  }

  #ended(): void {
    // The client sent its last byte: a request cut short is over; the connection closes (node's default).
    // node's parser refuses a head or body cut short by the client's end: its 400 (not the 500 of a failed body
    // read), as answerClientError makes it.
    const res = this.#res;
    const cut =
      this.#req === undefined ? this.#buf !== undefined : this.#bodyLeft > 0 && res?.headersSent === false;
    if (cut) answerClientError(cutShort(), this.socket);
    if (this.#bodyLeft > 0) this.#req?.closed();
    this.#closing = true;
    this.socket.end();
  }

  #closed(): void {
    if (this.#bodyLeft > 0) this.#req?.closed();
    this.#res?.socketClosed();
  }

  expire(now: number): void {
    const opts = this.front.opts;
    if (this.#readingSince !== 0) {
      const limit = this.#headDone ? opts.requestTimeoutMs : opts.headersTimeoutMs;
      if (now - this.#readingSince < limit) return;
      const err = requestTimeout();
      answeredOnSocket(this.socket, err);
      const body = JSON.stringify(err.toJSON());
      if (this.#res === undefined || !this.#res.headersSent)
        this.socket.end(
          `HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
        );
      else this.socket.destroy();
      this.#closing = true;
      if (this.#bodyLeft > 0) this.#req?.closed();
      return;
    }
    if (this.#req === undefined && now - this.#idleSince >= opts.keepAliveTimeoutMs) this.socket.destroy();
  }
}
