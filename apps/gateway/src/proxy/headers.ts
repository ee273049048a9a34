import type { IncomingHttpHeaders, OutgoingHttpHeader } from 'node:http';

/** RFC 9110 7.6.1 hop-by-hop headers plus the legacy proxy-* family: they describe one connection, never the
 * message, so a proxy must not forward them. `host` is dropped too: the upstream pool sets its own. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Header names the forwarder sets itself on the upstream request. `content-type`: the body was parsed as JSON, so
 * it goes out as JSON whatever the client labelled it (`fetch` labels a string `text/plain`, and SGLang's FastAPI
 * answers a non-JSON label with 422 in its own error shape). */
const SET_BY_PROXY = new Set(['host', 'content-length', 'content-type', 'x-request-id']);

/** The one list of credential-like request headers: the serving and admin tokens (`Authorization`, the only
 * header our tokens travel in), browser cookies, proxy credentials and the API-key headers clients of other
 * gateways send. They are the gateway's to check and never reach an engine, which may be anyone's process
 * registered by URL; an engine that wants a key gets the model's own (`engine_api_key`). `gateway.pass_headers`
 * lets a named one through (never `Authorization`, nor a hop-by-hop one). */
export const CREDENTIAL_HEADERS: ReadonlySet<string> = new Set([
  'authorization',
  'cookie',
  'proxy-authorization',
  'x-api-key',
  'api-key',
]);

function isHopByHop(lower: string): boolean {
  return HOP_BY_HOP.has(lower) || lower.startsWith('proxy-');
}

/** Names listed in a `Connection` header (`Connection: close, x-foo`) are hop-by-hop for this message. */
function connectionTokens(value: string | string[] | undefined): Set<string> | undefined {
  if (value === undefined || value === 'keep-alive' || value === 'close') return undefined;
  // The usual values name only hop-by-hop options, which are dropped anyway: no set to build per request.
  if (typeof value === 'string' && /^\s*(?:keep-alive|close)\s*$/i.test(value)) return undefined;
  const joined = Array.isArray(value) ? value.join(',') : value;
  let out: Set<string> | undefined;
  for (const raw of joined.split(',')) {
    const token = raw.trim().toLowerCase();
    if (token === '') continue;
    if (out === undefined) out = new Set();
    out.add(token);
  }
  return out;
}

/**
 * Builds the upstream request headers as a flat `[name, value, ...]` list, straight from node's `rawHeaders` (no
 * intermediate object), without the client's credentials (CREDENTIAL_HEADERS, less the ones configured to pass). Adds `content-type: application/json`, `x-request-id`
 * and, when the model's engines need a key, `authorization: Bearer <engineApiKey>`; the engine client sets `host`
 * and the body's `content-length`.
 */
export function upstreamRequestHeaders(
  rawHeaders: readonly string[],
  requestId: string,
  engineApiKey?: string,
  /** The gateway's own W3C trace context for the engine (tracing on); replaces the client's. */
  traceparent?: string,
  /** Credential headers configured to reach the engines (`gateway.pass_headers`, lower case). */
  passed?: ReadonlySet<string>,
): string[] {
  let listed: Set<string> | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === 'connection') {
      listed = connectionTokens(rawHeaders[i + 1]);
      break;
    }
  }
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (CREDENTIAL_HEADERS.has(lower) && passed?.has(lower) !== true) continue;
    if (isHopByHop(lower) || SET_BY_PROXY.has(lower) || listed?.has(lower)) continue;
    if (traceparent !== undefined && lower === 'traceparent') continue;
    out.push(name, rawHeaders[i + 1]!);
  }
  out.push('content-type', 'application/json', 'x-request-id', requestId);
  if (engineApiKey !== undefined) out.push('authorization', `Bearer ${engineApiKey}`);
  if (traceparent !== undefined) out.push('traceparent', traceparent);
  return out;
}

/**
 * Builds the client response headers from the engine's parsed headers as node's `writeHead` flat list,
 * minus hop-by-hop ones; `content-length` is kept when the engine sent one (the bytes are relayed unchanged) and
 * otherwise node frames the stream itself, chunk for chunk as the engine sent it.
 */
export function clientResponseHeaders(
  headers: IncomingHttpHeaders,
  requestId: string,
  keepContentLength: boolean,
): OutgoingHttpHeader[] {
  const listed = connectionTokens(headers.connection);
  const out: OutgoingHttpHeader[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || isHopByHop(name) || name === 'x-request-id' || listed?.has(name)) continue;
    if (name === 'content-length' && !keepContentLength) continue;
    out.push(name, value);
  }
  out.push('x-request-id', requestId);
  return out;
}
