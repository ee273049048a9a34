import type { IncomingMessage, ServerResponse } from 'node:http';
import type { UisError } from '@uis/spec';
import type { AdmissionGate } from './admission.ts';
import type { BodyEdit, ParsedBody } from './body.ts';
import type { BodyBudget } from './body-budget.ts';
import type { ErrorBodyOf } from './errors.ts';
import type { InFlightCounter } from './in-flight.ts';
import type { OpenAIStreamVersions } from './openai-stream-versions.ts';
import type { RetryPolicy } from './retry.ts';
import type { UpstreamPools } from './upstream-pools.ts';
import type { TokenUsage } from './usage.ts';

/** An engine the gateway may forward to: `id` is what routing and the in-flight counter know it by. */
export interface ProxyTarget {
  id: string;
  /** `http://host:port` */
  origin: string;
  /** The weight version the replica served when picked (the answer's `X-UIS-Weight-Version` unless the answer
   * names the version of its last token). */
  weightVersion?: string | null;
  /** How many in-place weight switches the replica had when picked: one more by the answer means the request ran
   * while its weights changed under it. */
  inPlaceSwitches?: number;
  /** How many continues after in-place switches the replica had when picked (see OpenAIStreamVersions). */
  inPlaceResumes?: number;
}

/** The gateway's routing decision; `excluding` holds targets that already failed for this request. */
export type PickTarget = (excluding?: ReadonlySet<string>) => ProxyTarget | UisError;

/** Where and how one request goes: the engine path, how to choose engines, and body edits. */
export interface ForwardRoute {
  /** Engine path, e.g. `/generate` or `/v1/chat/completions`. */
  path: string;
  /** The model the request was routed to (its metric label, its engine abort's key): carried with the request
   * instead of kept in a map by request id. */
  model?: string;
  pick: PickTarget;
  edit?: BodyEdit;
  /** The key the model's engines were started with (SGLang `--api-key`), sent as their bearer token. */
  engineApiKey?: string;
  /** W3C trace context sent to the engine instead of the client's (set when the request is traced). */
  traceparent?: string | undefined;
  /** Declares the weights of a sized answer: `X-UIS-Weight-Version` from the answer's own version, both versions
   * of a request in-place switches spanned, and (`openai`) `system_fingerprint` in the body. */
  versions?: {
    openai: boolean;
    earlier: (target: ProxyTarget) => ReadonlyArray<string | null>;
    /** An event stream's relay that declares its weights as it goes (OpenAI streams). */
    stream?: (target: ProxyTarget) => OpenAIStreamVersions;
  };
  /** The gateway that owns the request once routed, when it is not the handler's (the root OpenAI routes find
   * the role from the model): its in-flight counter and hooks count the request. */
  owner?: Pick<ServingProxyOptions, 'inFlight' | 'hooks' | 'admission' | 'retry'>;
}

/** A request the resolver answers itself instead of forwarding it as is (e.g. the GenRM messages adapter, which
 * calls the engine with a different request and reshapes the answer). The body was read and parsed once. */
export interface HandledRoute {
  respond(res: ServerResponse): void;
}

/** Decides the route for a parsed request (model resolution etc.), answers it itself, or refuses it. */
export type ResolveRoute = (
  body: ParsedBody,
  req: IncomingMessage,
  requestId: string,
  /** The request's response, e.g. to add `Retry-After` to a refusal (passed, not looked up: see InferenceGateway). */
  res: ServerResponse,
) => ForwardRoute | HandledRoute | UisError;

export interface ServingProxyOptions {
  pools: UpstreamPools;
  inFlight?: InFlightCounter;
  hooks?: ProxyHooks;
  /** Request body limit in bytes (413 above it). */
  maxBodyBytes?: number;
  /** Deepest JSON nesting accepted (400 `json_too_deep` beyond). Default 128. */
  maxJsonDepth?: number;
  /** The process-wide budget for bytes of bodies still arriving (503 + Retry-After when spent). */
  bodyBudget?: BodyBudget;
  /** The role's admission limit (503 + Retry-After when it and its queue are full). */
  admission?: AdmissionGate;
  /** When and after what wait an attempt that failed before the engine answered goes to another replica
   * (default: `DEFAULT_RETRY_POLICY`). */
  retry?: RetryPolicy;
  /** Inject a `rid` into bodies that carry none, so a disconnect can be aborted at the engine. */
  injectRid?: boolean;
  newId?: () => string;
  /** Error body of this route (default: the product's); OpenAI routes answer OpenAI's shape. */
  errorBody?: ErrorBodyOf;
  /** Credential headers that reach the engines anyway (`gateway.pass_headers`, lower case). */
  passHeaders?: ReadonlySet<string>;
}

export type ForwardOutcome = 'ok' | 'client_abort' | 'error';

/** One per client request, after it ended one way or another: what metrics need. */
export interface CompletionEvent {
  requestId: string;
  /** The route's model, when the request was routed. */
  model: string | undefined;
  rid: string | string[] | undefined;
  /** The last engine tried, if any. */
  target: ProxyTarget | undefined;
  /** Status sent to the client (0 when the client left or the stream broke before any status). */
  status: number;
  outcome: ForwardOutcome;
  error: UisError | undefined;
  attempts: number;
  /** Why each attempt after the first was made (the error code of the attempt before it). */
  retries: readonly string[];
  /** The answer was relayed as it came (an event stream, or a body of unknown or large size). */
  streamed: boolean;
  /** Tokens the engine reported for a completed answer (none for refusals, cut streams, or a stream whose client
   * did not ask for usage). */
  usage: TokenUsage | undefined;
  /** Bytes of the forwarded request body and of the response body relayed to the client (with the engine's
   * chunk framing when a chunked answer is relayed as it came). */
  bytesUp: number;
  bytesDown: number;
  /** Client body fully read (and the request handed to an engine), relative to the request's arrival. */
  bodyMs: number | undefined;
  /** The last attempt's request got an engine socket and started being written, relative to the arrival. */
  upstreamStartMs: number | undefined;
  /** Engine response headers received, relative to the request's arrival. */
  ttfbMs: number | undefined;
  /** First response byte handed to the client socket, relative to the request's arrival. */
  firstByteOutMs: number | undefined;
  totalMs: number;
}

export interface ProxyHooks {
  /** The request (its `rid`, given or injected) was sent to `target` (again on each retry): who holds it now. */
  onDispatch?(rid: string | string[], target: ProxyTarget, requestId: string, model?: string): void;
  /** The client left before the engine finished: the gateway asks that engine to abort `rid`. */
  onClientAbort?(rid: string | string[], target: ProxyTarget, requestId: string, model?: string): void;
  onComplete?(event: CompletionEvent): void;
  /** An attempt failed before any byte reached the client and the request goes to another engine. */
  onAttemptFailed?(target: ProxyTarget, code: string): void;
}
