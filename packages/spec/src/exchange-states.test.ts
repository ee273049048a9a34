import { describe, expect, it } from 'vitest';
import {
  canMoveExchange,
  EXCHANGE_MOVES,
  type ExchangeMove,
  type ExchangeState,
  ExchangeStateSchema,
  relaysStream,
} from './exchange-states.ts';

/** Runs `moves` from `reading`; the states passed through, or the first refused move. */
function run(moves: ExchangeMove[]): ExchangeState[] | string {
  let state: ExchangeState = 'reading';
  const seen: ExchangeState[] = [state];
  for (const move of moves) {
    if (!canMoveExchange(state, move)) return `${move} refused in ${state}`;
    state = EXCHANGE_MOVES[move].to;
    seen.push(state);
  }
  return seen;
}

describe('exchange move table', () => {
  it.each([
    ['streamed answer', ['send', 'stream', 'finish'], 'streaming'],
    ['admitted, buffered answer', ['queue', 'send', 'buffer', 'finish'], 'buffering'],
    [
      'retried, then relayed with the engine framing',
      ['send', 'retry', 'send', 'relay', 'finish'],
      'relaying',
    ],
    ['client left while the body arrived', ['abandon', 'finish'], 'client_gone'],
    ['client left before the engine started', ['send', 'abandon', 'finish'], 'client_gone'],
    ['refused before forwarding', ['finish'], 'reading'],
    ['turned away at admission', ['queue', 'finish'], 'queued'],
    ['client left during the retry wait', ['send', 'retry', 'finish'], 'waiting_retry'],
  ] as const)('%s', (_name, moves, through) => {
    const seen = run([...moves]);
    expect(Array.isArray(seen), String(seen)).toBe(true);
    expect(seen).toContain(through);
    expect((seen as ExchangeState[]).at(-1)).toBe('done');
  });

  it.each([
    ['retry', 'streaming', 'a stream that reached the client is never replayed'],
    ['retry', 'buffering', 'an engine that answered is not asked again'],
    ['abandon', 'streaming', 'a started answer is stopped by aborting the engine call, not abandoned'],
    ['abandon', 'queued', 'a queued request leaves the queue and ends at once'],
    ['buffer', 'reading', 'no answer before an engine has the request'],
    ['send', 'sent', 'one engine at a time'],
    ['queue', 'sent', 'admission comes before the engine'],
    ['send', 'client_gone', 'nothing is sent for a client that left'],
  ] as const)('refuses %s from %s: %s', (move, from, _why) => {
    expect(canMoveExchange(from, move)).toBe(false);
  });

  it('done is final and every other state can finish', () => {
    for (const move of Object.keys(EXCHANGE_MOVES) as ExchangeMove[])
      expect(canMoveExchange('done', move), move).toBe(false);
    for (const state of ExchangeStateSchema.options)
      expect(canMoveExchange(state, 'finish'), state).toBe(state !== 'done');
  });

  it('every state is reachable from reading', () => {
    const reached = new Set<ExchangeState>(['reading']);
    for (let grew = true; grew; ) {
      grew = false;
      for (const { from, to } of Object.values(EXCHANGE_MOVES))
        if (from.some((f: ExchangeState) => reached.has(f)) && !reached.has(to)) {
          reached.add(to);
          grew = true;
        }
    }
    expect([...reached].sort()).toEqual([...ExchangeStateSchema.options].sort());
  });

  it('only the streaming states relay an answer as it comes', () => {
    expect(ExchangeStateSchema.options.filter(relaysStream)).toEqual(['streaming', 'relaying']);
  });
});
