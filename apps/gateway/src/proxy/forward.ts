import { performance } from 'node:perf_hooks';
import { UisError } from '@uis/spec';
import { collectBody, parseServingBody } from './body.ts';
import { BODY_BUDGET_RETRY_AFTER_S } from './body-budget.ts';
import { asUisError, socketAnswer } from './errors.ts';
import { Exchange } from './exchange.ts';
import type { FastHandler } from './fast-routes.ts';
import { nextId, REQUEST_ID } from './request-id.ts';
import type { ResolveRoute, ServingProxyOptions } from './route-types.ts';

export type {
  CompletionEvent,
  ForwardOutcome,
  ForwardRoute,
  HandledRoute,
  PickTarget,
  ProxyHooks,
  ProxyTarget,
  ResolveRoute,
  ServingProxyOptions,
} from './route-types.ts';

export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024;

/**
 * The serving hot path for one route: read and parse the body once, let `resolve` pick the route, forward to an
 * engine through the pooled undici dispatcher, relay the answer. Every failure answers the product's JSON error.
 */
export function createServingHandler(options: ServingProxyOptions, resolve: ResolveRoute): FastHandler {
  const newId = options.newId ?? nextId;
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  return (req, res) => {
    const start = performance.now();
    const given = req.headers['x-request-id'];
    const kept = typeof given === 'string' && REQUEST_ID.test(given);
    const requestId = kept ? given : newId();
    const exchange = new Exchange(res, options, start, requestId);
    collectBody(
      req,
      limit,
      (err, raw) => {
        if (err !== null || raw === undefined) {
          // A body refused before its end: answer, then close, since the rest of the body is still on the socket.
          if (err instanceof UisError && (err.status === 413 || err.status === 503))
            res.shouldKeepAlive = false;
          if (err instanceof UisError && err.code === 'body_budget_exhausted')
            res.setHeader('retry-after', String(BODY_BUDGET_RETRY_AFTER_S));
          // Cut at the body deadline: the server answered 408 on the socket, and that is what the client got.
          exchange.refuse(socketAnswer(req.socket) ?? asUisError(err));
          return;
        }
        try {
          const body = parseServingBody(raw, options.maxJsonDepth);
          if (body instanceof UisError) return exchange.refuse(body);
          const route = resolve(body, req, requestId, res);
          if (route instanceof UisError) return exchange.refuse(route);
          if ('respond' in route) return route.respond(res);
          // An id of ours is unique, so it is also the rid injected (one id per request, not two); a client's
          // need not be.
          let inject: string | undefined;
          if (body.fields.rid === undefined && options.injectRid !== false)
            inject = kept || options.newId !== undefined ? nextId() : requestId;
          exchange.begin(req, body, route, inject);
        } catch (e) {
          exchange.refuse(asUisError(e));
        }
      },
      options.bodyBudget,
    );
  };
}
