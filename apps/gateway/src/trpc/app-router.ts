import { initTRPC, TRPCError } from '@trpc/server';
import type { ControlPlane } from '@uis/control-plane';
import {
  type ConsoleState,
  type GpuTimeReport,
  isErrorCode,
  type Role,
  type TimeSeriesUpdate,
  UisError,
  zodIssues,
} from '@uis/spec';
import { z } from 'zod';
import { authorized } from '../gateway/auth.ts';
import type { Observability } from '../metrics/observability.ts';
import { type ChangeFeed, pause } from './change-feed.ts';
import { gpuTimeUpdates, timeSeriesUpdates } from './observability-feeds.ts';

/** Per request: the raw `Authorization` header (`Bearer <token>`), or null. */
export interface TrpcContext {
  authorization: string | null;
}

export interface AppRouterDeps {
  plane: ControlPlane;
  adminToken: string;
  state: () => ConsoleState;
  feed: ChangeFeed;
  /** Least time between two pushed states. Default 250 ms. */
  throttleMs?: number;
  /** Time series and GPU-time view (absent: those subscriptions end at once). */
  observability?: Observability;
}

// Role as a plain string, as the console sends it; an unknown role is refused with a message.
const RoleModelInput = z.object({ role: z.string().min(1), model: z.string().min(1) });

/** The product's error object for a tRPC error: the UisError that caused it, the input's first zod issue (path
 * `input.<field>`), or tRPC's own code. tRPC keeps its envelope (the console's client reads it); `data.error` is the
 * `{code, message, path?}` every other API answers with. */
function productError(error: TRPCError): UisError {
  const cause = error.cause;
  if (cause instanceof UisError) return cause;
  if (cause instanceof z.ZodError) {
    const issues = zodIssues(cause, 'input');
    return new UisError({
      code: 'invalid_input',
      path: issues[0]?.path ?? 'input',
      message: issues.map((i) => `${i.path}: ${i.message}`).join('; '),
    });
  }
  if (cause instanceof SyntaxError)
    return new UisError({ code: 'invalid_json', path: 'input', message: error.message });
  const code = error.code.toLowerCase();
  return new UisError({ code: isErrorCode(code) ? code : 'internal_error', message: error.message });
}

/** A manager's error about one of the procedure's input fields (`model`), named as the console sent it
 * (`input.model`). */
function inInput(e: unknown, input: object): unknown {
  if (!(e instanceof UisError) || e.path === undefined || !Object.hasOwn(input, e.path)) return e;
  return new UisError({
    code: e.code,
    relayedStatus: e.status,
    path: `input.${e.path}`,
    message: e.message,
    details: e.details,
    cause: e,
  });
}

/**
 * The console's API (the contract in apps/console/README.md): `state`, the `changes` subscription (SSE), the
 * token check, and five admin actions that need the admin token and are written to the event log with actor
 * `console`.
 */
