import { isUtf8 } from 'node:buffer';
import { type ControlPlane, modelReplicas, submitBatch } from '@uis/control-plane';
import { BatchKindSchema, OperationLedger, WeightUpdateRequestSchema } from '@uis/manager';
import { UisError, zodError } from '@uis/spec';
import { type Context, Hono } from 'hono';
import { z } from 'zod';
import { authorized, unauthorized } from '../gateway/auth.ts';
import { jsonBodyLimit } from '../gateway/body-limit.ts';
import { methodNotAllowed } from '../gateway/read-routes.ts';
import { asUisError, errorJson, parseJsonObject } from '../proxy/index.ts';

export interface AdminApiOptions {
  plane: ControlPlane;
  adminToken: string;
  /** Request body limit in bytes (413 above it); the serving routes' limit. */
  maxBodyBytes?: number;
}

const DrainBodySchema = z.strictObject({
  deadline_ms: z.number().int().nonnegative().optional(),
  policy: z.enum(['wait', 'abort', 'retract', 'in_place']).optional(),
});
const ActivateBodySchema = z.strictObject({
  tags: z
    .array(z.enum(['weights', 'kv_cache', 'cuda_graph']))
    .min(1)
    .optional(),
});
const EmptySchema = z.strictObject({});
const EngineBodySchema = z.strictObject({ engine_id: z.string().min(1) });
const RegisterBodySchema = z.strictObject({ url: z.string().min(1) });
const AdvanceBodySchema = z.strictObject({
  group: z.string().min(1).optional(),
  to: z.string().min(1).optional(),
});
const ResolveBodySchema = z.strictObject({
  group: z.string().min(1).optional(),
  phase: z.string().min(1),
  note: z.string().optional(),
});
const BarrierWaitSchema = z.strictObject({
  phase: z.string().min(1),
  group: z.string().min(1).optional(),
  timeout_s: z.number().positive().max(3600).default(600),
});
const BarrierReleaseSchema = z.strictObject({
  phase: z.string().min(1),
  group: z.string().min(1).optional(),
});
const BatchSubmitSchema = z.strictObject({
  kind: BatchKindSchema,
  model: z.string().min(1).nullish(),
  /** Samples as the batch store takes them: `{sample_id, input}` (GenRM messages or teacher token ids). */
  samples: z.array(z.unknown()).min(1),
});
const BatchListSchema = z.object({
  state: z.enum(['open', 'sealed', 'running', 'committed', 'failed']).optional(),
  role: z.string().min(1).optional(),
});
const EventsQuerySchema = z.object({
  after: z.coerce.number().int().nonnegative().optional(),
  limit: z.coerce.number().int().positive().max(1000).default(200),
  kind: z.string().min(1).optional(),
  subject: z.string().min(1).optional(),
});

function fail(c: Context, e: unknown) {
  const err = asUisError(e);
  return errorJson(c, err);
}

/** Reads a JSON object body; an empty body is `{}`. */
async function jsonBody(c: Context): Promise<Record<string, unknown>> {
  const bytes = Buffer.from(await c.req.arrayBuffer());
  if (isUtf8(bytes) && bytes.toString('utf8').trim() === '') return {};
  const body = parseJsonObject(bytes);
  if (body instanceof UisError) throw body;
  return body;
}

const MAX_OPERATION_ID = 200;

/** The operation id of a mutation: the `Idempotency-Key` header or the body's `operation_id` (the same one when
 * both are given). An empty id is refused: every call sending it would share one operation and get its result. */
function operationIdOf(header: string | undefined, fromBody: unknown): string | null {
  const check = (id: string, path: string) => {
    if (id.trim() === '' || id.length > MAX_OPERATION_ID)
      throw new UisError({
        code: 'invalid_input',
        path,
        message: `an operation id must be 1 to ${MAX_OPERATION_ID} characters, not blank; omit it to run without one`,
      });
    return id;
  };
  if (fromBody !== undefined && typeof fromBody !== 'string')
    throw new UisError({
      code: 'invalid_input',
      path: 'body.operation_id',
      message: 'operation_id must be a string',
    });
  const body = fromBody === undefined ? undefined : check(fromBody, 'body.operation_id');
  const head = header === undefined ? undefined : check(header, 'headers.idempotency-key');
  if (body !== undefined && head !== undefined && body !== head)
    throw new UisError({
      code: 'invalid_input',
      path: 'body.operation_id',
      message: `the Idempotency-Key header (${head}) and the body's operation_id (${body}) differ; send one id`,
    });
  return head ?? body ?? null;
}

