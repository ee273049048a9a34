import { initTRPC, TRPCError, type TRPCMutationProcedure, type TRPCQueryProcedure } from '@trpc/server';
import {
  type ConsoleState,
  type GpuTimeReport,
  isErrorCode,
  type TimeSeriesUpdate,
  UisError,
  zodIssues,
} from '@uis/spec';
import { z } from 'zod';
import type { AnyCommand, Command, Permission } from '../commands/define.ts';
import { type CommandAnswer, checkOperationId, runCommand } from '../commands/run-command.ts';
import { COMMAND_TABLE } from '../commands/table.ts';
import type { ControlPlane } from '../control-plane.ts';
import { type ChangeFeed, pause } from './change-feed.ts';
import { trpcCodeOf } from './error-codes.ts';

/** Per request: the raw `Authorization` header (`Bearer <token>`), or null. */
export interface TrpcContext {
  authorization: string | null;
  /** The caller's address (the gateway's auth-failure limiter counts per address). */
  client?: string | null;
}

export interface AppRouterDeps {
  plane: ControlPlane;
  /** Why a request's `Authorization` header may not run a command of `permission` (`unauthorized` 401 or
   * `forbidden` 403, from `permissionRefusal`), or null when it may: the gateway's token check, the same one its
   * admin REST door uses. */
  refuse: (authorization: string | null, permission: Permission) => UisError | null;
  /** Seconds a client locked out by failed authentications must wait (0: not locked). The console's sign-in asks
   * after checking its token, so a valid token is never refused (absent: no limiter). */
  lockedOut?: (client: string) => number;
  state: () => ConsoleState;
  feed: ChangeFeed;
  /** Least time between two pushed states. Default 250 ms. */
  throttleMs?: number;
  /** The console's time series and GPU-time feeds (absent: those subscriptions end at once). */
  observability?: {
    timeSeries(signal: AbortSignal | undefined): AsyncIterable<TimeSeriesUpdate>;
    gpuTime(signal: AbortSignal | undefined): AsyncIterable<GpuTimeReport>;
  };
}

/** `drain_model` -> `drainModel`. */
type Camel<S extends string> = S extends `${infer H}_${infer T}` ? `${H}${Capitalize<Camel<T>>}` : S;
const camel = (s: string) => s.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());

/** A command's tRPC input: its params and its input's fields side by side (a non-object input, e.g. a weight
 * update, under `input`), plus `operation_id` for keyed commands. */
type Fields<S extends z.ZodObject> = keyof S['shape'] extends never ? unknown : z.input<S>;
type ProcedureInput<C> =
  C extends Command<infer P, infer I, z.ZodType, 'GET' | 'POST'>
    ? Fields<P> & (I extends z.ZodObject ? Fields<I> : { input: z.input<I> }) & { operation_id?: string }
    : never;
type Procedure<C> =
  C extends Command<z.ZodObject, z.ZodType, infer O, infer M>
    ? M extends 'GET'
      ? TRPCQueryProcedure<{ input: ProcedureInput<C>; output: CommandAnswer<z.output<O>>; meta: object }>
      : TRPCMutationProcedure<{ input: ProcedureInput<C>; output: CommandAnswer<z.output<O>>; meta: object }>
    : never;
type Table = typeof COMMAND_TABLE;
export type CommandProcedures = { [K in keyof Table as Camel<K & string>]: Procedure<Table[K]> };

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

/** A manager's error about one of the procedure's fields (`model`), named as the console sent it (`input.model`). */
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
 * The console's API: `state`, the `changes` subscription (SSE), the token check, and one procedure per command of
 * the table (camelCase of its name; GET commands are queries), run by `runCommand` like every other door: same
 * audit record (actor `console`), same operation ids, same answer envelope.
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
  const { plane } = deps;
  const procedureOf = (cmd: AnyCommand) => {
    const base = t.procedure.use(({ ctx, next }) => {
      const refused = deps.refuse(ctx.authorization, cmd.permission);
      if (refused)
        throw new TRPCError({ code: trpcCodeOf(refused), message: refused.message, cause: refused });
      return next();
    });
    // Validation is the command's own (runCommand), so errors name `input.<field>` the same way for all fields.
    const input = z.record(z.string(), z.unknown()).optional();
    const paramNames = Object.keys(cmd.params.shape);
    const objectInput = cmd.input instanceof z.ZodObject;
    const run = async (opts: {
      input: Record<string, unknown> | undefined;
      signal?: AbortSignal | undefined;
    }) => {
      const raw = opts.input ?? {};
      const signal = opts.signal;
      const { operation_id, ...rest } = raw;
      const params = Object.fromEntries(paramNames.map((n) => [n, rest[n]]));
      const fields = Object.fromEntries(Object.entries(rest).filter(([k]) => !paramNames.includes(k)));
      try {
        if (operation_id !== undefined && typeof operation_id !== 'string')
          throw new UisError({
            code: 'invalid_input',
            path: 'input.operation_id',
            message: 'operation_id must be a string',
          });
        return await runCommand(plane, cmd, {
          params,
          input: objectInput ? fields : fields.input,
          actor: 'console',
          operationId:
            operation_id === undefined ? null : checkOperationId(operation_id, 'input.operation_id'),
          ...(signal ? { signal } : {}),
          inputRoot: objectInput ? 'input' : 'input.input',
          paramsRoot: 'input',
          fallbackSubject: cmd.name,
        });
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        // The error table's status, as the REST door answers it (unknown_role 404, a conflict 409, ...).
        throw new TRPCError({ code: trpcCodeOf(e), message, cause: inInput(e, raw) });
      }
    };
    const p = base.input(input);
    return cmd.method === 'GET' ? p.query(run) : p.mutation(run);
  };
  const commands = Object.fromEntries(
    Object.values(COMMAND_TABLE).map((c) => [camel(c.name), procedureOf(c as AnyCommand)]),
  ) as unknown as CommandProcedures;
  return t.router({
    ...commands,
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
      if (deps.observability) yield* deps.observability.timeSeries(opts.signal);
    }),
    gpuTime: t.procedure.subscription(async function* (opts) {
      if (deps.observability) yield* deps.observability.gpuTime(opts.signal);
    }),
    checkToken: t.procedure.input(z.object({ token: z.string() })).mutation(({ input, ctx }) => ({
      ok: true as const,
      permission: tokenPermission(deps, input.token, ctx.client ?? null),
    })),
  });
}

/** What the console's sign-in token grants: `admin` (every command), `serving` (reads only: the serving token, when
 * one is configured), else 401 (counted by the gateway's auth-failure limiter). Without a serving token reads are
 * open, so any token "passes" a read: only a configured serving token can grant `serving`. Nothing else is told. */
function tokenPermission(deps: AppRouterDeps, token: string, client: string | null): 'admin' | 'serving' {
  const header = `Bearer ${token}`;
  if (deps.refuse(header, 'admin') === null) return 'admin';
  const readsNeedToken = deps.refuse(null, 'serving') !== null;
  if (readsNeedToken && deps.refuse(header, 'serving') === null) return 'serving';
  const wait = client === null ? 0 : (deps.lockedOut?.(client) ?? 0);
  if (wait > 0) {
    const message = `too many failed authentications from ${client}; retry after ${wait} s (a valid token is not refused)`;
    throw new TRPCError({
      code: 'TOO_MANY_REQUESTS',
      message,
      cause: new UisError({ code: 'auth_rate_limited', path: 'input.token', message }),
    });
  }
  throw new TRPCError({ code: 'UNAUTHORIZED', message: 'token refused' });
}

export type AppRouter = ReturnType<typeof buildAppRouter>;
