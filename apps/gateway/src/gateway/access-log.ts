import type { CompletionEvent, TokenUsage } from '../proxy/index.ts';

/** One served request as the console's health history, the metrics and the access log see it. */
export interface ServedRequest {
  role: string;
  model: string;
  engineId: string | undefined;
  status: number;
  outcome: CompletionEvent['outcome'];
  totalMs: number;
  ttfbMs: number | undefined;
  /** Streamed answers only: arrival to the first token sent to the client. */
  ttftMs?: number | undefined;
  usage?: TokenUsage | undefined;
  /** Error codes of the attempts that were retried on another replica. */
  retries?: readonly string[] | undefined;
  /** The engine error code when the request failed at or with its engine. */
  upstreamError?: string | undefined;
  error: string | undefined;
  at: number;
}

/** The fields of one access-log line: what an operator greps for a request (its id), and what it cost. Tokens are
 * null when the engine reported none (a refusal, a stream whose client did not ask for usage). */
export interface AccessLine {
  access: true;
  request_id: string;
  role: string;
  model: string;
  replica: string | null;
  status: number;
  latency_ms: number;
  ttft_ms: number | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  outcome: ServedRequest['outcome'];
}

export function accessLine(r: ServedRequest, requestId: string): AccessLine {
  return {
    access: true,
    request_id: requestId,
    role: r.role,
    model: r.model,
    replica: r.engineId ?? null,
    status: r.status,
    latency_ms: Math.round(r.totalMs * 1000) / 1000,
    ttft_ms: r.ttftMs === undefined ? null : Math.round(r.ttftMs * 1000) / 1000,
    prompt_tokens: r.usage?.prompt ?? null,
    completion_tokens: r.usage?.completion ?? null,
    outcome: r.outcome,
  };
}