/**
 * The admin API under `/admin`: lifecycle of roles and models, external engines, weight updates, phases,
 * trainer barriers and deferred batches. Bearer token only (401 and nothing changes without it). Every mutation
 * takes an operation id (`Idempotency-Key` header or body `operation_id`): a repeat returns the first result, the
 * same id with another request is 409. Every mutation, refused or not, is written to the event log.
 */
export function createAdminApi(opts: AdminApiOptions): Hono {
  const { plane } = opts;
  const barriers = plane.barriers;
  const ledger = new OperationLedger(plane.db);
  const app = new Hono();

  app.use('*', async (c, next) => {
    if (!authorized(c.req.header('authorization'), [opts.adminToken])) {
      const err = unauthorized('the admin API');
      return errorJson(c, err);
    }
    await next();
  });
  app.use('*', jsonBodyLimit(opts.maxBodyBytes));

  const manager = (role: string) => plane.managerOf(role);

  /** One idempotent, audited mutation. */
  function mutation<S extends z.ZodType, R>(
    action: string,
    schema: S,
    run: (body: z.infer<S>, c: Context) => Promise<R>,
    subjectOf: (c: Context, body: z.infer<S>) => string,
  ) {
    return async (c: Context) => {
      const actor = c.req.header('x-uis-actor') ?? 'admin';
      let operationId: string | null = null;
      let subject = c.req.path;
      try {
        const raw = await jsonBody(c);
        const { operation_id, ...rest } = raw;
        operationId = operationIdOf(c.req.header('idempotency-key'), operation_id);
        const parsed = schema.safeParse(rest);
        if (!parsed.success) throw zodError(parsed.error, 'body');
        subject = subjectOf(c, parsed.data);
        const request = { action, params: c.req.param(), body: rest };
        const once = async () => {
          const result = await run(parsed.data, c);
          plane.events.append({
            kind: `admin.${action}`,
            subject,
            actor,
            operation_id: operationId,
            data: { ok: true, request: rest },
          });
          return result;
        };
        const result = operationId === null ? await once() : await ledger.run(operationId, request, once);
        return c.json({ ok: true, operation_id: operationId, result: result ?? null });
      } catch (e) {
        const err = asUisError(e);
        plane.events.append({
          kind: `admin.${action}`,
          subject,
          actor,
          operation_id: operationId,
          data: { ok: false, error: { code: err.code, message: err.message } },
        });
        return fail(c, err);
      }
    };
  }

  const roleSubject = (c: Context) => c.req.param('role') ?? '';
  const modelSubject = (c: Context) => `${c.req.param('role')}/${c.req.param('model')}`;

  // ---- roles and models ------------------------------------------------------------------------------------
  app.post(
    '/roles/:role/activate',
    mutation(
      'activate',
      ActivateBodySchema,
      (b, c) => plane.activateRole(c.req.param('role') ?? '', b.tags),
      roleSubject,
    ),
  );
  app.post(
    '/roles/:role/drain',
    mutation(
      'drain',
      DrainBodySchema,
      (b, c) =>
        manager(c.req.param('role') ?? '').drain({
          ...(b.deadline_ms === undefined ? {} : { deadlineMs: b.deadline_ms }),
          ...(b.policy === undefined ? {} : { policy: b.policy }),
        }),
      roleSubject,
    ),
  );
  app.post(
    '/roles/:role/deactivate',
    mutation(
      'deactivate',
      EmptySchema,
      (_b, c) => manager(c.req.param('role') ?? '').deactivate(),
      roleSubject,
    ),
  );
  app.post(
    '/roles/:role/models/:model/activate',
    mutation(
      'activate_model',
      ActivateBodySchema,
      (b, c) => plane.activateModel(c.req.param('role') ?? '', c.req.param('model') ?? '', b.tags),
      modelSubject,
    ),
  );
  app.post(
    '/roles/:role/models/:model/drain',
    mutation(
      'drain_model',
      DrainBodySchema,
      (b, c) =>
        manager(c.req.param('role') ?? '').drainModel(c.req.param('model') ?? '', {
          ...(b.deadline_ms === undefined ? {} : { deadlineMs: b.deadline_ms }),
          ...(b.policy === undefined ? {} : { policy: b.policy }),
        }),
      modelSubject,
    ),
  );
  app.post(
    '/roles/:role/models/:model/deactivate',
    mutation(
      'deactivate_model',
      EmptySchema,
      // As the role's deactivate: sleep now, aborting in-flight work instead of waiting for it.
      (_b, c) =>
        manager(c.req.param('role') ?? '').drainModel(c.req.param('model') ?? '', {
          policy: 'abort',
          deadlineMs: 0,
        }),
      modelSubject,
    ),
  );
  app.post(
    '/roles/:role/models/:model/weights',
    mutation(
      'update_weights',
      WeightUpdateRequestSchema,
      (b, c) => manager(c.req.param('role') ?? '').updateWeights(c.req.param('model') ?? '', b),
      modelSubject,
    ),
  );
  app.post(
    '/roles/:role/models/:model/engines',
    mutation(
      'register_external',
      RegisterBodySchema,
      (b, c) => manager(c.req.param('role') ?? '').registerExternal(c.req.param('model') ?? '', b.url),
      modelSubject,
    ),
  );
  app.post(
    '/roles/:role/engines/unregister',
    mutation(
      'unregister_external',
      EngineBodySchema,
      async (b, c) => {
        await manager(c.req.param('role') ?? '').unregisterExternal(b.engine_id);
        return { engine_id: b.engine_id, unregistered: true };
      },
      (_c, b) => b.engine_id,
    ),
  );
  app.post(
    '/roles/:role/engines/restart',
    mutation(
      'restart_replica',
      EngineBodySchema,
      async (b, c) => {
        const r = await manager(c.req.param('role') ?? '').restartReplica(b.engine_id);
        return {
          engine_id: b.engine_id,
          restarted: r.restarted,
          ...(r.restarted
            ? {}
            : { deferred: 'the model is asleep: the replica relaunches when the model onloads' }),
        };
      },
      (_c, b) => b.engine_id,
    ),
  );
  // A model's replicas with their URLs, ranks and node/GPU ids (a trainer pushing update_weights_from_tensor).
  app.get('/roles/:role/models/:model/replicas', (c) => {
    try {
      const result = modelReplicas(plane, c.req.param('role') ?? '', c.req.param('model') ?? '');
      return c.json({ ok: true, operation_id: null, result });
    } catch (e) {
      return fail(c, e);
    }
  });
  app.get('/roles', (c) =>
    c.json({
      roles: Object.fromEntries([...plane.managers].map(([role, m]) => [role, m.snapshot()])),
    }),
  );

  // ---- phases and barriers ---------------------------------------------------------------------------------
  app.get('/phases', (c) => c.json({ leases: plane.coordinator.leases() }));
  app.post(
    '/phases/advance',
    mutation(
      'advance_phase',
      AdvanceBodySchema,
      (b, c) =>
        plane.coordinator.transition({
          ...(b.group === undefined ? {} : { group: b.group }),
          ...(b.to === undefined ? {} : { to: b.to }),
          actor: c.req.header('x-uis-actor') ?? 'admin',
        }),
      (_c, b) => plane.coordinator.groupName(b.group) ?? 'default',
    ),
  );
  app.post(
    '/phases/resolve',
    mutation(
      'resolve_lease',
      ResolveBodySchema,
      async (b, c) =>
        plane.coordinator.resolve({
          phase: b.phase,
          actor: c.req.header('x-uis-actor') ?? 'admin',
          ...(b.group === undefined ? {} : { group: b.group }),
          ...(b.note === undefined ? {} : { note: b.note }),
        }),
      (_c, b) => plane.coordinator.groupName(b.group) ?? 'default',
    ),
  );
  // Waiting changes nothing, so it needs no operation id; it is not audited either (a trainer polls it).
  app.post('/barriers/wait', async (c) => {
    try {
      const parsed = BarrierWaitSchema.safeParse(await jsonBody(c));
      if (!parsed.success) throw zodError(parsed.error, 'body');
      const b = parsed.data;
      const lease = await barriers.wait(b.group ?? null, b.phase, () =>
        // A trainer that gives up (disconnects) stops counting as a waiter at once.
        plane.coordinator.waitForPhase(b.phase, b.timeout_s * 1000, b.group, c.req.raw.signal),
      );
      return c.json({ ok: true, lease });
    } catch (e) {
      return fail(c, e);
    }
  });
  app.post(
    '/barriers/release',
    mutation(
      'release_barrier',
      BarrierReleaseSchema,
      (b, c) =>
        plane.coordinator.releasePhase(b.phase, {
          ...(b.group === undefined ? {} : { group: b.group }),
          actor: c.req.header('x-uis-actor') ?? 'admin',
        }),
      (_c, b) => `${plane.coordinator.groupName(b.group) ?? 'default'}/${b.phase}`,
    ),
  );

  // ---- deferred batches ------------------------------------------------------------------------------------
  app.post(
    '/batches',
    mutation(
      'submit_batch',
      BatchSubmitSchema,
      async (b) => submitBatch(plane, b.kind, b.model ?? null, b.samples),
      (_c, b) => b.kind,
    ),
  );
  app.get('/batches', (c) => {
    const q = BatchListSchema.safeParse(c.req.query());
    if (!q.success) return fail(c, zodError(q.error, 'query'));
    return c.json({ batches: plane.store.list(q.data) });
  });
  app.get('/batches/:id', (c) => {
    try {
      const id = c.req.param('id');
      const batch = plane.store.get(id);
      const samples =
        batch.state === 'committed'
          ? plane.store.samples(id).map((s) => ({ sample_id: s.sample_id, output: s.output }))
          : undefined;
      return c.json({ batch, ...(samples ? { samples } : {}) });
    } catch (e) {
      return fail(c, e);
    }
  });

  // ---- audit log -------------------------------------------------------------------------------------------
  app.get('/events', (c) => {
    const q = EventsQuerySchema.safeParse(c.req.query());
    if (!q.success) return fail(c, zodError(q.error, 'query'));
    const { after, limit, kind, subject } = q.data;
    return c.json({
      events: plane.events.list({
        limit,
        ...(after === undefined ? {} : { afterSeq: after }),
        ...(kind === undefined ? {} : { kind }),
        ...(subject === undefined ? {} : { subject }),
      }),
    });
  });

  // Last route (a sub-app's notFound is not consulted once mounted): a known path with another method is 405 +
  // `Allow`, as on the serving routes; only unknown paths are 404.
  let patterns: Array<{ method: string; match: RegExp }> | undefined;
  app.all('*', (c) => {
    patterns ??= app.routes
      .filter((r) => r.method !== 'ALL' && r.path !== '*' && r.path !== '/*')
      .map((r) => ({ method: r.method, match: routePattern(r.path) }));
    const rel = c.req.path.replace(/^\/admin(?=\/|$)/, '');
    const allow = [...new Set(patterns.filter((p) => p.match.test(rel)).map((p) => p.method))];
    if (allow.length > 0) {
      c.header('allow', allow.join(', '));
      return errorJson(c, methodNotAllowed(c.req.method, c.req.path, allow.join(', ')));
    }
    return c.json(
      new UisError({
        code: 'not_found',
        path: c.req.path,
        message: `no admin endpoint ${c.req.method} ${c.req.path}`,
      }).toJSON(),
      404,
    );
  });
  return app;
}

/** `/roles/:role/drain` -> a RegExp matching concrete paths of that route. */
function routePattern(path: string): RegExp {
  const parts = path
    .split('/')
    .map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  return new RegExp(`^${parts.join('/')}/?$`);
}
