import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { specFromSampling } from './generate.ts';
import { initialContext } from './model.ts';
import { type SequenceSpec, SimSequence } from './request.ts';
import { Scheduler, type SchedulerConfig } from './scheduler.ts';

/** A sequence as the server builds it from `{max_new_tokens, ignore_eos: true}`: lengths are fixed, seed key 1. */
const spec = (rid: string, promptLen: number, maxNew: number): SequenceSpec =>
  specFromSampling(
    rid,
    Array.from({ length: promptLen }, (_, i) => 3 + (i % 50)),
    { max_new_tokens: maxNew, ignore_eos: true },
    { seedKey: 1 },
    { seed: 0 },
  );

/** Runs sequences to completion, checking the invariants after every produced token. */
async function run(config: Partial<SchedulerConfig>, specs: SequenceSpec[]) {
  const full: SchedulerConfig = {
    maxRunningRequests: 4,
    kvCapacityTokens: 1000,
    prefillUsPerToken: 0,
    decodeUsPerToken: 0,
    now: () => performance.now(),
    ...config,
  };
  let maxRunning = 0;
  let maxKv = 0;
  const finished: SimSequence[] = [];
  let done!: () => void;
  const all = new Promise<void>((r) => {
    done = r;
  });
  const sched = new Scheduler(full, (s) => {
    finished.push(s);
    if (finished.length === specs.length) done();
  });
  const observe = () => {
    maxRunning = Math.max(maxRunning, sched.running.length);
    maxKv = Math.max(maxKv, sched.kvTokensUsed);
  };
  for (const sp of specs) sched.submit(new SimSequence(sp, initialContext(1), 0, observe));
  await all;
  return { finished, maxRunning, maxKv, sched };
}

describe('Scheduler', () => {
  it.each([
    [1, 1000],
    [3, 1000],
    [8, 120],
    [8, 10_000],
  ])(
    'max running %i, KV %i: limits hold and every sequence finishes with its length',
    async (maxRunningRequests, kv) => {
      const specs = Array.from({ length: 12 }, (_, i) => spec(`r${i}`, 5 + i, 3 + (i % 5)));
      const r = await run({ maxRunningRequests, kvCapacityTokens: kv }, specs);
      expect(r.maxRunning).toBeLessThanOrEqual(maxRunningRequests);
      expect(r.maxKv).toBeLessThanOrEqual(kv);
      for (const s of r.finished) expect(s.outputIds).toHaveLength(s.spec.maxNewTokens);
      expect(r.sched.kvTokensUsed).toBe(0);
      expect(r.sched.busy).toBe(false);
    },
  );

  it('a batch decodes together: steps = longest sequence, not the sum', async () => {
    const specs = [spec('a', 4, 10), spec('b', 4, 6), spec('c', 4, 3)];
    const r = await run({}, specs);
    expect(r.sched.counters.steps).toBe(10);
    expect(r.sched.counters.prefillTokens).toBe(12);
  });

  it('max_new_tokens 0 finishes in one step with no output', async () => {
    const r = await run({}, [spec('s', 7, 0)]);
    expect(r.finished[0]?.outputIds).toEqual([]);
    expect(r.finished[0]?.finishReason).toEqual({ type: 'length', length: 0 });
  });
});
