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
  committed_at: null,
};

describe('batchView', () => {
  it('shows why a batch failed, and why a queued batch was put back, but not a committed batch old reason', () => {
    const requeued = batchView({ ...base, attempts: 1, reason: 'engine_unreachable: POST http://e/v1/chat' });
    expect(requeued).toMatchObject({ state: 'queued', failure: 'engine_unreachable: POST http://e/v1/chat' });
    expect(batchView({ ...base })).toMatchObject({ state: 'queued', failure: null });
    expect(batchView({ ...base, state: 'failed', reason: 'invalid result' })).toMatchObject({
      state: 'failed',
      failure: 'invalid result',
      ended_at: 2_000,
    });
    expect(
      batchView({ ...base, state: 'committed', reason: 'engine_timeout', committed_at: 3_000 }),
    ).toMatchObject({ state: 'committed', failure: null, ended_at: 3_000 });
    expect(batchView({ ...base, state: 'running' })).toMatchObject({ state: 'scoring', started_at: 2_000 });
  });
});
