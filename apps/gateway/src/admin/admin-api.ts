import { isUtf8 } from 'node:buffer';
import { type ControlPlane, checkOperationId, commandRoutes, runCommand } from '@uis/control-plane';
import { UisError } from '@uis/spec';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { callerOf, commandRefusal, type ServerTokens, unauthorized } from '../gateway/auth.ts';
import { jsonBodyLimit } from '../gateway/body-limit.ts';
import { asUisError, errorJson, parseJsonObject } from '../proxy/index.ts';
import { allowedMethods, methodNotAllowed } from '../server/unmatched.ts';

export interface AdminApiOptions {
  plane: ControlPlane;
  adminToken: string;
  /** When set, commands of `serving` permission take it (and need it, or the admin token); see `commandRefusal`. */
  servingToken?: string | undefined;
  /** Request body limit in bytes (413 above it); the serving routes' limit. */
  maxBodyBytes?: number;
}

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

/** The operation id of a keyed command: the `Idempotency-Key` header or the body's `operation_id` (the same one
 * when both are given). */
function operationIdOf(header: string | undefined, fromBody: unknown): string | null {
  if (fromBody !== undefined && typeof fromBody !== 'string')
    throw new UisError({
      code: 'invalid_input',
      path: 'body.operation_id',
      message: 'operation_id must be a string',
    });
  const body = fromBody === undefined ? undefined : checkOperationId(fromBody, 'body.operation_id');
  const head = header === undefined ? undefined : checkOperationId(header, 'headers.idempotency-key');
  if (body !== undefined && head !== undefined && body !== head)
    throw new UisError({
      code: 'invalid_input',
      path: 'body.operation_id',
      message: `the Idempotency-Key header (${head}) and the body's operation_id (${body}) differ; send one id`,
    });
  return head ?? body ?? null;
}

/**
 * The admin API under `/admin`: one route per command of the control plane's table (method, path, schemas,
 * audit, idempotency and permission all come from it), answered with `{ok, operation_id, result}`. Each command
 * takes the bearer token its permission names (401 without a valid one, 403 for a serving token on an admin
 * command; nothing changes). A keyed command takes an operation id (`Idempotency-Key` header or body
 * `operation_id`): a repeat returns the first result, the same id with another request is 409.
 */
export function createAdminApi(opts: AdminApiOptions): Hono {
  const { plane } = opts;
  const app = new Hono();
  const tokens: ServerTokens = { admin: opts.adminToken, serving: opts.servingToken };
  const limit = jsonBodyLimit(opts.maxBodyBytes);
  for (const route of commandRoutes()) {
    const cmd = route.command;
    const path = route.routerPath.slice('/admin'.length);
    // The command's permission before anything else (a refused caller learns nothing of its body's faults).
    const guard: MiddlewareHandler = async (c, next) => {
      const refused = commandRefusal(c.req.header('authorization'), cmd.permission, tokens);
      if (refused) return errorJson(c, refused);
      await next();
    };
    app.on(route.method, path, guard, limit, async (c) => {
      try {
        let input: unknown;
        let operationId: string | null = null;
        if (route.method === 'GET') input = c.req.query();
        else {
          const body = await jsonBody(c);
          if (cmd.idempotency === 'keyed') {
            const { operation_id, ...rest } = body;
            operationId = operationIdOf(c.req.header('idempotency-key'), operation_id);
            input = rest;
          } else input = body;
        }
        const answer = await runCommand(plane, cmd, {
          params: c.req.param(),
          input,
          actor: c.req.header('x-uis-actor') ?? 'admin',
          operationId,
          signal: c.req.raw.signal,
          inputRoot: route.method === 'GET' ? 'query' : 'body',
          paramsRoot: '',
          fallbackSubject: c.req.path,
        });
        return c.json(answer);
      } catch (e) {
        return fail(c, e);
      }
    });
  }

  // Last route (a sub-app's notFound is not consulted once mounted): a known path with another method is 405 +
  // `Allow`, as everywhere; only unknown paths are 404.
  app.all('*', (c) => {
    // No token, no answer (not even a 404).
    if (callerOf(c.req.header('authorization'), tokens) === 'anonymous')
      return errorJson(c, unauthorized('the admin API'));
    const allow = allowedMethods(c.req.path.replace(/^\/admin(?=\/|$)/, ''), app.routes);
    if (allow.length > 0) {
      c.header('allow', allow.join(', '));
      return errorJson(c, methodNotAllowed(c.req.method, c.req.path, allow));
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