export function buildAppRouter(deps: AppRouterDeps) {
  const t = initTRPC.context<TrpcContext>().create({
    // No stack traces in answers (tRPC sends them unless NODE_ENV is production): they show the server's files.
    isDev: false,
    errorFormatter: ({ shape, error }) => {
      const product = productError(error);
      return {
        ...shape,
        // A zod dump as the message is unreadable in the console: the issues' paths and messages instead.
        message: error.cause instanceof z.ZodError ? product.message : shape.message,
        data: { ...shape.data, error: product.toJSON().error },
      };
    },
  });
  const admin = t.procedure.use(({ ctx, next }) => {
    if (!authorized(ctx.authorization, [deps.adminToken]))
      throw new TRPCError({ code: 'UNAUTHORIZED', message: 'admin token refused' });
    return next();
  });
  const { plane } = deps;
  const act = async (
    kind: string,
    subject: string,
    input: object,
    run: () => Promise<string>,
  ): Promise<{ ok: true; message: string }> => {
    try {
      const message = await run();
      plane.events.append({
        kind: `admin.${kind}`,
        subject,
        actor: 'console',
        data: { ok: true, ...input },
      });
      return { ok: true, message };
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      plane.events.append({
        kind: `admin.${kind}`,
        subject,
        actor: 'console',
        data: { ok: false, error: message, ...input },
      });
      throw new TRPCError({ code: 'BAD_REQUEST', message, cause: inInput(e, input) });
    }
  };
  // An unknown role is the service's unknown_role at `role`, which `act` reports at `input.role`.
  const manager = (role: string) => plane.managerOf(role);
  return t.router({
    state: t.procedure.query(() => deps.state()),
    changes: t.procedure.subscription(async function* (opts) {
      const signal = opts.signal ?? new AbortController().signal;
      let seen = deps.feed.current;
      yield deps.state();
      while (!signal.aborted) {
        seen = await deps.feed.after(seen, signal);
        if (signal.aborted) return;
        // Throttle: changes that arrive meanwhile are folded into the next push.
        await pause(deps.throttleMs ?? 250, signal);
        if (signal.aborted) return;
        seen = deps.feed.current;
        yield deps.state();
      }
    }),
    timeSeries: t.procedure.subscription(async function* (opts) {
      if (deps.observability)
        yield* timeSeriesUpdates(deps.observability.ring, opts.signal) as AsyncIterable<TimeSeriesUpdate>;
    }),
    gpuTime: t.procedure.subscription(async function* (opts) {
      if (deps.observability)
        yield* gpuTimeUpdates(deps.observability.gpuTime, opts.signal) as AsyncIterable<GpuTimeReport>;
    }),
    checkToken: t.procedure.input(z.object({ token: z.string() })).mutation(({ input }) => {
      if (!authorized(`Bearer ${input.token}`, [deps.adminToken]))
        throw new TRPCError({ code: 'UNAUTHORIZED', message: 'admin token refused' });
      return { ok: true as const };
    }),
    drainModel: admin.input(RoleModelInput).mutation(({ input }) =>
      act('drain_model', `${input.role}/${input.model}`, input, async () => {
        const report = await manager(input.role).drainModel(input.model);
        return `${input.role}/${input.model} drained (${report.engines.length} replicas, memory released: ${report.memoryReleased})`;
      }),
    ),
    activateModel: admin.input(RoleModelInput).mutation(({ input }) =>
      act('activate_model', `${input.role}/${input.model}`, input, async () => {
        manager(input.role);
        const r = await plane.activateModel(input.role as Role, input.model);
        const name = `${input.role}/${input.model}`;
        if (r.onloaded || r.waits_for === undefined) return `${name} activated`;
        const w = r.waits_for;
        return `${name} released: it onloads with phase ${w.phases.join(' or ')} (${w.group} is in ${w.phase ?? 'no phase'} now)`;
      }),
    ),
    advancePhase: admin
      .input(z.object({ group: z.string().min(1), to: z.string().min(1).optional() }))
      .mutation(({ input }) =>
        act('advance_phase', input.group, input, async () => {
          const r = await plane.coordinator.transition({
            group: input.group,
            actor: 'console',
            ...(input.to === undefined ? {} : { to: input.to }),
          });
          return `${r.group}: ${r.from ?? '(none)'} -> ${r.path.join(' -> ')} in ${Math.round(r.duration_ms)} ms`;
        }),
      ),
    // The operator attests the engines are in `phase`'s state (checked by hand): the lease is held there again.
    resolveLease: admin
      .input(z.object({ group: z.string().min(1), phase: z.string().min(1), note: z.string().optional() }))
      .mutation(({ input }) =>
        act('resolve_lease', input.group, input, async () => {
          const lease = plane.coordinator.resolve({
            group: input.group,
            phase: input.phase,
            actor: 'console',
            ...(input.note === undefined ? {} : { note: input.note }),
          });
          return `${lease.group}: lease resolved at ${lease.phase}, held by ${lease.holder.join(', ') || 'nobody'}`;
        }),
      ),
    restartReplica: admin.input(z.object({ engine_id: z.string().min(1) })).mutation(({ input }) =>
      act('restart_replica', input.engine_id, input, async () => {
        for (const m of plane.managers.values()) {
          const owns = Object.values(m.snapshot().models).some((x) =>
            x.replicas.some((r) => r.engine_id === input.engine_id),
          );
          if (owns) {
            const r = await m.restartReplica(input.engine_id);
            return r.restarted
              ? `${input.engine_id} restarted`
              : `${input.engine_id} stopped; it relaunches when its model onloads (the model is asleep)`;
          }
        }
        throw new UisError({
          code: 'unknown_engine',
          path: 'input.engine_id',
          message: `no replica ${input.engine_id}`,
        });
      }),
    ),
  });
}

export type AppRouter = ReturnType<typeof buildAppRouter>;
