import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Arrivals } from './arrivals.ts';
import { SimEngine, type SimState, type SimStats } from './engine.ts';
import { sendSGLangError } from './http-util.ts';
import { type SimOptions, type SimOptionsInput, SimOptionsSchema } from './options.ts';
import { type HeadRendezvous, joinHead, listenHead, parseAddr, type WorkerRendezvous } from './rendezvous.ts';
import { type Handler, headHandler, workerHandler } from './routes.ts';
import type { Scheduler } from './scheduler.ts';

const READY_LINE = 'The server is fired up and ready to roll!';

export interface SimServer {
  /** `http://host:port` of this node. */
  url: string;
  port: number;
  /** The bound `--disaggregation-bootstrap-port` of a prefill head, else null. */
  bootstrapPort: number | null;
  options: SimOptions;
  /** Resolves once /health answers 200 (startup delay and multi-node rendezvous done). */
  ready: Promise<void>;
  stats(): SimStats;
  state(): SimState;
  /** Fault injection: the next `n` weight updates fail as a failed SGLang load does (400, old weights kept). */
  failWeightUpdates(n: number): void;
  /** Fault injection: `hold()` makes generation requests that arrive wait before their rid is registered (an
   * abort of it is dropped, as SGLang drops one that comes too early) until `release()`; `waiting` counts them. */
  arrivals: Arrivals;
  /** Which weight version produced each output token of a finished request: [first token index, version]. */
  tokenVersions(rid: string): Array<[number, string]> | undefined;
  /** A test's break point: `breakAt(rid, n)` stops generation once request `rid` has `n` output tokens, each
   * already sent, until `unbreak()` (a switch's pause and continue leave it standing); resolves when reached. */
  steps: Pick<Scheduler, 'breakAt' | 'unbreak'>;
  close(): Promise<void>;
}

export interface SimServerHooks {
  /** An injected crash or a lost peer: the CLI exits non-zero; by default the server drops every socket. */
  onCrash?: (reason: string) => void;
  /** Receives SGLang-like log lines (default: stderr when options.log is set). */
  log?: (line: string) => void;
}

function stamp(): string {
  return new Date().toISOString().replace('T', ' ').slice(0, 19);
}

/**
 * Starts a simulated SGLang engine (one node of it). In-process callers get the port 0 default; pass the same
 * launch flags as the real server, camelCased (`{ tpSize: 2, enableMemorySaver: true }`).
 */
export async function startSimServer(
  input: SimOptionsInput = {},
  hooks: SimServerHooks = {},
): Promise<SimServer> {
  const options = SimOptionsSchema.parse({
    port: 0,
    disaggregationBootstrapPort: 0,
    ...input,
    cudaVisibleDevices: input.cudaVisibleDevices ?? process.env.CUDA_VISIBLE_DEVICES,
  });
  if (options.nnodes > 1) {
    // Checked before anything listens, so a bad address leaves nothing behind.
    if (!options.distInitAddr) throw new Error('--dist-init-addr is required when --nnodes > 1');
    parseAddr(options.distInitAddr);
  }
  if (options.nodeRank >= options.nnodes) throw new Error('--node-rank must be below --nnodes');
  const log = hooks.log ?? ((line: string) => options.log && process.stderr.write(`${line}\n`));
  const info = (msg: string) => log(`[${stamp()}] ${msg}`);
  const sockets = new Set<Socket>();
  let server: http.Server;
  /** A prefill head's KV bootstrap server (see below). */
  let bootstrap: http.Server | null = null;
  let closed = false;

  // The scheduler died: as SGLang's process exits, its ports go with it (the bootstrap port too, so a relaunch on
  // it binds).
  const dropAll = () => {
    for (const s of sockets) s.destroy();
    server.close();
    bootstrap?.closeAllConnections();
    bootstrap?.close();
  };
  const engine = new SimEngine(options, (reason) => {
    info(`ERROR: scheduler died: ${reason}`);
    if (hooks.onCrash) hooks.onCrash(reason);
    else dropAll();
  });

  const handler = options.nodeRank === 0 ? headHandler(engine, options) : workerHandler(engine);
  server = await listenHttp(options, handler, sockets);
  const port = (server.address() as AddressInfo).port;
  const url = `http://${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}`;
  info(`INFO:     Uvicorn running on ${url} (node_rank=${options.nodeRank}, nnodes=${options.nnodes})`);

  try {
    bootstrap = await startBootstrap(options);
  } catch (e) {
    engine.close();
    server.close();
    throw e;
  }
  const bootstrapPort = bootstrap === null ? null : (bootstrap.address() as AddressInfo).port;

  let markReady!: () => void;
  const ready = new Promise<void>((r) => {
    markReady = r;
  });
  let started = false;
  let peersIn = options.nnodes <= 1;
  const maybeReady = () => {
    if (!started || !peersIn || engine.status !== 'starting') return;
    engine.status = 'ready';
    info(READY_LINE);
    markReady();
  };
  const startup = setTimeout(() => {
    started = true;
    maybeReady();
  }, options.simStartupMs);

  let peers: Peers;
  try {
    peers = await rendezvous(options, engine, info, () => {
      peersIn = true;
      maybeReady();
    });
  } catch (e) {
    clearTimeout(startup);
    engine.close();
    server.close();
    bootstrap?.close();
    throw e;
  }
  const { head, worker } = peers;

  return {
    url,
    port,
    bootstrapPort,
    options,
    ready,
    stats: () => engine.stats(),
    state: () => engine.state(),
    failWeightUpdates: (n) => {
      engine.failWeightUpdates = n;
    },
    arrivals: engine.arrivals,
    tokenVersions: (rid) => engine.tokenVersions(rid),
    steps: engine.scheduler,
    close: async () => {
      if (closed) return;
      closed = true;
      clearTimeout(startup);
      engine.close();
      worker?.close();
      await head?.close();
      if (bootstrap) {
        const b = bootstrap;
        await new Promise<void>((r) => {
          b.close(() => r());
          b.closeAllConnections();
        });
      }
      await new Promise<void>((r) => {
        server.close(() => r());
        for (const s of sockets) s.destroy();
      });
    },
  };
}

