import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { flagName, freePorts, LogRing, SGLangRouterClient } from '@uis/sglang-engine';
import { type Clock, type InferenceModelSpec, type RouterSpec, systemClock, UisError } from '@uis/spec';
import { ConfirmingRouterRegistrar } from './confirming-registrar.ts';

export interface RouterProcessOptions {
  /** Policy and extra flags (`args`: snake_case or kebab names; `true` is a bare flag, `false` omits it). */
  router?: Partial<RouterSpec>;
  /** Bind host. Default 127.0.0.1 (the gateway proxies to it; nothing else should reach the router). */
  host?: string;
  /** Default: a free port. */
  port?: number;
  python?: string;
  /** Deadline for the router to answer /liveness. Default 60 s. */
  startTimeoutMs?: number;
  onLog?: (line: string) => void;
  /** The start deadline's and its polls' time source. */
  clock?: Clock;
}

/** Flags the manager sets itself: a spec that sets them would fight the managed process. */
const RESERVED = new Set(['host', 'port', 'worker-urls', 'policy', 'prometheus-port', 'prometheus-host']);

/** The router's command line for one model: no initial workers (the manager registers replicas as they become
 * eligible), its own Prometheus port (the default 29000 would clash between routers). */
export function routerArgv(
  spec: Partial<RouterSpec>,
  host: string,
  port: number,
  metricsPort: number,
): string[] {
  const argv = ['-m', 'sglang_router.launch_router', '--host', host, '--port', String(port)];
  argv.push('--policy', spec.policy ?? 'cache_aware');
  argv.push('--prometheus-host', host, '--prometheus-port', String(metricsPort));
  for (const [key, value] of Object.entries(spec.args ?? {})) {
    const flag = flagName(key);
    if (RESERVED.has(flag.slice(2)))
      throw new UisError({
        code: 'router_arg_reserved',
        path: `router.args.${key}`,
        message: `${flag} is set by the manager for the router it starts; remove it from router.args`,
      });
    if (value === false) continue;
    if (value === true) argv.push(flag);
    else argv.push(flag, String(value));
  }
  return argv;
}

/** `python -m sglang_router.launch_router` as a managed process (own process group, stopped with it). The
 * manager's router sync registers and removes workers through `client`; discovery publishes `url`. */
export class SGLangRouterProcess {
  /** Raw router API (list, add, remove). */
  readonly client: SGLangRouterClient;
  /** What the manager's router sync uses: each change returns once the router shows it applied. */
  readonly registrar: ConfirmingRouterRegistrar;
  private readonly logs = new LogRing(500);
  private exited = false;
  private readonly exit: Promise<void>;
  private stopping: Promise<void> | undefined;
  private readonly exitCallbacks: Array<(code: number | null, signal: string | null) => void> = [];

  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
    onLog: ((line: string) => void) | undefined,
  ) {
    this.client = new SGLangRouterClient(url);
    this.registrar = new ConfirmingRouterRegistrar(this.client);
    this.exit = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.exited = true;
        if (!this.stopping) for (const cb of this.exitCallbacks) cb(code, signal);
        resolve();
      }),
    );
    for (const stream of [child.stdout, child.stderr]) {
      if (!stream) continue;
      createInterface({ input: stream }).on('line', (l) => {
        this.logs.push(l);
        onLog?.(l);
      });
    }
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The router of a `route_mode: sglang_router` model, with the policy and args of its `router` spec. */
  static forModel(
    model: InferenceModelSpec,
    opts: Omit<RouterProcessOptions, 'router'> = {},
  ): Promise<SGLangRouterProcess> {
    return SGLangRouterProcess.start({ ...opts, router: model.router ?? {} });
  }

  static async start(opts: RouterProcessOptions = {}): Promise<SGLangRouterProcess> {
    const host = opts.host ?? '127.0.0.1';
    const [free, metrics] = await freePorts(2, host);
    const port = opts.port ?? (free as number);
    const argv = routerArgv(opts.router ?? {}, host, port, metrics as number);
    const child = spawn(opts.python ?? 'python3', argv, {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NO_COLOR: '1', RUST_LOG_STYLE: 'never' },
    });
    const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
    const proc = new SGLangRouterProcess(child, url, opts.onLog);
    const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
    const clock = opts.clock ?? systemClock;
    const deadline = clock.now() + (opts.startTimeoutMs ?? 60_000);
    for (;;) {
      const failed = await Promise.race([spawnError, clock.sleep(200).then(() => undefined)]);
      if (failed || proc.exited) {
        await proc.stop(0);
        throw new UisError({
          code: 'router_start_failed',
          path: 'router',
          message: `sglang_router did not start: ${failed?.message ?? 'it exited'}\n${proc.logTail(20)}`,
        });
      }
      if (await live(url)) return proc;
      if (clock.now() > deadline) {
        await proc.stop(0);
        throw new UisError({
          code: 'router_start_timeout',
          path: 'router',
          message: `sglang_router not live within ${opts.startTimeoutMs ?? 60_000} ms\n${proc.logTail(20)}`,
        });
      }
    }
  }

  /** Called when the router exits without `stop()` having been asked. */
  onExit(cb: (code: number | null, signal: string | null) => void): void {
    this.exitCallbacks.push(cb);
  }

  logTail(lines = 50): string {
    return this.logs.tail(lines);
  }

  /** SIGTERM to the router's process group, SIGKILL after `graceMs`. Idempotent. */
  stop(graceMs = 5_000): Promise<void> {
    if (!this.stopping)
      this.stopping = (async () => {
        await this.client.close();
        if (this.exited) return;
        const pid = this.child.pid as number;
        signalGroup(pid, 'SIGTERM');
        const timer = setTimeout(() => signalGroup(pid, 'SIGKILL'), graceMs);
        await this.exit;
        clearTimeout(timer);
        // Anything left in the group (the router is one process today; stay safe if it forks).
        signalGroup(pid, 'SIGKILL');
      })();
    return this.stopping;
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    /* already gone */
  }
}

async function live(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/liveness`, { signal: AbortSignal.timeout(2_000) });
    await res.text();
    return res.ok;
  } catch {
    return false;
  }
}
