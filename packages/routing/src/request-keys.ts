import { DEFAULT_AFFINITY_HEADER, MIN_WEIGHT_VERSION_HEADER } from './routing-rules.ts';

/** Header a client may use to send a route_key when it cannot add a body field. */
export const ROUTE_KEY_HEADER = 'x-route-key';

export type HeaderBag = Headers | Readonly<Record<string, string | string[] | undefined>>;

/** What routing reads from one request. */
export interface RequestKeys {
  model: string | undefined;
  route_key: string | undefined;
  /** The affinity key: the routing-key header, else (used by the `affinity` policy only) the body's session id or
   * rid. */
  affinityKey: string | undefined;
  /** The routing-key header alone: a request that carries it is keyed whatever the model's policy (Relax). */
  routingKey: string | undefined;
  minWeightVersion: string | undefined;
  prompt: string | undefined;
}

function header(headers: HeaderBag | undefined, name: string): string | undefined {
  if (headers === undefined) return undefined;
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const bag = headers as Readonly<Record<string, string | string[] | undefined>>;
  let value = bag[name];
  if (value === undefined) {
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

/** Reads the routing inputs of a request: model and route_key (body, or the route-key header), the affinity key
 * (the affinity header, default `X-SMG-Routing-Key` as SGLang's router, else the body's `session_id`,
 * `session_params.id` or string `rid`), the minimum weight version and the prompt text. Never throws. */
export function requestKeys(
  body: unknown,
  headers?: HeaderBag,
  affinityHeader: string = DEFAULT_AFFINITY_HEADER,
  /** false: leave `prompt` undefined. Only cache_aware routes on it, and a chat's text is built from all its
   * messages: a caller that learns the policy later calls `promptText` itself when it needs it. */
  withPrompt = true,
): RequestKeys {
  const b: Readonly<Record<string, unknown>> =
    typeof body === 'object' && body !== null && !Array.isArray(body)
      ? (body as Record<string, unknown>)
      : {};
  const session = b.session_params;
  const sessionId =
    typeof session === 'object' && session !== null ? str((session as { id?: unknown }).id) : undefined;
  const routingKey = str(header(headers, affinityHeader.toLowerCase()));
  return {
    model: str(b.model),
    route_key: str(b.route_key) ?? str(header(headers, ROUTE_KEY_HEADER)),
    affinityKey: routingKey ?? str(b.session_id) ?? sessionId ?? str(b.rid),
    routingKey,
    minWeightVersion: str(header(headers, MIN_WEIGHT_VERSION_HEADER)),
    prompt: withPrompt ? promptText(b) : undefined,
  };
}
