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
import { createServer, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { WindowStats } from './window-stats.ts';

const { values } = parseArgs({
  options: { port: { type: 'string', default: '0' }, engines: { type: 'string' } },
});
const engines = (values.engines ?? '')
  .split(',')
  .filter((u) => u !== '')
  .map((u) => new URL(u));
if (engines.length === 0) throw new Error('--engines is required');

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

function link(engine: number): Link {
  const reused = idle[engine]!.pop();
  if (reused !== undefined) return reused;
  const u = engines[engine]!;
  const l: Link = { engine, onData: () => {}, socket: undefined as unknown as Socket };
  l.socket = connect({
    host: u.hostname,
    port: Number(u.port),
    noDelay: true,
    onread: {
      buffer: READ_BUFFER,
      callback: (n, buf) => {
        const data = Buffer.allocUnsafe(n);
        data.set(buf.subarray(0, n));
        l.onData(data);
        return true;
      },
    },
  });
  l.socket.on('error', () => {});
  l.socket.on('close', () => {
    const list = idle[engine]!;
    const at = list.indexOf(l);
    if (at !== -1) list.splice(at, 1);
  });
  return l;
}

function relay(l: Link, res: ServerResponse): void {
  let pending: Buffer | undefined;
  let raw: Socket | undefined;
  /** A sized answer's bytes still to come (-1: chunked). */
  let left = -1;
  const end = new ChunkEnd();
  const done = () => {
    l.onData = () => {};
    idle[l.engine]!.push(l);
  };
  l.onData = (b) => {
    if (raw === undefined && left < 0) {
      const buf = pending === undefined ? b : Buffer.concat([pending, b]);
      const at = buf.indexOf(HEAD_END);
      if (at === -1) {
        pending = buf;
        return;
      }
      pending = undefined;
      const head = buf.toString('latin1', 0, at);
      const status = Number(buf.toString('latin1', 9, 12));
      const type = /\r\ncontent-type:\s*([^\r]*)/i.exec(head)?.[1] ?? 'text/plain';
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1];
      const body = buf.subarray(at + 4);
      if (length !== undefined) {
        left = Number(length);
        res.writeHead(status, { 'content-type': type, 'content-length': length });
        pending = body;
        left -= body.length;
        if (left <= 0) {
          done();
          res.end(body);
        }
        return;
      }
      res.writeHead(status, { 'content-type': type, 'transfer-encoding': 'chunked' });
      res.chunkedEncoding = false;
      end.scan(body);
      res.write(body);
      raw = res.socket ?? undefined;
    } else if (left >= 0) {
      pending = pending === undefined ? b : Buffer.concat([pending, b]);
      left -= b.length;
      if (left <= 0) {
        const body = pending;
        done();
        res.end(body);
      }
      return;
    } else {
      end.scan(b);
      raw!.write(b);
    }
    if (end.done) {
      done();
      res.end();
    }
  };
}

const windowStats = new WindowStats();
let next = 0;
const server = createServer((req, res) => {
  if (req.url?.startsWith('/_bench/stats')) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(req.url.includes('reset') ? windowStats.reset() : windowStats.read()));
    return;
  }
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    const body = Buffer.concat(parts);
    const engine = next++ % engines.length;
    const l = link(engine);
    const head = `POST ${req.url} HTTP/1.1\r\nhost: ${engines[engine]!.host}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
    relay(l, res);
    l.socket.write(Buffer.concat([Buffer.from(head, 'latin1'), body]));
  });
});
windowStats.listen(server, Number(values.port));
