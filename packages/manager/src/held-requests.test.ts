import type { SGLangEngine } from '@uis/sglang-engine';
import { ManualClock } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import { type AbortTargets, HeldRequests } from './held-requests.ts';

/** Replicas whose engine records each abort it is sent (rid, replica, when), as SGLang would receive them. */
function replicas(clock: ManualClock, ids: string[]) {
  const sent: Array<{ rid: string; engineId: string; at: number }> = [];
  const targets: AbortTargets = {
    models: () => ['policy'],
    running: () =>
      ids.map((engineId) => ({
        engineId,
        engine: {
          client: {
            abortRequest: async (rid: string) => {
              sent.push({ rid, engineId, at: clock.now() });
            },
            abortAll: async () => {
              sent.push({ rid: '*', engineId, at: clock.now() });
            },
          },
        } as unknown as SGLangEngine,
      })),
  };
  return { sent, targets };
}

describe('an abort that reaches the engine before the request does', () => {
  it('is sent again, backing off, to the replica holding the request, until the request ends', async () => {
    const clock = new ManualClock(0);
    const held = new HeldRequests(clock);
    const { sent, targets } = replicas(clock, ['r0', 'r1']);
    held.hold('a', { model: 'policy', engineId: 'r0', requestId: 'q1' });
    await held.abort({ rid: 'a' }, targets);
    expect(sent).toEqual([{ rid: 'a', engineId: 'r0', at: 0 }]);
    expect(held.resending).toBe(1);
    await clock.advance(25 + 50 + 100);
    expect(sent.map((s) => s.at)).toEqual([0, 25, 75, 175]);
    // A retry moved the request to another replica: the abort follows it.
    held.hold('a', { model: 'policy', engineId: 'r1', requestId: 'q1' });
    await clock.advance(200 + 400 + 400);
    expect(sent.slice(4)).toEqual([
      { rid: 'a', engineId: 'r1', at: 375 },
      { rid: 'a', engineId: 'r1', at: 775 },
      { rid: 'a', engineId: 'r1', at: 1175 },
    ]);
    // The request ended (aborted, or finished first): no more re-sends, no timer left.
    held.release('a', 'q1');
    expect(held.resending).toBe(0);
    expect(clock.pending).toBe(0);
    await clock.advance(10_000);
    expect(sent).toHaveLength(7);
  });

  it('a later request reusing the rid is not aborted by the earlier one’s re-sends', async () => {
    const clock = new ManualClock(0);
    const held = new HeldRequests(clock);
    const { sent, targets } = replicas(clock, ['r0']);
    held.hold('a', { model: 'policy', engineId: 'r0', requestId: 'q1' });
    await held.abort({ rid: 'a' }, targets);
    held.release('a', 'q1');
    held.hold('a', { model: 'policy', engineId: 'r0', requestId: 'q2' });
    await clock.advance(5_000);
    expect(sent).toHaveLength(1);
  });

  it('abort_all re-sends each held request’s abort by rid until it ends; shutting down stops them', async () => {
    const clock = new ManualClock(0);
    const held = new HeldRequests(clock);
    const { sent, targets } = replicas(clock, ['r0']);
    held.hold('a', { model: 'policy', engineId: 'r0', requestId: 'q1' });
    held.hold('b', { model: 'policy', engineId: 'r0', requestId: 'q2' });
    const r = await held.abort({ abort_all: true }, targets);
    expect(r.aborted.map((a) => a.rid)).toEqual(['a', 'b']);
    expect(sent).toEqual([{ rid: '*', engineId: 'r0', at: 0 }]);
    await clock.advance(25);
    expect(sent.slice(1).map((s) => s.rid)).toEqual(['a', 'b']);
    held.release('a', 'q1');
    await clock.advance(50);
    expect(sent.slice(3).map((s) => s.rid)).toEqual(['b']);
    held.close();
    expect(held.resending).toBe(0);
    await clock.advance(5_000);
    expect(sent).toHaveLength(4);
  });
});
