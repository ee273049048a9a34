import { connect, type Socket } from 'node:net';
import { type ControlPlane, createControlPlane, InProcessSimLauncher } from '@uis/control-plane';
import { afterAll, beforeAll } from 'vitest';
import { UisServer, type UisServerOptions } from '../server/uis-server.ts';
import { singleRolloutConfig } from './fixtures.ts';

export type Front = 'fast' | 'node';

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** Reads HTTP/1.1 answers off a raw socket (Content-Length, chunked, or to the close), for tests that send bytes a
 * client library would refuse to. */
export class AnswerReader {
  #buf = Buffer.alloc(0);
  closed = false;
  #wake: (() => void) | undefined;

  constructor(socket: Socket) {
    socket.on('data', (b: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, b]);
      this.#wake?.();
    });
    socket.on('close', () => {
      this.closed = true;
      this.#wake?.();
    });
    socket.on('error', () => {});
  }

  async #until<T>(take: () => T | undefined): Promise<T | undefined> {
    for (;;) {
      const got = take();
      if (got !== undefined || this.closed) return got;
      await new Promise<void>((r) => {
        this.#wake = r;
      });
    }
  }

  /** The next answer; undefined when the connection closed without one. */
  async next(): Promise<Answer | undefined> {
    const headEnd = await this.#until(() => {
      const at = this.#buf.indexOf('\r\n\r\n');
      return at === -1 ? undefined : at;
    });
    if (headEnd === undefined) return undefined;
    const lines = this.#buf.toString('latin1', 0, headEnd).split('\r\n');
    const status = Number(lines[0]!.split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const c = l.indexOf(':');
      headers[l.slice(0, c).toLowerCase()] = l.slice(c + 1).trim();
    }
    this.#buf = this.#buf.subarray(headEnd + 4);
    // An interim answer (`100 Continue` to `Expect`) comes before the answer.
    if (status < 200) return this.next();
    if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      await this.#until(() => (this.#buf.length >= n ? true : undefined));
      const body = this.#buf.subarray(0, n);
      this.#buf = this.#buf.subarray(n);
      return { status, headers, body };
    }
    if (headers['transfer-encoding'] === 'chunked') return { status, headers, body: await this.#chunked() };
    await this.#until(() => undefined);
    const body = this.#buf;
    this.#buf = Buffer.alloc(0);
    return { status, headers, body };
  }

  async #chunked(): Promise<Buffer> {
    const parts: Buffer[] = [];
    for (;;) {
      const size = await this.#until(() => {
        const at = this.#buf.indexOf('\r\n');
        if (at === -1) return undefined;
        const n = Number.parseInt(this.#buf.toString('latin1', 0, at), 16);
        return this.#buf.length >= at + 2 + n + 2 ? { at, n } : undefined;
      });
      if (size === undefined) return Buffer.concat(parts);
      parts.push(this.#buf.subarray(size.at + 2, size.at + 2 + size.n));
      this.#buf = this.#buf.subarray(size.at + 2 + size.n + 2);
      if (size.n === 0) return Buffer.concat(parts);
    }
  }
}

/** A raw connection to 127.0.0.1:`port` and the reader of its answers. */
export async function openRaw(port: number): Promise<{ socket: Socket; reader: AnswerReader }> {
  const socket = connect({ host: '127.0.0.1', port });
  socket.setNoDelay(true);
  const reader = new AnswerReader(socket);
  await new Promise<void>((r) => socket.once('connect', () => r()));
  return { socket, reader };
}

export interface FrontServer {
  server: UisServer;
  port: number;
}

/**
 * One plane (one rollout model on simulated engines) served by two servers, `front: fast` and `front: node`, for
 * tests that send the same bytes to both; started in `beforeAll`, stopped in `afterAll`. `extra` adds per-front
 * options (a logger) and sees each server once it listens.
 */
export function bothFronts(options: {
  simDecodeUsPerToken: number;
  server: Omit<UisServerOptions, 'plane' | 'front'>;
  extra?: (front: Front) => Partial<UisServerOptions>;
}): Record<Front, FrontServer> & { plane: () => ControlPlane } {
  const launcher = new InProcessSimLauncher({ simDecodeUsPerToken: options.simDecodeUsPerToken });
  let plane: ControlPlane | undefined;
  const servers = { plane: () => plane! } as Record<Front, FrontServer> & { plane: () => ControlPlane };
  beforeAll(async () => {
    plane = await createControlPlane({ config: singleRolloutConfig(), launcher });
    for (const front of ['fast', 'node'] as const) {
      const server = new UisServer({ ...options.server, ...options.extra?.(front), plane, front });
      const { port } = await server.listen(0);
      servers[front] = { server, port };
    }
  }, 60_000);
  afterAll(async () => {
    for (const front of ['fast', 'node'] as const) await servers[front]?.server.close();
    await plane?.stop();
    await launcher.closeAll();
  });
  return servers;
}
