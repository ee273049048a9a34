import { z } from 'zod';

/** One serving request's trip through the gateway's proxy (its `Exchange`): `reading` (body arriving, route being
 * resolved), `queued` (waiting for an admission slot), `sent` (an engine has it, no answer yet), then the answer is
 * `buffering` (small and sized: collected, sent in one write), `streaming` (relayed as it comes) or `relaying` (a
 * chunked answer relayed with the engine's own framing); `waiting_retry` (an attempt failed before the engine
 * answered: the next replica after the retry wait); `client_gone` (the client left before the engine side could be
 * stopped: it ends at the engine's next event); `done`. */
export const ExchangeStateSchema = z.enum([
  'reading',
  'queued',
  'sent',
  'buffering',
  'streaming',
  'relaying',
  'waiting_retry',
  'client_gone',
  'done',
]);
export type ExchangeState = z.infer<typeof ExchangeStateSchema>;

const LIVE = ExchangeStateSchema.exclude(['done']).options;

/** Every way an exchange moves, and from which state. The proxy changes an exchange's state only through these. */
export const EXCHANGE_MOVES = {
  /** No admission slot free at once: wait for one. */
  queue: { from: ['reading'], to: 'queued' },
  /** Hand the request to an engine: at once, once admitted, or after a retry's wait. */
  send: { from: ['reading', 'queued', 'waiting_retry'], to: 'sent' },
  /** The engine answered with a small sized body. */
  buffer: { from: ['sent'], to: 'buffering' },
  /** The engine answered with an event stream, a body of unknown length or a large one. */
  stream: { from: ['sent'], to: 'streaming' },
  /** As `stream`, with the engine's chunk framing kept (an HTTP/1.1 client). */
  relay: { from: ['sent'], to: 'relaying' },
  /** The attempt failed before the engine answered; another replica takes it after the wait. */
  retry: { from: ['sent'], to: 'waiting_retry' },
  /** The client left while nothing upstream could be stopped yet (body still arriving, engine not started). */
  abandon: { from: ['reading', 'sent'], to: 'client_gone' },
  /** Answered, refused, failed or abandoned: what the request held is given back, once. */
  finish: { from: LIVE, to: 'done' },
} as const satisfies Record<string, { from: readonly ExchangeState[]; to: ExchangeState }>;

export type ExchangeMove = keyof typeof EXCHANGE_MOVES;

export function canMoveExchange(from: ExchangeState, move: ExchangeMove): boolean {
  return (EXCHANGE_MOVES[move].from as readonly ExchangeState[]).includes(from);
}

/** The states in which an engine's answer is being relayed to the client as it comes. */
export function relaysStream(state: ExchangeState): boolean {
  return state === 'streaming' || state === 'relaying';
}
