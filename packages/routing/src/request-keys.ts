import { DEFAULT_AFFINITY_HEADER, MIN_WEIGHT_VERSION_HEADER } from './routing-rules.ts';

/** Header a client may use to send its route key when it cannot add the body's `route_key` field. */
export const ROUTE_KEY_HEADER = 'x-route-key';

export type HeaderBag = Headers | Readonly<Record<string, string | string[] | undefined>>;

/** What routing reads from one request. Two keys, two ideas: the route key picks the model (Relax's body field
 * `route_key`, or the `X-Route-Key` header), the affinity key pins a replica (SGLang's `X-SMG-Routing-Key` header,
 * or `routing.affinity_header`). */
export interface RequestKeys {
  model: string | undefined;
  /** Picks the model through `routing.route_keys`. */
  routeKey: string | undefined;
  /** Pins the request to one replica whatever the model's policy (the affinity header). */
  affinityKey: string | undefined;
  /** The body's `session_id`, `session_params.id` or string `rid`: pins a replica under the `affinity` policy
   * only. */
  sessionKey: string | undefined;
  minWeightVersion: string | undefined;
  prompt: string | undefined;
}

function header(headers: HeaderBag | undefined, name: string, lowerCase: boolean): string | undefined {
  if (headers === undefined) return undefined;
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const bag = headers as Readonly<Record<string, string | string[] | undefined>>;
  let value = bag[name];
  if (value === undefined && !lowerCase) {
    for (const key of Object.keys(bag)) {
      if (key.toLowerCase() === name) {
        value = bag[key];
        break;
      }
    }
  }
  return Array.isArray(value) ? value[0] : value;
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function messagesText(messages: unknown): string | undefined {
  if (!Array.isArray(messages)) return undefined;
  let out = '';
  for (const message of messages) {
    if (typeof message !== 'object' || message === null) continue;
    const { role, content } = message as { role?: unknown; content?: unknown };
    out += typeof role === 'string' ? `${role}:` : ':';
    if (typeof content === 'string') out += content;
    else if (Array.isArray(content)) {
      for (const part of content) {
        if (
          typeof part === 'object' &&
          part !== null &&
          typeof (part as { text?: unknown }).text === 'string'
        )
          out += (part as { text: string }).text;
      }
    }
    out += '\n';
  }
  return out;
}

/** The text cache_aware routes on: SGLang `text` (first of a batch), OpenAI `prompt`, chat `messages`, or the
 * token ids of `input_ids` as text. */
export function promptText(body: Readonly<Record<string, unknown>>): string | undefined {
  const text = body.text ?? body.prompt;
  if (typeof text === 'string') return text;
  if (Array.isArray(text) && typeof text[0] === 'string') return text[0];
  const chat = messagesText(body.messages);
  if (chat !== undefined) return chat;
  const ids = body.input_ids;
  if (Array.isArray(ids) && ids.length > 0) return (Array.isArray(ids[0]) ? ids[0] : ids).join(' ');
  return undefined;
}

/** The body fields `requestKeys` reads (without a prompt): a caller holding a body it has not parsed whole can hand
 * over just these. */
export const REQUEST_KEY_FIELDS: readonly string[] = [
  'model',
  'route_key',
  'session_id',
  'session_params',
  'rid',
];

/** Reads the routing inputs of a request: model and route key (body `route_key`, or the `X-Route-Key` header), the
 * affinity key (the affinity header, default `X-SMG-Routing-Key` as SGLang's router), the session key (the body's
 * `session_id`, `session_params.id` or string `rid`), the minimum weight version and the prompt text. Never
 * throws. */
export function requestKeys(
  body: unknown,
  headers?: HeaderBag,
  affinityHeader: string = DEFAULT_AFFINITY_HEADER,
  /** false: leave `prompt` undefined. Only cache_aware routes on it, and a chat's text is built from all its
   * messages: a caller that learns the policy later calls `promptText` itself when it needs it. */
  withPrompt = true,
  /** The bag's names are lower case already (node's `IncomingMessage.headers`): an absent header is absent, with
   * no scan of every name for another spelling (three scans per request on the gateway's hot path). */
  lowerCaseNames = false,
): RequestKeys {
  const b: Readonly<Record<string, unknown>> =
    typeof body === 'object' && body !== null && !Array.isArray(body)
      ? (body as Record<string, unknown>)
      : {};
  const session = b.session_params;
  const sessionId =
    typeof session === 'object' && session !== null ? str((session as { id?: unknown }).id) : undefined;
  return {
    model: str(b.model),
    routeKey: str(b.route_key) ?? str(header(headers, ROUTE_KEY_HEADER, lowerCaseNames)),
    affinityKey: str(header(headers, affinityHeader.toLowerCase(), lowerCaseNames)),
    sessionKey: str(b.session_id) ?? sessionId ?? str(b.rid),
    minWeightVersion: str(header(headers, MIN_WEIGHT_VERSION_HEADER, lowerCaseNames)),
    prompt: withPrompt ? promptText(b) : undefined,
  };
}
