import { type ChildProcess, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import type { BundleProbeEntry } from '@uis/planner';
import { type ErrorCode, isErrorCode, UisError, zodIssues } from '@uis/spec';
import type { z } from 'zod';
import {
  type ActorExitEvent,
  type BridgeEvent,
  BridgeEventSchema,
  BridgeResponseSchema,
  ExistsResultSchema,
  FreePortsSchema,
  type PgInfo,
  PgInfoSchema,
  ProbeResultSchema,
  type RayState,
  RayStateSchema,
  RemoveResultSchema,
  type StartedProcess,
  StartedProcessSchema,
  StopResultSchema,
  TailSchema,
} from './bridge-protocol.ts';

// Resolved from the package root (not this file) so source, build and the compiled `uis` bundle agree.
export const RAY_BRIDGE_SCRIPT = join(
  dirname(createRequire(import.meta.url).resolve('@uis/manager/package.json')),
  'python',
  'uis_ray_bridge.py',
);

export interface RayBridgeOptions {
  /** Ray cluster address (`host:port` of the GCS, or `auto`). */
  address: string;
  /** Ray namespace: named PGs and actors are looked up in it. Default `uis`. */
  namespace?: string;
  python?: string;
  /** Deadline for connecting to Ray. Default 60 s. */
  connectTimeoutMs?: number;
  /** Default per-request deadline. Default 120 s. */
  requestTimeoutMs?: number;
  /** Receives the bridge's stderr lines (Ray's own logging). */
  onLog?: (line: string) => void;
  env?: Record<string, string>;
  /** Replaces `python3 uis_ray_bridge.py` (tests run a scripted fake speaking the same protocol). */
  command?: readonly string[];
}

export interface StartProcessParams {
  pg: string;
  bundle_index: number;
  num_gpus: number;
  num_cpus?: number;
  argv: string[];
  env: Record<string, string>;
  cwd?: string;
  /** Names the actor (`uis:<label>#<n>`), e.g. the engine id and node rank. */
  label: string;
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  timer: NodeJS.Timeout;
  method: string;
}

const bridgeError = (code: string, message: string, path?: string): UisError =>
  new UisError({ code: bridgeCode(code), message, ...(path === undefined ? {} : { path }) });

/** A code the bridge sent, as one of the table's (a code it does not know reads as `ray_error`). */
const bridgeCode = (code: string): ErrorCode => (isErrorCode(code) ? code : 'ray_error');

/** A Ray driver in a Python child process, spoken to in JSON lines. Every answer is zod-checked; requests have
 * deadlines; actor exits arrive as events. `close()` asks the bridge to stop what it started and remove the PGs
 * it created, then kills it if it does not leave. */
export class RayBridge {
  private readonly pending = new Map<number, Pending>();
  private readonly exitListeners = new Set<(e: ActorExitEvent) => void>();
  /** Recent exits by handle (bounded), for a listener that learns its handle after the exit was reported. */
  private readonly recentExits = new Map<string, ActorExitEvent>();
  private nextId = 1;
  private exited = false;
  private readonly exitPromise: Promise<void>;
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly child: ChildProcess,
    private readonly opts: RayBridgeOptions,
    readonly rayVersion: string,
    readonly nodes: number,
    exitPromise: Promise<void>,
  ) {
    this.exitPromise = exitPromise;
  }

  /** pid of the bridge process (the Ray driver). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  get namespace(): string {
    return this.opts.namespace ?? 'uis';
  }

  /** Spawns the bridge and waits until it is connected to Ray. */
  static async start(opts: RayBridgeOptions): Promise<RayBridge> {
    const python = opts.python ?? 'python3';
    const [cmd, ...prefix] = opts.command ?? [python, RAY_BRIDGE_SCRIPT];
    const child = spawn(
      cmd as string,
      [...prefix, '--address', opts.address, '--namespace', opts.namespace ?? 'uis'],
      { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...opts.env } },
    );
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    const errLines = createInterface({ input: child.stderr as NodeJS.ReadableStream });
    errLines.on('line', (l) => opts.onLog?.(l));
    const exitPromise = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    let bridge: RayBridge | undefined;
    const early: string[] = [];
    const ready = new Promise<{ version: string; nodes: number }>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(
          bridgeError(
            'ray_connect_timeout',
            `no answer from the Ray bridge in ${opts.connectTimeoutMs ?? 60_000} ms`,
            'address',
          ),
        );
      }, opts.connectTimeoutMs ?? 60_000);
      child.once('error', (e) => {
        clearTimeout(timer);
        reject(bridgeError('ray_bridge_spawn_failed', `cannot run ${python}: ${e.message}`, 'python'));
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(
          bridgeError(
            'ray_bridge_exited',
            `the Ray bridge exited (code ${code}) before it was ready`,
            'address',
          ),
        );
      });
      lines.on('line', (line) => {
        if (bridge) return bridge.onLine(line);
        const ev = parseEvent(line);
        if (ev?.event === 'ready') {
          clearTimeout(timer);
          resolve({ version: ev.ray_version, nodes: ev.nodes });
        } else if (ev?.event === 'fatal') {
          clearTimeout(timer);
          reject(bridgeError(ev.code, ev.message, 'address'));
        } else early.push(line);
      });
    });
    let info: { version: string; nodes: number };
    try {
      info = await ready;
    } catch (e) {
      // A bridge that failed to connect leaves with the error, not after it: it is given a moment to exit by
      // itself (a fatal event), then killed. A spawn that failed has no process to wait for.
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
        const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exitPromise;
        clearTimeout(kill);
      }
      throw e;
    }
    bridge = new RayBridge(child, opts, info.version, info.nodes, exitPromise);
    child.on('exit', (code, signal) => bridge?.onExit(code, signal));
    for (const l of early) bridge.onLine(l);
    return bridge;
  }

  /** Called for every process that exits, or actor that dies, without having been stopped. */
  onActorExit(cb: (e: ActorExitEvent) => void): () => void {
    this.exitListeners.add(cb);
    return () => this.exitListeners.delete(cb);
  }

  /** The exit reported for `handle`, if one was. */
  exitOf(handle: string): ActorExitEvent | undefined {
    return this.recentExits.get(handle);
  }

  request<S extends z.ZodType>(
    method: string,
    params: Record<string, unknown>,
    schema: S,
    timeoutMs = this.opts.requestTimeoutMs ?? 120_000,
  ): Promise<z.infer<S>> {
    if (this.exited || this.closing)
      return Promise.reject(
        bridgeError('ray_bridge_closed', `the Ray bridge is closed (${method})`, 'bridge'),
      );
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(bridgeError('ray_timeout', `Ray bridge ${method} took longer than ${timeoutMs} ms`, method));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer, method });
      this.child.stdin?.write(`${JSON.stringify({ id, method, params })}\n`);
    }).then((raw) => {
      const parsed = schema.safeParse(raw);
      if (!parsed.success)
        throw new UisError({
          code: 'ray_bridge_protocol',
          path: method,
          message: `unexpected answer to ${method}: ${JSON.stringify(zodIssues(parsed.error))}`,
        });
      return parsed.data as z.infer<S>;
    });
  }

  createPg(
    name: string,
    bundles: Array<Record<string, number>>,
    strategy: string,
    timeoutS = 60,
  ): Promise<PgInfo> {
    return this.request(
      'create_pg',
      { name, bundles, strategy, timeout_s: timeoutS },
      PgInfoSchema,
      timeoutS * 1000 + 30_000,
    );
  }
  getPg(name: string, timeoutS = 60): Promise<PgInfo> {
    return this.request('get_pg', { name, timeout_s: timeoutS }, PgInfoSchema, timeoutS * 1000 + 30_000);
  }
  async pgExists(name: string): Promise<boolean> {
    return (await this.request('pg_exists', { name }, ExistsResultSchema)).exists;
  }
  async removePg(name: string): Promise<void> {
    await this.request('remove_pg', { name }, RemoveResultSchema);
  }
  async probe(name: string): Promise<BundleProbeEntry[]> {
    return (await this.request('probe', { name }, ProbeResultSchema)).bundles;
  }
  /** Free ports on the node of a bundle (found by a task in that bundle). */
  async freePorts(pg: string, bundleIndex: number, count: number, host: string): Promise<number[]> {
    return (await this.request('free_ports', { pg, bundle_index: bundleIndex, count, host }, FreePortsSchema))
      .ports;
  }
  startProcess(p: StartProcessParams): Promise<StartedProcess> {
    return this.request('start_process', { ...p }, StartedProcessSchema);
  }
  async stopProcess(handle: string, graceMs: number): Promise<void> {
    await this.request(
      'stop_process',
      { handle, grace_s: graceMs / 1000 },
      StopResultSchema,
      graceMs + 60_000,
    );
  }
  async tail(handle: string, lines: number): Promise<string[]> {
    return (await this.request('tail', { handle, lines }, TailSchema)).lines;
  }
  state(): Promise<RayState> {
    return this.request('state', {}, RayStateSchema);
  }

  /** Asks the bridge to stop its actors and remove its own PGs, waits for it to leave (SIGKILL after
   * `graceMs`). Idempotent. */
  close(graceMs = 60_000): Promise<void> {
    if (this.closing) return this.closing;
    this.closing = (async () => {
      if (this.exited) return;
      this.child.stdin?.write(`${JSON.stringify({ method: 'shutdown' })}\n`);
      this.child.stdin?.end();
      const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
      await this.exitPromise;
      clearTimeout(timer);
    })();
    return this.closing;
  }

  private onLine(line: string): void {
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      this.opts.onLog?.(`(bridge stdout) ${line}`);
      return;
    }
    if (raw && typeof raw === 'object' && 'event' in raw) {
      const ev = parseEvent(line);
      if (ev?.event === 'actor_exit') {
        this.recentExits.set(ev.handle, ev);
        if (this.recentExits.size > 256)
          this.recentExits.delete(this.recentExits.keys().next().value as string);
        for (const cb of this.exitListeners) cb(ev);
      }
      return;
    }
    const res = BridgeResponseSchema.safeParse(raw);
    if (!res.success) {
      this.opts.onLog?.(`(bridge) unparseable line: ${line.slice(0, 200)}`);
      return;
    }
    const msg = res.data;
    if (msg.id === null) return;
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    clearTimeout(p.timer);
    if (msg.ok) p.resolve(msg.result);
    else
      p.reject(
        new UisError({
          code: bridgeCode(msg.error.code),
          message: msg.error.message,
          ...(msg.error.path ? { path: msg.error.path } : {}),
        }),
      );
  }

  private onExit(code: number | null, signal: string | null): void {
    this.exited = true;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(
        bridgeError(
          'ray_bridge_exited',
          `the Ray bridge exited (code ${code}, signal ${signal}) during ${p.method}`,
          p.method,
        ),
      );
      this.pending.delete(id);
    }
  }
}

function parseEvent(line: string): BridgeEvent | undefined {
  try {
    const r = BridgeEventSchema.safeParse(JSON.parse(line));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}
