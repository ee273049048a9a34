import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { type ControlPlane, type ControlPlaneOptions, createControlPlane, planOf } from '@uis/control-plane';
import type { Launcher } from '@uis/manager';
import { forceStopEngines } from '@uis/sglang-engine';
import { configuredRoles, type ErrorCode, type LauncherKind, type UisConfig, UisError } from '@uis/spec';
import type pino from 'pino';
import { createLogger, UisServer } from '../server/uis-server.ts';
import { createTracing } from '../tracing/create-tracing.ts';

export interface RunServerOptions {
  config: UisConfig;
  launcher: Launcher | LauncherKind;
  port: number;
  host: string;
  /** Where port and host came from, for errors (`--port`, `gateway.port`). Default: the flags. */
  listenPaths?: { port: string; host: string };
  dbPath?: string;
  /** `--adopt-engines` (default: `gateway.adopt_engines`). */
  adoptEngines?: boolean;
  /** Printed banner title. */
  title: string;
  /** Started once the server listens (the demo's driver); stopped first on shutdown. */
  extra?: (ctx: { url: string; adminToken: string; plane: ControlPlane; logger: pino.Logger }) => {
    stop(): Promise<void>;
  };
  managerOptions?: ControlPlaneOptions['managerOptions'];
  /** Extra cleanup after the service stopped (e.g. in-process engines). */
  cleanup?: () => Promise<void>;
  out?: (text: string) => void;
  /** How long a shutdown (or the cleanup of a failed start) may take before every engine this process launched
   * and still runs is killed. Default 30 s, `UIS_SHUTDOWN_DEADLINE_MS` overrides. */
  shutdownDeadlineMs?: number;
  /** pino level of the logs (`--log-level`); default `UIS_LOG_LEVEL`, else info. */
  logLevel?: string;
  /** How long one engine may take to become healthy (`--start-deadline`); default the manager's 600 s. */
  startDeadlineMs?: number;
}

const DEFAULT_SHUTDOWN_DEADLINE_MS = 30_000;

function shutdownDeadline(opts: RunServerOptions): number {
  const env = Number(process.env.UIS_SHUTDOWN_DEADLINE_MS);
  return opts.shutdownDeadlineMs ?? (Number.isFinite(env) && env > 0 ? env : DEFAULT_SHUTDOWN_DEADLINE_MS);
}

/** Runs `stop`; when it is still running after `ms`, kills every engine process group left and says which. A
 * shutdown never waits on an engine (or anything else) that does not answer. */
export async function stopWithin(
  ms: number,
  stop: () => Promise<void>,
  out: (text: string) => void,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'expired'>((r) => {
    timer = setTimeout(() => r('expired'), ms);
  });
  const outcome = await Promise.race([stop().then(() => 'done' as const), expired]);
  clearTimeout(timer);
  if (outcome === 'done') return;
  const killed = forceStopEngines();
  out(
    `shutdown did not finish within ${ms} ms: ${killed.length === 0 ? 'no engine process was left to kill' : `killed ${killed.join(', ')}`}\n`,
  );
}

/** The admin token: config, else `UIS_ADMIN_TOKEN`, else a fresh random one (printed once). */
export function adminTokenFor(config: UisConfig): { token: string; generated: boolean } {
  const given = config.gateway?.admin_token ?? process.env.UIS_ADMIN_TOKEN;
  if (given !== undefined && given !== '') return { token: given, generated: false };
  return { token: randomBytes(18).toString('base64url'), generated: true };
}

