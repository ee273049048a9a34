/**
 * The bench's calibration column: the least a Node.js streaming proxy can do, to show where Node itself lands on
 * this machine beside nginx. node:http in front, one kept-alive raw socket per request to the engines (round
 * robin), the engine's chunked answer relayed byte for byte (one read, one write per SSE event: `onread` into one
 * buffer, `socket.write` to the client). No routing, admission, metrics, ids, timeouts or error handling beyond
 * staying up: not a product, a floor. A sized answer (the ceiling's `/generate`) is collected to its length and
 * sent in one write. `GET /_bench/stats` reports its event-loop delay and GC over the window (window-stats.ts), the
 * floor the gateway's event-loop delay is held against.
 *   tsx node-relay.ts --port 0 --engines http://127.0.0.1:30001,http://127.0.0.1:30002
 * Prints `{"port": N}` once listening.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import { connect, createServer as createNetServer, type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { WindowStats } from './window-stats.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    engines: { type: 'string' },
    /** `http` (default): node:http in front. `raw`: a `net` server with a minimal HTTP/1.1 request parser on the
     * socket's bytes (request line, headers, Content-Length body) and the answer written on the socket, no
     * IncomingMessage/ServerResponse: what a raw serving front could save. `tcp`: no HTTP, bytes passed through
     * on a connection of its own per client (see tcpFront). */
    front: { type: 'string', default: 'http' },
    /** How a head and its body go out, on both sides of the raw front (the paired bench compares them): `concat`
     * (default), one Buffer made of both; `string`, one latin1 string (node writes a short string from its stack,
     * with no Buffer); `cork`, two writes under cork (one writev). */
    write: { type: 'string', default: 'concat' },
    /** `off`: Nagle's algorithm left on for the raw and tcp fronts' sockets, both sides (default: TCP_NODELAY). */
    nodelay: { type: 'string', default: 'on' },
  },
});
const noDelay = values.nodelay !== 'off';
const engines = (values.engines ?? '')
  .split(',')
  .filter((u) => u !== '')
  .map((u) => new URL(u));
if (engines.length === 0) throw new Error('--engines is required');

/** One head and its body onto a socket, as `--write` says. */
const writeMessage: (s: Socket, head: string, body: Buffer) => void =
  values.write === 'string'
    ? (s, head, body) => s.write(head + body.toString('latin1'), 'latin1')
    : values.write === 'cork'
      ? (s, head, body) => {
          s.cork();
          s.write(head, 'latin1');
          s.write(body);
          s.uncork();
        }
      : (s, head, body) => s.write(Buffer.concat([Buffer.from(head, 'latin1'), body]));

const CR = 13;
const LF = 10;
const HEAD_END = Buffer.from('\r\n\r\n');
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** Follows chunked framing across reads, only to know where the answer ends. */
class ChunkEnd {
  #size = 0;
  #state: 'size' | 'ext' | 'data' | 'crlf' | 'last' = 'size';
  #crlf = 0;
  done = false;

