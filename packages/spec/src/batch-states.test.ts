import { describe, expect, it } from 'vitest';
import {
  BATCH_STAGE,
  BATCH_TRANSITIONS,
  type BatchState,
  BatchStateSchema,
  canTransitionBatch,
} from './batch-states.ts';

describe('batch transition table', () => {
  it('runs a batch open -> sealed -> running -> committed, and puts a running batch back to sealed', () => {
    const path: BatchState[] = ['open', 'sealed', 'running', 'sealed', 'running', 'committed'];
    for (let i = 1; i < path.length; i++) expect(canTransitionBatch(path[i - 1]!, path[i]!)).toBe(true);
  });

  it('committed and failed are final; any unfinished state may fail', () => {
    for (const to of BatchStateSchema.options) {
      expect(canTransitionBatch('committed', to)).toBe(false);
      expect(canTransitionBatch('failed', to)).toBe(false);
    }
    for (const from of ['open', 'sealed', 'running'] as const)
      expect(canTransitionBatch(from, 'failed')).toBe(true);
  });

  it.each([
    ['open', 'running'],
    ['open', 'committed'],
    ['sealed', 'committed'],
    ['sealed', 'open'],
    ['running', 'open'],
  ] as const)('refuses %s -> %s', (from, to) => {
    expect(canTransitionBatch(from, to)).toBe(false);
  });

  it('every state has a row and a console stage; waiting states show as queued', () => {
    expect(Object.keys(BATCH_TRANSITIONS).sort()).toEqual([...BatchStateSchema.options].sort());
    expect(BATCH_STAGE.open).toBe('queued');
    expect(BATCH_STAGE.sealed).toBe('queued');
    expect(BATCH_STAGE.running).toBe('scoring');
  });
});