/** A failed listen as a 400 UisError at the flag or config field to change. */
export function listenError(
  e: unknown,
  port: number,
  host: string,
  paths: { port: string; host: string },
): UisError {
  const errno = (e as NodeJS.ErrnoException).code;
  const [code, path, message]: [ErrorCode, string, string] =
    errno === 'EADDRINUSE'
      ? [
          'port_in_use',
          paths.port,
          `port ${port} on ${host} is in use; choose another port or stop what holds it`,
        ]
      : errno === 'EACCES'
        ? [
            'port_forbidden',
            paths.port,
            `port ${port} needs privileges this process lacks; choose a port above 1023`,
          ]
        : errno === 'EADDRNOTAVAIL' || errno === 'ENOTFOUND' || errno === 'EAI_AGAIN'
          ? ['host_unavailable', paths.host, `cannot listen on ${host}: not an address of this machine`]
          : [
              'listen_failed',
              paths.port,
              `cannot listen on ${host}:${port}: ${e instanceof Error ? e.message : String(e)}`,
            ];
  return new UisError({ code, path, message, cause: e });
}

/** Binds and releases the address once, so a taken port or a foreign host fails before any engine starts. */
async function checkListen(port: number, host: string, paths: { port: string; host: string }): Promise<void> {
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', (e) => reject(listenError(e, port, host, paths)));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/** The control plane `runServer` starts: the CLI's launcher, database and adoption, a start `signal` cancels. */
function planeOptions(opts: RunServerOptions, logger: pino.Logger, signal: AbortSignal): ControlPlaneOptions {
  return {
    signal,
    config: opts.config,
    launcher: opts.launcher,
    logger,
    ...(opts.dbPath === undefined ? {} : { dbPath: opts.dbPath }),
    ...(opts.adoptEngines === undefined ? {} : { adoptEngines: opts.adoptEngines }),
    // Another uis took the database over while this one hung: it owns the leases and engines now, so this process
    // exits at once without stopping anything (its own watchdog-bound engines die with it).
    onDatabaseLost: (holder) => {
      process.stderr.write(`uis: ${holder} took the database over; exiting without touching its engines\n`);
      process.exit(1);
    },
    ...(opts.managerOptions === undefined && opts.startDeadlineMs === undefined
      ? {}
      : {
          managerOptions: {
            ...opts.managerOptions,
            ...(opts.startDeadlineMs === undefined ? {} : { startDeadlineMs: opts.startDeadlineMs }),
          },
        }),
  };
}

/**
 * Starts a ControlPlane and its UisServer, prints where everything is, and stops cleanly on SIGINT/SIGTERM (engines
 * stopped, their process groups gone) before exiting. A second signal exits at once.
 */
export async function runServer(opts: RunServerOptions): Promise<void> {
  const out = opts.out ?? ((t: string) => process.stdout.write(t));
  const listenPaths = opts.listenPaths ?? { port: '--port', host: '--host' };
  await checkListen(opts.port, opts.host, listenPaths);
  const logger = createLogger(opts.logLevel);
  // Planned first: an invalid layout is refused before anything starts, and the banner names what will run.
  const plan = planOf(opts.config);
  let plane: ControlPlane | null = null;
  let stopping: Promise<void> | null = null;
  let server: UisServer | null = null;
  let extra: { stop(): Promise<void> } | null = null;
  // A signal during the start cancels it: engines still loading are stopped instead of awaited.
  const cancelStart = new AbortController();
  const starting = createControlPlane(planeOptions(opts, logger, cancelStart.signal));
  const deadlineMs = shutdownDeadline(opts);
  const stop = (signal: string) => {
    if (stopping) {
      out(`\n${signal} again: exiting now\n`);
      process.exit(130);
    }
    out(`\n${signal}: stopping (engines are shut down first)...\n`);
    stopping = stopWithin(
      deadlineMs,
      async () => {
        await extra?.stop().catch(() => undefined);
        // Relayed requests get a few seconds to finish; hour-long streams are cut (clients retry elsewhere).
        await server?.close({ graceMs: 5000 }).catch(() => undefined);
        // A signal during the start cancels it and waits for its rollback: nothing it brought up may outlive the
        // stop (a cancelled start has stopped what it started).
        if (plane === null)
          cancelStart.abort(
            new UisError({
              code: 'service_stopping',
              message: `${signal} during the start: start cancelled`,
            }),
          );
        const started = plane ?? (await starting.catch(() => null));
        await started?.stop();
        await opts.cleanup?.();
      },
      out,
    ).then(() => out('stopped\n'));
    stopping.then(
      () => process.exit(0),
      (e: unknown) => {
        process.stderr.write(`uis: shutdown failed: ${e instanceof Error ? e.message : String(e)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));

  const { token, generated } = adminTokenFor(opts.config);
  const servingToken = opts.config.gateway?.serving_token ?? process.env.UIS_SERVING_TOKEN;
  const scaleToken = opts.config.gateway?.scale_token ?? process.env.UIS_SCALE_TOKEN;
  const roles = configuredRoles(opts.config).map((r) => r.role);
  out(`${opts.title}: starting ${roles.join(', ')} (${plural(plan.placements.length, 'engine group')})...\n`);
  try {
    plane = await starting;
  } catch (e) {
    // Cancelled by a signal: the stop under way reports and exits.
    if (stopping) return;
    // The failed start was rolled back; whatever still runs behind it is killed at the deadline.
    await stopWithin(deadlineMs, async () => opts.cleanup?.(), out);
    throw e;
  }
  if (stopping) return;
  server = new UisServer({
    plane,
    adminToken: token,
    logger,
    accessLog: opts.config.gateway?.access_log ?? false,
    ...(opts.config.gateway === undefined ? {} : { front: opts.config.gateway.front }),
    tracing: await createTracing(opts.config.gateway?.tracing),
    ...(servingToken ? { servingToken } : {}),
    ...(scaleToken ? { scaleToken } : {}),
    scaleOpen: opts.config.gateway?.scale_auth === 'open',
    ...serverLimitsOf(opts.config),
    // The listen address names this server too (a host name given to --host).
    allowedHosts: [...(opts.config.gateway?.allowed_hosts ?? []), opts.host],
  });
  let url: string;
  try {
    let port: number;
    ({ url, port } = await server.listen(opts.port, opts.host));
    plane.holder?.listening(port);
  } catch (e) {
    // The port was taken since the check: nothing may stay running behind the error.
    await server.close().catch(() => undefined);
    await plane.stop();
    await opts.cleanup?.();
    throw listenError(e, opts.port, opts.host, listenPaths);
  }
  const lines = [
    '',
    `  console     ${url}/`,
    ...[...plane.managers.keys()].map(
      (r) => `  ${r.padEnd(11)} ${url}/${r}/engines   ${url}/${r}/v1/chat/completions`,
    ),
    `  admin API   ${url}/admin   (Authorization: Bearer <token>)`,
    `  metrics     ${url}/metrics`,
    `  admin token ${token}${generated ? '   (generated; set UIS_ADMIN_TOKEN to choose one)' : ''}`,
    ...(opts.config.gateway?.scale_auth === 'open'
      ? ['  warning     scale_auth: open: /<role>/scale_out and scale_in take requests without a credential']
      : []),
    '',
    'Ctrl-C stops everything.',
    '',
  ];
  out(`${lines.join('\n')}\n`);
  if (opts.extra) extra = opts.extra({ url, adminToken: token, plane, logger });
}

/** The gateway block's request limits as server options (the schema's defaults when there is no block). */
export function serverLimitsOf(config: UisConfig) {
  const g = config.gateway;
  if (g === undefined) return {};
  return {
    maxBodyBytes: g.max_body_bytes,
    bodyTimeoutMs: g.body_timeout_ms,
    bodyBudgetBytes: g.body_budget_bytes,
    maxJsonDepth: g.max_json_depth,
    passHeaders: g.pass_headers,
    admission: {
      limit: g.admission.limit,
      queue: g.admission.queue,
      queueTimeoutMs: g.admission.queue_timeout_ms,
    },
    retry: {
      maxRetries: g.retry.max_retries,
      initialBackoffMs: g.retry.initial_backoff_ms,
      maxBackoffMs: g.retry.max_backoff_ms,
      backoffMultiplier: g.retry.backoff_multiplier,
      jitter: g.retry.jitter,
    },
  };
}

/** `1 engine group`, `4 engine groups`. */
function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
