import type { UisError } from '@uis/spec';
import type { ProxyTarget } from './forward.ts';
import type { TokenUsage } from './usage.ts';

export type ForwardOutcome = 'ok' | 'client_abort' | 'error';

/** One per client request, after it ended one way or another: what metrics need. */
export interface CompletionEvent {
  requestId: string;
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
  /** The client left before the engine finished: the gateway asks that engine to abort `rid`. */
  onClientAbort?(rid: string | string[], target: ProxyTarget, requestId: string): void;
  onComplete?(event: CompletionEvent): void;
  /** An attempt failed before any byte reached the client and the request goes to another engine. */
  onAttemptFailed?(target: ProxyTarget, code: string): void;
}
