import { UisError } from '@uis/spec';
import type { Context, Hono } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import {
  createServingHandler,
  type ErrorBodyOf,
  type FastHandler,
  type FastRoutes,
  type ForwardRoute,
  type ParsedBody,
  type ServingProxyOptions,
  sendError,
  type UpstreamPools,
} from '../proxy/index.ts';
import { authorized, unauthorized } from './auth.ts';

/** OpenAI's error `type` for a status (the official clients pick their exception class by status; `type` is what
 * their users read). */
function openAIType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/** OpenAI's error object on OpenAI routes: `message`, `type`, `param` (the body field at fault: `model` for
 * `body.model`), `code`, and ours besides (`path`, `details`), so nothing a uis client reads is lost. */
/** A Hono answer in OpenAI's error shape with the error's status (the error table's). */
export const openAIErrorJson = (c: Context, err: UisError): Response =>
  c.json(openAIErrorBody(err) as object, err.status as ContentfulStatusCode);

export const openAIErrorBody: ErrorBodyOf = (err: UisError) => {
  const ours = err.toJSON().error;
  const path = err.path;
  const param = path?.startsWith('body.') ? path.slice('body.'.length) : null;
  return { error: { ...ours, message: err.message, type: openAIType(err.status), param, code: err.code } };
};

/** The part of a role gateway the root OpenAI routes use. */
export interface OpenAIRole {
  readonly role: string;
  /** The role's OpenAI model list (`/<role>/v1/models`). */
  models(): { object: 'list'; data: Array<Record<string, unknown>> };
  /** Whether `name` is one of the role's model ids, aliases or served names. */
  serves(name: string): boolean;
  /** The forward route of an OpenAI request (engine path `/v1/chat/completions` or `/v1/completions`), counted by
   * this role's gateway. */
  openAIRoute(
    path: string,
    ...args: Parameters<Parameters<typeof createServingHandler>[1]>
  ): ForwardRoute | UisError;
}

export interface OpenAIRootOptions {
  roles: () => Iterable<OpenAIRole>;
  pools: UpstreamPools;
  maxBodyBytes?: number;
  /** The same body rules as the role routes (JSON depth, the process-wide body budget). */
  bodyRules?: Pick<ServingProxyOptions, 'maxJsonDepth' | 'bodyBudget'>;
  servingTokens: readonly string[];
}

/** Every role's models: each entry names its `role`. */
export function rootModelList(roles: Iterable<OpenAIRole>) {
  const data: Array<Record<string, unknown>> = [];
  for (const r of roles) for (const m of r.models().data) data.push({ ...m, role: r.role });
  return { object: 'list' as const, data };
}

/** The role a root request goes to: the one role serving the model name, else 404 (none) or 400 (several). */
export function roleForModel(roles: Iterable<OpenAIRole>, body: ParsedBody): OpenAIRole | UisError {
  const model = body.get('model');
  const all = [...roles];
  if (typeof model !== 'string' || model === '') {
    return new UisError({
      code: 'model_required',
      path: 'body.model',
      message: `the root OpenAI routes find the role from "model"; send one of: ${rootNames(all).join(', ')} (or use /<role>/v1/...)`,
      details: { models: rootNames(all) },
    });
  }
  const matches = all.filter((r) => r.serves(model));
  if (matches.length === 1) return matches[0]!;
  if (matches.length === 0) {
    return new UisError({
      code: 'unknown_model',
      path: 'body.model',
      message: `no role serves model "${model}"; models: ${rootNames(all).join(', ')}`,
      details: { requested: model, models: rootNames(all) },
    });
  }
  const candidates = matches.map((r) => r.role);
  return new UisError({
    code: 'ambiguous_model',
    path: 'body.model',
    message: `model "${model}" is served by several roles (${candidates.join(', ')}); call /<role>/v1/... of one of them`,
    details: { requested: model, candidates: candidates.map((role) => ({ role, url: `/${role}/v1` })) },
  });
}

function rootNames(roles: OpenAIRole[]): string[] {
  return roles.flatMap((r) => r.models().data.map((m) => `${r.role}:${String(m.id)}`));
}

/** One base URL for a whole job: `GET /v1/models` lists every role's models, `POST /v1/chat/completions` and
 * `/v1/completions` go to the role serving the model name (answered in OpenAI's error shape). */
export function mountOpenAIRoot(app: Hono, routes: FastRoutes, opts: OpenAIRootOptions): void {
  const guard = (handler: FastHandler): FastHandler => {
    if (opts.servingTokens.length === 0) return handler;
    return (req, res) => {
      if (!authorized(req.headers.authorization, opts.servingTokens)) {
        req.resume();
        sendError(res, unauthorized('serving'), undefined, openAIErrorBody);
        return;
      }
      handler(req, res);
    };
  };
  app.get('/v1/models', (c) => {
    if (opts.servingTokens.length > 0 && !authorized(c.req.header('authorization'), opts.servingTokens))
      return openAIErrorJson(c, unauthorized('serving'));
    return c.json(rootModelList(opts.roles()));
  });
  for (const path of ['/v1/chat/completions', '/v1/completions']) {
    const handler = createServingHandler(
      {
        pools: opts.pools,
        errorBody: openAIErrorBody,
        ...(opts.maxBodyBytes === undefined ? {} : { maxBodyBytes: opts.maxBodyBytes }),
        ...opts.bodyRules,
      },
      (body, req, requestId, res) => {
        const role = roleForModel(opts.roles(), body);
        if (role instanceof UisError) return role;
        return role.openAIRoute(path, body, req, requestId, res);
      },
    );
    routes.add('POST', path, guard(handler));
  }
}
