import { z } from 'zod';

/** A deferred batch's durable state: `open` (samples arriving), `sealed` (complete, waiting for its scorer phase),
 * `running` (being scored), then `committed` or `failed`. */
export const BatchStateSchema = z.enum(['open', 'sealed', 'running', 'committed', 'failed']);
export type BatchState = z.infer<typeof BatchStateSchema>;

/** The one transition table of a batch. `running -> sealed` puts a batch back for the next scorer phase (engines
 * unreachable, phase interrupted); committed and failed are final. */
export const BATCH_TRANSITIONS: Readonly<Record<BatchState, readonly BatchState[]>> = {
  open: ['sealed', 'failed'],
  sealed: ['running', 'failed'],
  running: ['committed', 'sealed', 'failed'],
  committed: [],
  failed: [],
};

export function canTransitionBatch(from: BatchState, to: BatchState): boolean {
  return BATCH_TRANSITIONS[from].includes(to);
}

/** What the console shows of a batch's state: waiting (`open`, `sealed`) is one stage. */
export const BatchStageSchema = z.enum(['queued', 'scoring', 'committed', 'failed']);
export type BatchStage = z.infer<typeof BatchStageSchema>;

export const BATCH_STAGE: Readonly<Record<BatchState, BatchStage>> = {
  open: 'queued',
  sealed: 'queued',
  running: 'scoring',
  committed: 'committed',
  failed: 'failed',
};
