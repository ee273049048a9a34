import { initTRPC, TRPCError } from '@trpc/server';
import { type ConsoleState, type GpuTimeReport, RoleSchema, type TimeSeriesUpdate } from '@uis/spec';
import { z } from 'zod';
import type { AppOutput } from '../src/api/app-router.ts';

/** The console's part of the gateway's tRPC contract as a local router, for tests and console development: the
 * mock gateway (`mock-gateway-server.ts`, `mock-gateway.ts`) serves it over a simulated state. The control plane's
 * router has the same procedure names, inputs and outputs (see README.md); nothing here reaches the bundle. */

export interface ConsoleApiContext {
  /** The raw `Authorization` header of the request (`Bearer <token>`), or null. */
  authorization: string | null;
}

export const RoleModelInputSchema = z.object({ role: RoleSchema, model: z.string().min(1) });
export const AdvancePhaseInputSchema = z.object({
  group: z.string().min(1),
  to: z.string().min(1).optional(),
});
export const ResolveLeaseInputSchema = z.object({
  group: z.string().min(1),
  phase: z.string().min(1),
  note: z.string().optional(),
});
export const RestartReplicaInputSchema = z.object({ role: RoleSchema, engine_id: z.string().min(1) });
export type RoleModelInput = z.infer<typeof RoleModelInputSchema>;
export type AdvancePhaseInput = z.infer<typeof AdvancePhaseInputSchema>;
export type ResolveLeaseInput = z.infer<typeof ResolveLeaseInputSchema>;
export type RestartReplicaInput = z.infer<typeof RestartReplicaInputSchema>;

type Result<
  K extends
    | 'drainModel'
    | 'activateModel'
    | 'advancePhase'
    | 'resolveLease'
    | 'restartReplica'
    | 'weightSwitches',
> = AppOutput<K>['result'];

/** What a server behind the contract provides: each action answers its command's result (the router wraps it in
 * the `{ok, operation_id, result}` envelope) or throws (any Error) to refuse with its message. */
export interface ConsoleApiImpl {
  state(): ConsoleState | Promise<ConsoleState>;
  /** Yields the current state first, then a full state whenever something changed; ends when `signal` aborts. */
  changes(signal: AbortSignal): AsyncIterable<ConsoleState>;
  adminToken: string;
  /** When set, reads (the state query and the subscriptions) need this token or the admin token. */
  servingToken?: string;
  drainModel(input: RoleModelInput): Promise<Result<'drainModel'>>;
  activateModel(input: RoleModelInput): Promise<Result<'activateModel'>>;
  advancePhase(input: AdvancePhaseInput): Promise<Result<'advancePhase'>>;
  /** Unblocks a blocked lease: the operator attests the GPUs are in `phase`'s state; the lease is held there. */
  resolveLease(input: ResolveLeaseInput): Promise<Result<'resolveLease'>>;
  restartReplica(input: RestartReplicaInput): Promise<Result<'restartReplica'>>;
  /** A model's weight switches (absent: the model never switched). */
  weightSwitches?(input: RoleModelInput): Promise<Result<'weightSwitches'>>;
  /** The time series window, then the seconds completed since, every second (absent: ends at once). */
  timeSeries?(signal: AbortSignal): AsyncIterable<TimeSeriesUpdate>;
  /** The GPU-time report per RL step, then again on each change (absent: ends at once). */
  gpuTime?(signal: AbortSignal): AsyncIterable<GpuTimeReport>;
}

export function buildConsoleApiRouter(impl: ConsoleApiImpl) {
  const t = initTRPC.context<ConsoleApiContext>().create();
  const servingSet = impl.servingToken !== undefined;
  const callerOf = (authorization: string | null): 'admin' | 'serving' | null => {
    if (authorization === `Bearer ${impl.adminToken}`) return 'admin';
    if (servingSet && authorization === `Bearer ${impl.servingToken}`) return 'serving';
    return null;
  };
  const admin = t.procedure.use(({ ctx, next }) => {
    const caller = callerOf(ctx.authorization);
    if (caller === 'serving')
      throw new TRPCError({ code: 'FORBIDDEN', message: 'this command needs the admin token' });
    if (caller !== 'admin') throw new TRPCError({ code: 'UNAUTHORIZED', message: 'admin token refused' });
    return next();
  });
  const read = t.procedure.use(({ ctx, next }) => {
    if (servingSet && callerOf(ctx.authorization) === null)
      throw new TRPCError({ code: 'UNAUTHORIZED', message: 'this read needs the serving or admin token' });
    return next();
  });
  const act = async <R>(
    run: () => Promise<R>,
  ): Promise<{ ok: true; operation_id: string | null; result: R }> => {
    try {
      return { ok: true, operation_id: null, result: await run() };
    } catch (e) {
      throw new TRPCError({ code: 'BAD_REQUEST', message: e instanceof Error ? e.message : String(e) });
    }
  };
  return t.router({
    state: read.query(() => impl.state()),
    changes: read.subscription(async function* (opts) {
      for await (const state of impl.changes(opts.signal ?? new AbortController().signal)) yield state;
    }),
    timeSeries: read.subscription(async function* (opts) {
      if (impl.timeSeries) yield* impl.timeSeries(opts.signal ?? new AbortController().signal);
    }),
    gpuTime: read.subscription(async function* (opts) {
      if (impl.gpuTime) yield* impl.gpuTime(opts.signal ?? new AbortController().signal);
    }),
    checkToken: t.procedure.input(z.object({ token: z.string() })).mutation(({ input }) => {
      const permission = callerOf(`Bearer ${input.token}`);
      if (permission === null) throw new TRPCError({ code: 'UNAUTHORIZED', message: 'token refused' });
      return { ok: true as const, permission };
    }),
    drainModel: admin.input(RoleModelInputSchema).mutation(({ input }) => act(() => impl.drainModel(input))),
    activateModel: admin
      .input(RoleModelInputSchema)
      .mutation(({ input }) => act(() => impl.activateModel(input))),
    advancePhase: admin
      .input(AdvancePhaseInputSchema)
      .mutation(({ input }) => act(() => impl.advancePhase(input))),
    resolveLease: admin
      .input(ResolveLeaseInputSchema)
      .mutation(({ input }) => act(() => impl.resolveLease(input))),
    restartReplica: admin
      .input(RestartReplicaInputSchema)
      .mutation(({ input }) => act(() => impl.restartReplica(input))),
    weightSwitches: read
      .input(RoleModelInputSchema)
      .query(({ input }) =>
        act(
          async () =>
            (await impl.weightSwitches?.(input)) ?? { model: input.model, switching: false, switches: [] },
        ),
      ),
  });
}

export type ConsoleApiRouter = ReturnType<typeof buildConsoleApiRouter>;
