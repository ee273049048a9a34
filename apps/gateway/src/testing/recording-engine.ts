import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type SimServer, startSimServer } from '@uis/sglang-sim';

/** What a recording engine saw. */
export interface SeenRequest {
  method: string;
  path: string;
  body: Record<string, unknown> | null;
  headers: IncomingHttpHeaders;
}

const GENERATION = new Set(['/generate', '/v1/chat/completions']);

function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/**
 * A test engine: a real sglang-sim behind a recording pass-through, so a test can see exactly what the gateway
 * forwarded (bodies, `/abort_request` calls) and can make generation hang (timeouts) or the port refuse
 * connections (unreachable engine).
 */
export class RecordingEngine {
  readonly seen: SeenRequest[] = [];
  /** When true, generation requests are held unanswered. */
  hang = false;
  private sim!: SimServer;
  private server!: ReturnType<typeof createServer>;
  url = '';

  static async start(simOptions: Parameters<typeof startSimServer>[0] = {}): Promise<RecordingEngine> {
    const e = new RecordingEngine();
    e.sim = await startSimServer({ port: 0, ...simOptions });
    e.server = createServer((req, res) => {
      void (async () => {
        const raw = await readAll(req);
        const path = (req.url ?? '/').split('?')[0] as string;
        let body: Record<string, unknown> | null = null;
        try {
          body = raw.length > 0 ? (JSON.parse(raw.toString('utf8')) as Record<string, unknown>) : null;
        } catch {
          body = null;
        }
        e.seen.push({ method: req.method ?? 'GET', path, body, headers: req.headers });
        if (e.hang && GENERATION.has(path)) return;
        const controller = new AbortController();
        res.on('close', () => {
          if (!res.writableFinished) controller.abort();
        });
        try {
          const upstream = await fetch(`${e.sim.url}${req.url ?? '/'}`, {
            method: req.method ?? 'GET',
            headers: { 'content-type': 'application/json' },
            ...(raw.length > 0 ? { body: raw } : {}),
            signal: controller.signal,
          });
          res.writeHead(upstream.status, {
            'content-type': upstream.headers.get('content-type') ?? 'application/json',
          });
          if (upstream.body) for await (const chunk of upstream.body) res.write(chunk);
          res.end();
        } catch {
          res.destroy();
        }
      })();
    });
    e.server.listen(0, '127.0.0.1');
    await once(e.server, 'listening');
    e.url = `http://127.0.0.1:${(e.server.address() as AddressInfo).port}`;
    return e;
  }

  /** Requests to a path. */
  calls(path: string): SeenRequest[] {
    return this.seen.filter((s) => s.path === path);
  }

  /** Stops listening: the port refuses connections from now on. */
  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
    await this.sim.close();
  }
}
