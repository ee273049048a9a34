import { type ControlPlane, commandNamed, runCommand } from '@uis/control-plane';
import { type ScaleKind, type ScaleOperation, ScaleStateSchema, scaleFinished, UisError } from '@uis/spec';
import { type Context, Hono } from 'hono';
import { asUisError, errorJson, parseJsonObject } from '../proxy/index.ts';
import { authorized, commandRefusal, type ServerTokens } from './auth.ts';

/** Relax's answer to an accepted, refused-as-met or cancelled request. */
const accepted = (op: ScaleOperation) => ({
  request_id: op.request_id,
  status: op.status,
  message: op.message,
});

async function body(c: Context): Promise<Record<string, unknown>> {
  const bytes = Buffer.from(await c.req.arrayBuffer());
  if (bytes.toString('utf8').trim() === '') return {};
  const parsed = parseJsonObject(bytes);
  if (parsed instanceof UisError) throw parsed;
  return parsed;
}

function statusFilter(value: string | undefined, path: string) {
  if (value === undefined) return undefined;
  const s = ScaleStateSchema.safeParse(value);
  if (!s.success)
    throw new UisError({
      code: 'invalid_query',
      path,
      message: `unknown status ${JSON.stringify(value)}; one of ${ScaleStateSchema.options.join(', ')}`,
    });
  return s.data;
}

/** Runs the admin command `name` for the request `c` (its permission, audit record and schemas). */
type Run = (c: Context, name: string, params: Record<string, string>, input: unknown) => Promise<unknown>;

const roleOf = (c: Context) => c.req.path.split('/')[1] as string;

/** Relax's list of one kind: `requests`, `total_count`, and the filters it was asked with. */
const listOf = (run: Run) => (kind: ScaleKind) => async (c: Context) => {
  const status = statusFilter(c.req.query('status'), 'query.status');
  const model_name = c.req.query('model_name');
  const { operations } = (await run(
    c,
    'list_scale_ops',
    {},
    {
      role: roleOf(c),
      kind,
      ...(status ? { status } : {}),
      ...(model_name ? { model_name } : {}),
    },
  )) as { operations: ScaleOperation[] };
  return {
    requests: operations,
    total_count: operations.length,
    model_name: model_name ?? null,
    status_filter: status ?? null,
  };
};

/** One request of one kind by id (another kind's id, or another role's, is unknown here). */
const oneOf = (run: Run) => (kind: ScaleKind) => async (c: Context) => {
  const op = (await run(
    c,
    'get_scale_op',
    { request_id: c.req.param('id') as string },
    {},
  )) as ScaleOperation;
  if (op.kind !== kind || op.role !== roleOf(c))
    throw new UisError({
      code: 'unknown_scale_request',
      path: 'request_id',
      message: `no ${kind} request ${op.request_id}`,
    });
  return op;
};

/** Relax's batch cancel: every running scale-out that matches, each through the cancel command; a dry run names
 * them. */
async function cancelMany(run: Run, c: Context, role: string) {
  const b = await body(c);
  const status = statusFilter(
    typeof b.status_filter === 'string' ? b.status_filter : undefined,
    'body.status_filter',
  );
  const model = typeof b.model_name === 'string' ? b.model_name : undefined;
  const dry = b.dry_run === true;
  const { operations } = (await run(
    c,
    'list_scale_ops',
    {},
    {
      role,
      kind: 'scale_out',
      ...(status ? { status } : {}),
      ...(model ? { model_name: model } : {}),
    },
  )) as { operations: ScaleOperation[] };
  const running = operations.filter((o) => !scaleFinished(o.status));
  const cancelled: string[] = [];
  if (!dry)
    for (const o of running)
      await run(c, 'cancel_scale_op', { request_id: o.request_id }, {}).then(
        () => cancelled.push(o.request_id),
        () => undefined,
      );
  return {
    dry_run: dry,
    request_ids: dry ? running.map((o) => o.request_id) : cancelled,
    cancelled_count: cancelled.length,
    message: dry
      ? `would cancel ${running.length} scale-out request(s)`
      : `cancelled ${cancelled.length} scale-out request(s)`,
  };
}

/**
 * Relax's elastic-rollout API, served additively under each role (`/<role>/scale_out`, `/<role>/scale_in`, their
 * lists and status by request id, cancel one, cancel many) with Relax's request and answer shapes, so its scripts
 * and autoscaler drive uis. Each call runs the admin command of the same name (same permission: the admin token,
 * same audit record), so the two doors cannot disagree. Statuses follow Relax's table: 400 bad request or an
 * initial replica without force, 404 unknown request, 409 another scale operation of the model.
 *
 * Relax's autoscaler and its K8s hooks send no credential; uis opens these paths without one only when the
 * operator says so (`scale.open`, `gateway.scale_auth: open`). A `scale.token` (`gateway.scale_token`) is the
 * narrow credential to give them instead of the admin token: it is taken here, for these scale commands only, and
 * by no other route.
 */
export function relaxElasticApi(
  plane: ControlPlane,
  roles: readonly string[],
  tokens: ServerTokens,
  scale: { token?: string | undefined; open?: boolean } = {},
): Hono {
  const app = new Hono();
  const run: Run = async (c, name, params, input) => {
    const cmd = commandNamed(name);
    if (!cmd) throw new Error(`no command ${name}`);
    const header = c.req.header('authorization');
    const scaler = scale.open === true || (scale.token !== undefined && authorized(header, [scale.token]));
    const refused = scaler ? null : commandRefusal(header, cmd.permission, tokens);
    if (refused) throw refused;
    const answer = await runCommand(plane, cmd, {
      params,
      input,
      actor: c.req.header('x-uis-actor') ?? 'relax',
      operationId: null,
      signal: c.req.raw.signal,
      inputRoot: c.req.method === 'GET' ? 'query' : 'body',
      paramsRoot: '',
      fallbackSubject: c.req.path,
    });
    return answer.result;
  };
  const handle = (f: (c: Context) => Promise<unknown>) => async (c: Context) => {
    try {
      return c.json((await f(c)) as object);
    } catch (e) {
      return errorJson(c, asUisError(e));
    }
  };
  const list = listOf(run);
  const one = oneOf(run);
  for (const role of roles) {
    app.post(
      `/${role}/scale_out`,
      handle(async (c) => accepted((await run(c, 'scale_out', { role }, await body(c))) as ScaleOperation)),
    );
    app.post(
      `/${role}/scale_in`,
      handle(async (c) => accepted((await run(c, 'scale_in', { role }, await body(c))) as ScaleOperation)),
    );
    app.get(`/${role}/scale_out`, handle(list('scale_out')));
    app.get(`/${role}/scale_in`, handle(list('scale_in')));
    app.get(`/${role}/scale_out/:id`, handle(one('scale_out')));
    app.get(`/${role}/scale_in/:id`, handle(one('scale_in')));
    app.post(
      `/${role}/scale_out/:id/cancel`,
      handle(async (c) => {
        await one('scale_out')(c);
        const op = (await run(
          c,
          'cancel_scale_op',
          { request_id: c.req.param('id') as string },
          {},
        )) as ScaleOperation;
        return { ...accepted(op), message: 'Scale-out request cancelled' };
      }),
    );
    app.post(
      `/${role}/scale_out_cancel`,
      handle((c) => cancelMany(run, c, role)),
    );
  }
  return app;
}
