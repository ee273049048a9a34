import type { BatchInfo } from '@uis/manager';
import { describe, expect, it } from 'vitest';
import { batchView } from './console-state.ts';

const base: BatchInfo = {
  id: 'b1',
  kind: 'genrm_score',
  role: 'genrm',
  model: null,
  state: 'sealed',
  reason: null,
  attempts: 0,
  samples: 4,
  results: 0,
  created_at: 1_000,
  updated_at: 2_000,
  started_at: null,
  committed_at: null,
};

describe('batchView', () => {
  it('shows why a batch failed, and why a queued batch was put back, but not a committed batch old reason', () => {
    const requeued = batchView({
      ...base,
      attempts: 1,
      started_at: 1_500,
      reason: 'engine_unreachable: POST http://e/v1/chat',
    });
    expect(requeued).toMatchObject({
      state: 'queued',
      started_at: null,
      failure: 'engine_unreachable: POST http://e/v1/chat',
    });
    expect(batchView({ ...base })).toMatchObject({ state: 'queued', failure: null });
    expect(batchView({ ...base, state: 'failed', reason: 'invalid result' })).toMatchObject({
      state: 'failed',
      failure: 'invalid result',
      ended_at: 2_000,
    });
    expect(
      batchView({ ...base, state: 'committed', reason: 'engine_timeout', committed_at: 3_000 }),
    ).toMatchObject({ state: 'committed', failure: null, ended_at: 3_000 });
    expect(batchView({ ...base, state: 'running', started_at: 2_000 })).toMatchObject({
      state: 'scoring',
      started_at: 2_000,
    });
  });

  it('keeps when a finished batch ran, so the console shows how long it queued and ran (not "-")', () => {
    const done = { ...base, attempts: 1, started_at: 1_500, updated_at: 3_000 };
    expect(batchView({ ...done, state: 'committed', committed_at: 3_000 })).toMatchObject({
      created_at: 1_000,
      started_at: 1_500,
      ended_at: 3_000,
    });
    expect(batchView({ ...done, state: 'failed', reason: 'bad answers' })).toMatchObject({
      started_at: 1_500,
      ended_at: 3_000,
    });
  });
});
