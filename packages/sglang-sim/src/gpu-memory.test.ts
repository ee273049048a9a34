import { ManualClock } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import { SimEngine, SimFailure } from './engine.ts';
import { type SimOptionsInput, SimOptionsSchema } from './options.ts';

/** Engines on an injected clock: every modelled duration is a pending sleep whose length the test reads. */
function engines(clock: ManualClock) {
  const crashes: string[] = [];
  const make = (o: SimOptionsInput) =>
    new SimEngine(
      SimOptionsSchema.parse({ enableMemorySaver: true, ...o }),
      (reason) => crashes.push(reason),
      () => clock.now(),
      (ms) => clock.sleep(ms),
    );
  return { make, crashes };
}

/** Starts `op`, reads the one sleep it takes, lets it finish. */
async function timed(clock: ManualClock, op: Promise<void>): Promise<number> {
  await clock.untilPending(1);
  const [ms] = clock.pendingDelays();
  await clock.advance(ms ?? 0);
  await op;
  return ms ?? Number.NaN;
}

const judge = { simWeightGb: 65.6, tpSize: 4, simKvCacheShare: 0.25, simCudaGraphGb: 1 };

describe('the simulator: memory by tag, time by bytes', () => {
  it('moves weights with a CPU backup at the pinned speed, allocates the KV cache in alloc + free / 2', async () => {
    const clock = new ManualClock();
    const e = engines(clock).make({ ...judge, enableWeightsCpuBackup: true });
    // 65.6 GB over tp4 = 16.4 GB per GPU at 51.5 GB/s
    expect(await timed(clock, e.releaseMemory(['weights']))).toBeCloseTo((16.4 / 51.5) * 1000, 6);
    expect(await timed(clock, e.releaseMemory(['kv_cache']))).toBeCloseTo(15, 6);
    expect(e.memory).toMatchObject({ weights: 'released', kv_cache: 'released', cuda_graph: 'resident' });
    expect(await timed(clock, e.resumeMemory(['weights', 'kv_cache']))).toBeCloseTo(
      (16.4 / 51.5) * 1000 + 15,
      6,
    );
    expect(e.memory).toMatchObject({ weights: 'resident', kv_cache: 'resident' });
  });

  it('without a CPU backup weights are dropped and re-allocated; loading them from disk takes bytes / pageable', async () => {
    const clock = new ManualClock();
    const e = engines(clock).make({ simWeightGb: 16.4, tpSize: 2 });
    expect(await timed(clock, e.releaseMemory(['weights']))).toBeCloseTo(15, 6);
    expect(await timed(clock, e.resumeMemory(['weights']))).toBeCloseTo(15, 6);
    expect(await timed(clock, e.updateWeightsFromDisk('/ckpt/1', 'v1'))).toBeCloseTo((8.2 / 9) * 1000, 6);
  });

  it('tensors a colocated trainer pushes load at the pinned speed, on the call that flushes the cache', async () => {
    const clock = new ManualClock();
    const e = engines(clock).make({ simWeightGb: 16.4, tpSize: 2 });
    // A bucketed trainer's earlier buckets (flush_cache false) take no modelled time; the last one completes the
    // engine's weights: 8.2 GB per GPU at 51.5 GB/s, where a disk load of the same bytes takes 8.2 / 9 s.
    await e.updateWeightsFromTensor(1, undefined, false, false);
    expect(clock.pendingDelays()).toEqual([]);
    expect(await timed(clock, e.updateWeightsFromTensor(1, 'v1', false, true))).toBeCloseTo(
      (8.2 / 51.5) * 1000,
      6,
    );
    expect(e.weightVersion).toBe('v1');
  });

  it('an unsized engine keeps its fixed times (--sim-onload-ms)', async () => {
    const clock = new ManualClock();
    const e = engines(clock).make({ simOnloadMs: 40, simOffloadMs: 25 });
    expect(e.bytes).toBeNull();
    expect(await timed(clock, e.releaseMemory(null))).toBe(25);
    expect(await timed(clock, e.resumeMemory(null))).toBe(40);
  });

  /** Two engines named onto one GPU of `cap` bytes (a name of its own: the process's GPUs outlive a test): `a`
   * holds 60 GB of weights, `b` 40 GB and resumes last. */
  let gpus = 0;
  async function shared(capBytes: number) {
    const clock = new ManualClock();
    const { make, crashes } = engines(clock);
    const name = `node-0:${gpus++}`;
    const gpu = { simGpus: name, simGpuMemoryGb: capBytes / 1e9 };
    const a = make({ ...gpu, simWeightGb: 60 });
    const b = make({ ...gpu, simWeightGb: 40, enableWeightsCpuBackup: true });
    await timed(clock, b.releaseMemory(null));
    const resume = b.resumeMemory(['weights']).then(
      () => 'ok',
      (e: unknown) => e,
    );
    await clock.advance(clock.pendingDelays()[0] ?? 0);
    const result = await resume;
    const status = b.status;
    const weights = b.memory.weights;
    a.close();
    b.close();
    return { result, crashes, status, weights, name };
  }

  it('a resume fits with its last byte on a shared GPU', async () => {
    const { result, crashes, weights } = await shared(100e9);
    expect(result).toBe('ok');
    expect(crashes).toEqual([]);
    expect(weights).toBe('resident');
  });

  it('a resume one byte over the GPU fails as SGLang does: CUDA out of memory, and the engine dies', async () => {
    const { result, crashes, status, name } = await shared(100e9 - 1);
    expect(result).toBeInstanceOf(SimFailure);
    expect((result as SimFailure).status).toBe(500);
    expect(crashes).toEqual([
      `CUDA error: out of memory (resume_memory_occupation of weights: tried to allocate 40000000000 bytes on GPU ${name} with 60000000000 of 99999999999 bytes in use)`,
    ]);
    expect(status).toBe('crashed');
  });

  it('copies of engines sharing a GPU queue on its one host link', async () => {
    const clock = new ManualClock();
    const { make } = engines(clock);
    const gpu = { simGpus: 'node-2:0', enableWeightsCpuBackup: true };
    const a = make({ ...gpu, simWeightGb: 51.5 });
    const b = make({ ...gpu, simWeightGb: 25.75 });
    const both = Promise.all([a.releaseMemory(['weights']), b.releaseMemory(['weights'])]);
    await clock.untilPending(2);
    // 1 s for a's 51.5 GB at 51.5 GB/s, then b's 0.5 s behind it
    expect(clock.pendingDelays().map((ms) => Math.round(ms))).toEqual([1000, 1500]);
    await clock.advance(1500);
    await both;
    a.close();
    b.close();
  });

  it("a dead or closed engine's memory is free for the others", async () => {
    const clock = new ManualClock();
    const { make, crashes } = engines(clock);
    const gpu = { simGpus: 'node-1:freed', simGpuMemoryGb: 100 };
    const a = make({ ...gpu, simWeightGb: 70 });
    const b = make({ ...gpu, simWeightGb: 40, enableWeightsCpuBackup: true });
    await timed(clock, b.releaseMemory(['weights']));
    a.close();
    expect(await timed(clock, b.resumeMemory(['weights']))).toBeCloseTo((40 / 51.5) * 1000, 6);
    expect(crashes).toEqual([]);
    b.close();
  });
});
