import { ManualClock } from '@uis/sglang-engine/testing';
import { isUisError, systemClock } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { BatchStore } from './batch-store.ts';
import { EventLog } from './event-log.ts';
import { openStore } from './store.ts';

const teacher = (n: number) => ({
  samples: Array.from({ length: n }, (_, i) => ({
    sample_id: `s${i}`,
    input: { input_ids: [1, 2, 3, 4], logprob_start_len: 1, response_length: 2 },
  })),
});

function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return isUisError(e) ? e.code : String(e);
  }
  return undefined;
}

describe('BatchStore', () => {
  it('validates inputs by kind with the path of the bad field', () => {
    const s = new BatchStore(openStore());
    const b = s.create({ kind: 'teacher_logprobs' });
    try {
      s.addSamples(b.id, { samples: [{ sample_id: 'a', input: { input_ids: [1], logprob_start_len: 3 } }] });
      expect.unreachable();
    } catch (e) {
      expect(isUisError(e) && e.path).toBe('samples[0].input.logprob_start_len');
    }
    const g = s.create({ kind: 'genrm_score' });
    expect(code(() => s.addSamples(g.id, { samples: [{ sample_id: 'a', input: { messages: [] } }] }))).toBe(
      'invalid_samples',
    );
    expect(s.get(g.id).samples).toBe(0);
  });

  it('commits whole exactly once, and a failed batch writes nothing back', () => {
    const s = new BatchStore(openStore());
    const b = s.create({ kind: 'teacher_logprobs', id: 'b1' });
    s.addSamples('b1', teacher(3));
    expect(code(() => s.addSamples('b1', teacher(1)))).toBe('sample_exists');
    s.seal('b1');
    expect(
      code(() => s.addSamples('b1', { samples: [{ sample_id: 'z', input: teacher(1).samples[0]?.input }] })),
    ).toBe('batch_not_open');
    const todo = s.beginRun(b.id);
    expect(todo.map((t) => t.idx)).toEqual([0, 1, 2]);
    s.stageResult('b1', 0, { logprobs: [-1, -2], token_ids: [3, 4] });
    expect(code(() => s.commit('b1'))).toBe('batch_incomplete');
    s.stageResult('b1', 1, { logprobs: [-1, -2], token_ids: [3, 4] });
    s.stageResult('b1', 2, { logprobs: [-1, -2], token_ids: [3, 4] });
    expect(s.commit('b1').state).toBe('committed');
    expect(code(() => s.commit('b1'))).toBe('batch_already_committed');
    expect(s.samples('b1').every((x) => x.output !== null)).toBe(true);

    const f = s.create({ kind: 'teacher_logprobs', id: 'b2' });
    s.addSamples(f.id, teacher(2));
    s.seal(f.id);
    s.beginRun(f.id);
    s.stageResult(f.id, 0, { logprobs: [-1, -2], token_ids: [3, 4] });
    expect(s.fail(f.id, 'engine died').state).toBe('failed');
    expect(s.samples(f.id).every((x) => x.output === null)).toBe(true);
    expect(code(() => s.stageResult(f.id, 1, {}))).toBe('batch_not_running');
  });

  it('records when a batch was created, when its last run began and when it committed', async () => {
    const clock = new ManualClock(1_000);
    const s = new BatchStore(openStore(), clock);
    const b = s.create({ kind: 'teacher_logprobs' });
    s.addSamples(b.id, teacher(1));
    s.seal(b.id);
    expect(s.get(b.id)).toMatchObject({ created_at: 1_000, started_at: null, committed_at: null });
    await clock.advance(3_000);
    s.beginRun(b.id);
    s.requeue(b.id, 'engines unreachable');
    await clock.advance(5_000);
    s.beginRun(b.id);
    s.stageResult(b.id, 0, { logprobs: [-1, -2], token_ids: [3, 4] });
    await clock.advance(500);
    expect(s.commit(b.id)).toMatchObject({ created_at: 1_000, started_at: 9_000, committed_at: 9_500 });
  });

  it('recover resumes a running batch keeping staged results, or fails it explicitly', () => {
    const db = openStore();
    const s = new BatchStore(db);
    for (const id of ['r', 'q']) {
      s.create({ kind: 'teacher_logprobs', id });
      s.addSamples(id, teacher(3));
      s.seal(id);
      s.beginRun(id);
      s.stageResult(id, 1, { logprobs: [-1, -2], token_ids: [3, 4] });
    }
    const restarted = new BatchStore(db);
    expect(restarted.recover('resume')).toEqual([
      { id: 'r', action: 'resumed' },
      { id: 'q', action: 'resumed' },
    ]);
    expect(restarted.beginRun('r').map((t) => t.idx)).toEqual([0, 2]);
    expect(restarted.get('r').attempts).toBe(2);
    restarted.recover('fail');
    expect(restarted.get('r').state).toBe('failed');
    expect(restarted.get('r').reason).toMatch(/restarted/);
  });

  it('answers the newest batches and the counts per kind and state in one query each', () => {
    let t = 0;
    // A clock that ticks at every reading: each batch is newer than the one before.
    const s = new BatchStore(openStore(), { ...systemClock, now: () => ++t });
    for (const id of ['a', 'b', 'c']) s.create({ kind: 'teacher_logprobs', id });
    s.create({ kind: 'genrm_score', id: 'g' });
    s.addSamples('c', teacher(1));
    s.seal('c');
    expect(s.newest(2).map((b) => b.id)).toEqual(['c', 'g']);
    expect(s.newest(10).map((b) => b.id)).toEqual(['a', 'b', 'c', 'g']);
    expect(s.counts()).toEqual([
      { kind: 'genrm_score', state: 'open', count: 1 },
      { kind: 'teacher_logprobs', state: 'open', count: 2 },
      { kind: 'teacher_logprobs', state: 'sealed', count: 1 },
    ]);
  });
});

describe('EventLog.latest', () => {
  it('answers the newest events oldest first', () => {
    const log = new EventLog(openStore());
    for (let i = 0; i < 5; i++) log.append({ kind: 'k', subject: `s${i}`, data: {} });
    expect(log.latest(3).map((e) => e.subject)).toEqual(['s2', 's3', 's4']);
    expect(log.latest(10)).toHaveLength(5);
  });
});
