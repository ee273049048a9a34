import { ChangeFeed } from '@uis/control-plane';
import type { AuditEvent } from '@uis/manager';
import { describe, expect, it } from 'vitest';
import { ConsoleJournal } from './console-journal.ts';

let seq = 0;
const event = (
  kind: string,
  at: number,
  data: Record<string, unknown> = {},
  duration_ms: number | null = null,
) =>
  ({
    seq: ++seq,
    at,
    kind,
    subject: 'actor',
    actor: null,
    operation_id: null,
    duration_ms,
    data,
  }) satisfies AuditEvent;

describe('ConsoleJournal', () => {
  it('pairs transition events into a timeline: running, ok with its final target, failed with the reason', () => {
    const j = new ConsoleJournal();
    j.record(event('transition.started', 1000, { from: 'rollout', to: 'genrm_score' }));
    expect(j.transitionsOf('actor')).toEqual([
      expect.objectContaining({ from: 'rollout', to: 'genrm_score', status: 'running', ended_at: null }),
    ]);
    j.record(event('transition.step', 1100, { step: 'offload' }, 100));
    j.record(event('transition.completed', 3000, { from: 'rollout', to: 'train' }, 2000));
    j.record(event('transition.started', 4000, { from: 'train', to: 'rollout' }));
    j.record(event('lease.blocked', 4500, { reason: 'engines did not report memory released' }, 500));
    expect(j.transitionsOf('actor')).toEqual([
      expect.objectContaining({
        to: 'train',
        status: 'ok',
        started_at: 1000,
        ended_at: 3000,
        duration_ms: 2000,
      }),
      expect.objectContaining({
        to: 'rollout',
        status: 'failed',
        duration_ms: 500,
        error: 'engines did not report memory released',
      }),
    ]);
    expect(j.transitionsOf('other')).toEqual([]);
  });

  it('keeps the newest 200 events, each with a readable message and system as the default actor', () => {
    const j = new ConsoleJournal();
    for (let i = 0; i < 250; i++) j.record(event('admin.drain', i, { ok: true, n: i }, 12.4));
    const events = j.eventViews();
    expect(events).toHaveLength(200);
    expect(events.at(-1)).toMatchObject({
      kind: 'admin.drain',
      actor: 'system',
      message: 'admin.drain actor (12 ms): ok=true n=249',
    });
    expect(events[0]?.id).toBe((events.at(-1)?.id ?? 0) - 199);
  });

  it('samples relayed requests at most once a second per replica, but never hides a failure', () => {
    const j = new ConsoleJournal();
    const served = (at: number, status: number) =>
      j.served({
        role: 'rollout',
        model: 'm',
        engineId: 'm/0',
        status,
        outcome: 'ok',
        totalMs: 5,
        ttfbMs: 1,
        error: undefined,
        at,
      });
    served(1000, 200);
    served(1500, 200);
    served(1600, 502);
    served(2700, 200);
    expect(j.healthOf('m/0').map((s) => [s.at, s.ok])).toEqual([
      [1000, true],
      [1600, false],
      [2700, true],
    ]);
  });
});

describe('ChangeFeed', () => {
  it('wakes a waiter once for any number of changes, and at once when it is already behind', async () => {
    const feed = new ChangeFeed();
    const signal = new AbortController().signal;
    const seen = feed.current;
    const waiting = feed.after(seen, signal);
    feed.notify();
    feed.notify();
    // Woken by the first change; the second is there when it looks again.
    expect(await waiting).toBe(seen + 1);
    expect(feed.current).toBe(seen + 2);
    expect(await feed.after(seen, signal)).toBe(seen + 2);
    const abort = new AbortController();
    const idle = feed.after(feed.current, abort.signal);
    abort.abort();
    expect(await idle).toBe(seen + 2);
  });
});