/** A prefill head holds its bootstrap port as SGLang's KV bootstrap server does, so two prefill engines given the
 * same port collide here as they would on GPUs. It answers /health; the KV transfer itself is not simulated. */
async function startBootstrap(options: SimOptions): Promise<http.Server | null> {
  if (options.disaggregationMode !== 'prefill' || options.nodeRank !== 0) return null;
  const b = http.createServer((req, res) => {
    const health = req.url === '/health';
    res.writeHead(health ? 200 : 404, { 'content-type': 'text/plain' }).end(health ? 'OK' : 'Not Found');
  });
  try {
    await new Promise<void>((resolve, reject) => {
      b.once('error', reject);
      b.listen(options.disaggregationBootstrapPort, options.host, () => resolve());
    });
  } catch (e) {
    throw new Error(
      `cannot listen on --disaggregation-bootstrap-port ${options.disaggregationBootstrapPort}: ${(e as Error).message}`,
    );
  }
  return b;
}

interface Peers {
  head: HeadRendezvous | null;
  worker: WorkerRendezvous | null;
}

/** A multi-node engine's process group: rank 0 listens at --dist-init-addr and waits for every node, other ranks
 * join it; `peersIn` once the group is whole (a lost peer makes the head unhealthy and crashes a worker). */
async function rendezvous(
  options: SimOptions,
  engine: SimEngine,
  info: (msg: string) => void,
  peersIn: () => void,
): Promise<Peers> {
  if (options.nnodes <= 1 || !options.distInitAddr) return { head: null, worker: null };
  if (options.nodeRank !== 0) {
    const worker = joinHead(options.distInitAddr, options.nodeRank, {
      onJoined: peersIn,
      onLost: () => {
        info('ERROR: lost the connection to node rank 0');
        engine.crash('lost the connection to node rank 0');
      },
    });
    return { head: null, worker };
  }
  let head: HeadRendezvous | null = null;
  try {
    head = await listenHead(options.distInitAddr, options.nnodes, {
      onComplete: () => {
        engine.connectedNodes = options.nnodes;
        info(`INFO:     all ${options.nnodes} nodes joined at ${options.distInitAddr}`);
        peersIn();
      },
      onLost: (rank) => {
        engine.connectedNodes = head?.connected() ?? 1;
        info(`ERROR: node rank ${rank} left the process group`);
        if (engine.status === 'ready' || engine.status === 'starting') engine.status = 'unhealthy';
      },
    });
  } catch (e) {
    throw new Error(`cannot listen on --dist-init-addr ${options.distInitAddr}: ${(e as Error).message}`);
  }
  return { head, worker: null };
}

/** The node's HTTP server, listening; every socket is tracked so a crash or close drops them all. */
async function listenHttp(options: SimOptions, handler: Handler, sockets: Set<Socket>): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    void Promise.resolve(handler(req, res)).catch((e: unknown) => {
      if (!res.headersSent) sendSGLangError(res, e instanceof Error ? e.message : String(e), 500);
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.on('connection', (s) => {
    sockets.add(s);
    s.setNoDelay(true);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return server;
}
