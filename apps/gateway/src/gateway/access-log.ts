import type { ServedRequest } from './inference-gateway.ts';

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