  scan(b: Buffer): void {
    let i = 0;
    while (i < b.length && !this.done) {
      const c = b[i]!;
      switch (this.#state) {
        case 'size':
        case 'ext':
          i++;
          if (c === LF) this.#state = this.#size === 0 ? 'last' : 'data';
          else if (c === 59) this.#state = 'ext';
          else if (c !== CR && this.#state === 'size')
            this.#size = this.#size * 16 + Number.parseInt(String.fromCharCode(c), 16);
          break;
        case 'data': {
          const take = Math.min(this.#size, b.length - i);
          i += take;
          this.#size -= take;
          if (this.#size === 0) {
            this.#state = 'crlf';
            this.#crlf = 2;
          }
          break;
        }
        case 'crlf':
          i++;
          if (--this.#crlf === 0) this.#state = 'size';
          break;
        case 'last':
          i++;
          if (c === LF) this.done = true;
      }
    }
  }
}

interface Link {
  socket: Socket;
  engine: number;
  onData: (b: Buffer) => void;
}
const idle: Link[][] = engines.map(() => []);

/** A kept-alive engine connection read with `onread` into the one shared buffer, each read copied out for `onData`. */
function engineConnection(u: URL, onData: (data: Buffer) => void): Socket {
  return connect({
    host: u.hostname,
    port: Number(u.port),
    noDelay,
    onread: {
      buffer: READ_BUFFER,
      callback: (n, buf) => {
        const data = Buffer.allocUnsafe(n);
        data.set(buf.subarray(0, n));
        onData(data);
        return true;
      },
    },
  });
}

function link(engine: number): Link {
  const reused = idle[engine]!.pop();
  if (reused !== undefined) return reused;
  const l: Link = { engine, onData: () => {}, socket: undefined as unknown as Socket };
  l.socket = engineConnection(engines[engine]!, (data) => l.onData(data));
  l.socket.on('error', () => {});
  l.socket.on('close', () => {
    const list = idle[engine]!;
    const at = list.indexOf(l);
    if (at !== -1) list.splice(at, 1);
  });
  return l;
}

/** Where an answer goes: node:http's ServerResponse, or the client socket itself (raw front). */
interface Sink {
  /** A sized answer, whole. */
  sized(status: number, type: string, body: Buffer): void;
  /** The head of a chunked answer and its first bytes (chunked framing as the engine sent it). */
  chunkedHead(status: number, type: string, first: Buffer): void;
  /** More chunked bytes, unchanged. */
  more(b: Buffer): void;
  /** The chunked answer ended (its last chunk already passed through `more`). */
  end(): void;
}

function httpSink(res: ServerResponse): Sink {
  let raw: Socket | undefined;
  return {
    sized: (status, type, body) => {
      res.writeHead(status, { 'content-type': type, 'content-length': body.length });
      res.end(body);
    },
    chunkedHead: (status, type, first) => {
      res.writeHead(status, { 'content-type': type, 'transfer-encoding': 'chunked' });
      res.chunkedEncoding = false;
      res.write(first);
      raw = res.socket ?? undefined;
    },
    more: (b) => raw!.write(b),
    end: () => res.end(),
  };
}

function relay(l: Link, sink: Sink): void {
  let pending: Buffer | undefined;
  let chunked = false;
  let status = 0;
  let type = '';
  /** A sized answer's bytes still to come (-1: head not seen yet, or chunked). */
  let left = -1;
  const end = new ChunkEnd();
  const done = () => {
    l.onData = () => {};
    idle[l.engine]!.push(l);
  };
  l.onData = (b) => {
    if (!chunked && left < 0) {
      const buf = pending === undefined ? b : Buffer.concat([pending, b]);
      const at = buf.indexOf(HEAD_END);
      if (at === -1) {
        pending = buf;
        return;
      }
      pending = undefined;
      const head = buf.toString('latin1', 0, at);
      status = Number(buf.toString('latin1', 9, 12));
      type = /\r\ncontent-type:\s*([^\r]*)/i.exec(head)?.[1] ?? 'text/plain';
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1];
      const body = buf.subarray(at + 4);
      if (length !== undefined) {
        left = Number(length) - body.length;
        pending = body;
        if (left <= 0) {
          done();
          sink.sized(status, type, body);
        }
        return;
      }
      chunked = true;
      end.scan(body);
      sink.chunkedHead(status, type, body);
    } else if (left >= 0) {
      pending = pending === undefined ? b : Buffer.concat([pending, b]);
      left -= b.length;
      if (left <= 0) {
        const body = pending;
        done();
        sink.sized(status, type, body);
      }
      return;
    } else {
      end.scan(b);
      sink.more(b);
    }
    if (end.done) {
      done();
      sink.end();
    }
  };
}

const windowStats = new WindowStats();
let next = 0;

/** Sends `body` to the next engine (round robin) and relays its answer into `sink`. */
function forward(url: string, body: Buffer, sink: Sink): void {
  const engine = next++ % engines.length;
  const l = link(engine);
  const head = `POST ${url} HTTP/1.1\r\nhost: ${engines[engine]!.host}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
  relay(l, sink);
  writeMessage(l.socket, head, body);
}

function statsBody(url: string): string {
  return JSON.stringify(url.includes('reset') ? windowStats.reset() : windowStats.read());
}

function httpFront(): Server {
  return createServer((req, res) => {
    if (req.url?.startsWith('/_bench/stats')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(statsBody(req.url));
      return;
    }
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => forward(req.url ?? '/', Buffer.concat(parts), httpSink(res)));
  });
}

/** One client connection of the raw front: requests parsed from the socket's bytes, answered in order (a
 * pipelined request waits in `buffered` until the answer before it ended). */
class RawConn {
  #buffered: Buffer | undefined;
  #busy = false;
  constructor(readonly socket: Socket) {
    socket.on('data', (b: Buffer) => {
      this.#buffered = this.#buffered === undefined ? b : Buffer.concat([this.#buffered, b]);
      this.#next();
    });
    socket.on('error', () => {});
  }

  #next(): void {
    const buf = this.#buffered;
    if (this.#busy || buf === undefined) return;
    const at = buf.indexOf(HEAD_END);
    if (at === -1) return;
    const lineEnd = buf.indexOf(CR);
    const line = buf.toString('latin1', 0, lineEnd);
    const sp1 = line.indexOf(' ');
    const sp2 = line.lastIndexOf(' ');
    const url = line.slice(sp1 + 1, sp2);
    let length = 0;
    for (let i = lineEnd + 2; i < at; ) {
      const eol = buf.indexOf(CR, i);
      const colon = buf.indexOf(58, i);
      if (colon - i === 14 && buf.toString('latin1', i, colon).toLowerCase() === 'content-length')
        length = Number(buf.toString('latin1', colon + 1, eol).trim());
      i = eol + 2;
    }
    const end = at + 4 + length;
    if (buf.length < end) return;
    const body = buf.subarray(at + 4, end);
    this.#buffered = end === buf.length ? undefined : buf.subarray(end);
    this.#busy = true;
    if (url.startsWith('/_bench/stats')) {
      const b = Buffer.from(statsBody(url));
      this.#sink().sized(200, 'application/json', b);
      return;
    }
    forward(url, body, this.#sink());
  }

  #done(): void {
    this.#busy = false;
    this.#next();
  }

  #sink(): Sink {
    const s = this.socket;
    const head = (status: number, type: string, framing: string) =>
      `HTTP/1.1 ${status} ${status === 200 ? 'OK' : 'X'}\r\ncontent-type: ${type}\r\n${framing}\r\nconnection: keep-alive\r\n\r\n`;
    return {
      sized: (status, type, body) => {
        writeMessage(s, head(status, type, `content-length: ${body.length}`), body);
        this.#done();
      },
      chunkedHead: (status, type, first) => {
        writeMessage(s, head(status, type, 'transfer-encoding: chunked'), first);
      },
      more: (b) => s.write(b),
      end: () => this.#done(),
    };
  }
}

function rawFront(): Server {
  // WindowStats listens on a node:http Server; a net.Server has the same listen/connection/address surface.
  return createNetServer({ noDelay }, (socket) => new RawConn(socket)) as unknown as Server;
}

/** `tcp`: no HTTP at all. Each client connection gets its own engine connection and the bytes pass through both
 * ways unchanged (per request one read and one write each way, nothing parsed): the least a Node proxy can do per
 * request, the floor under every HTTP front. Serves no `/_bench/stats` (that request would go to the engine). */
function tcpFront(): Server {
  let turn = 0;
  return createNetServer({ noDelay }, (client) => {
    const engine = engineConnection(engines[turn++ % engines.length]!, (data) => client.write(data));
    client.on('data', (b: Buffer) => engine.write(b));
    const close = () => {
      client.destroy();
      engine.destroy();
    };
    for (const s of [client, engine]) {
      s.on('error', close);
      s.on('close', close);
    }
  }) as unknown as Server;
}

const fronts: Record<string, () => Server> = { raw: rawFront, http: httpFront, tcp: tcpFront };
windowStats.listen((fronts[values.front] ?? httpFront)(), Number(values.port));
