import { GenerateResponseSchema } from '@uis/sglang-engine';
import { waitFor } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import { get, post, simsPerTest } from './testing.ts';

const { start, track } = simsPerTest();
const short = { text: 'hi', sampling_params: { max_new_tokens: 3, ignore_eos: true } };

describe('fault injection', () => {
  it('held arrivals: an abort before the request’s rid is registered is dropped, as SGLang drops it', async () => {
    const s = await start({ simDecodeUsPerToken: 1000 });
    s.arrivals.hold();
    const answer = post(s.url, '/generate', {
      text: 'x',
      rid: 'early',
      sampling_params: { max_new_tokens: 20, ignore_eos: true },
    });
    await waitFor(() => s.arrivals.waiting === 1);
    expect((await post(s.url, '/abort_request', { rid: 'early' })).status).toBe(200);
    s.arrivals.release();
    const out = GenerateResponseSchema.parse((await answer).json);
    expect(out.meta_info.finish_reason?.type).toBe('length');
    expect(out.output_ids).toHaveLength(20);
    expect(s.arrivals.waiting).toBe(0);
  });

  it('held arrivals over HTTP (POST /sim/faults hold_arrivals, GET /sim/faults arrivals_waiting), for engines in other processes', async () => {
    const s = await start({ simDecodeUsPerToken: 1000 });
    expect((await post(s.url, '/sim/faults', { hold_arrivals: true })).json).toEqual({
      fail_weight_updates: 0,
      hold_arrivals: true,
      arrivals_waiting: 0,
      at_break: false,
    });
    const answer = post(s.url, '/generate', { ...short, rid: 'held-http' });
    await waitFor(
      async () =>
        ((await get(s.url, '/sim/faults')).json as { arrivals_waiting: number }).arrivals_waiting === 1,
    );
    expect(s.stats().running + s.stats().waiting).toBe(0);
    const released = await post(s.url, '/sim/faults', { hold_arrivals: false });
    expect(released.json).toMatchObject({ hold_arrivals: false });
    expect(GenerateResponseSchema.parse((await answer).json).output_ids).toHaveLength(3);
    // As FastAPI answers a body its model refuses.
    expect((await post(s.url, '/sim/faults', { hold_arrivals: 'yes' })).status).toBe(422);
  });

  it('the break point over HTTP (break_at, at_break, unbreak): the engine stands at a known token of a request', async () => {
    const s = await start({ simDecodeUsPerToken: 1000 });
    await post(s.url, '/sim/faults', { break_at: { rid: 'brk-http', tokens: 2 } });
    const answer = post(s.url, '/generate', { ...short, rid: 'brk-http' });
    await waitFor(async () => ((await get(s.url, '/sim/faults')).json as { at_break: boolean }).at_break);
    expect(s.stats().running).toBe(1);
    expect((await post(s.url, '/sim/faults', { unbreak: true })).json).toMatchObject({ at_break: false });
    expect(GenerateResponseSchema.parse((await answer).json).output_ids).toHaveLength(3);
    expect((await post(s.url, '/sim/faults', { break_at: { rid: 'x', tokens: 0 } })).status).toBe(422);
  });

  it('--sim-crash-after N serves N requests, then dies in the middle of the next stream', async () => {
    const s = await start({ simCrashAfter: 1, simDecodeUsPerToken: 5000 });
    expect((await post(s.url, '/generate', short)).status).toBe(200);
    const res = await fetch(`${s.url}/generate`, {
      method: 'POST',
      body: JSON.stringify({
        text: 'x',
        stream: true,
        sampling_params: { max_new_tokens: 1000, ignore_eos: true },
      }),
    });
    expect(res.status).toBe(200);
    await expect(res.text()).rejects.toThrow();
    expect(s.state().status).toBe('crashed');
    await expect(fetch(`${s.url}/health`)).rejects.toThrow();
  });

  it('--sim-crash-after calls the crash hook (the CLI exits on it)', async () => {
    const { startSimServer } = await import('./server.ts');
    const reasons: string[] = [];
    const s = await startSimServer({ simCrashAfter: 0 }, { onCrash: (r) => reasons.push(r) });
    track(s);
    await s.ready;
    void post(s.url, '/generate', short).catch(() => undefined);
    await waitFor(() => reasons.length === 1);
    expect(reasons[0]).toMatch(/injected crash/);
  });

  it('--sim-hang-after N stops answering generation and health after N requests', async () => {
    const s = await start({ simHangAfter: 1 });
    expect((await post(s.url, '/generate', short)).status).toBe(200);
    await expect(post(s.url, '/generate', short, AbortSignal.timeout(300))).rejects.toThrow();
    expect(s.state().status).toBe('hung');
    await expect(get(s.url, '/health', AbortSignal.timeout(300))).rejects.toThrow();
    await expect(get(s.url, '/health_generate', AbortSignal.timeout(300))).rejects.toThrow();
    expect((await get(s.url, '/get_model_info')).status).toBe(200);
  });

  it('--sim-error-rate 1 answers every generation with 500 and the SGLang error body', async () => {
    const s = await start({ simErrorRate: 1 });
    const r = await post(s.url, '/generate', short);
    expect(r.status).toBe(500);
    expect(r.json).toMatchObject({ error: { message: expect.stringContaining('sim-error-rate') } });
    const c = await post(s.url, '/v1/chat/completions', {
      model: 'm',
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(c.status).toBe(500);
    expect(c.json).toMatchObject({ object: 'error', code: 500 });
    expect(s.stats().errors).toBe(2);
  });

  it('--sim-error-rate is seeded: the same seed fails the same requests', async () => {
    const pattern = async (seed: number) => {
      const s = await start({ simErrorRate: 0.5, simSeed: seed });
      const out: number[] = [];
      for (let i = 0; i < 16; i++) out.push((await post(s.url, '/generate', short)).status);
      return out;
    };
    const p1 = await pattern(3);
    expect(await pattern(3)).toEqual(p1);
    expect(p1).toContain(500);
    expect(p1).toContain(200);
  });

  it('--sim-slow-health-ms delays health answers', async () => {
    const s = await start({ simSlowHealthMs: 400 });
    await expect(get(s.url, '/health', AbortSignal.timeout(100))).rejects.toThrow();
    expect((await get(s.url, '/health')).status).toBe(200);
  });

  it('--sim-early-release answers before the memory is free; resuming too early runs out of memory', async () => {
    // The early resume must land while the offload runs: 5 s leaves room for a loaded machine's round trips.
    const s = await start({ enableMemorySaver: true, simEarlyRelease: true, simOffloadMs: 5000 });
    expect((await post(s.url, '/release_memory_occupation', { tags: ['weights'] })).status).toBe(200);
    expect(s.state().memory.weights).toBe('releasing');
    const early = await post(s.url, '/resume_memory_occupation', { tags: ['weights'] });
    expect(early.status).toBe(400);
    expect(early.json).toMatchObject({ error: { message: expect.stringContaining('out of memory') } });
    await waitFor(() => s.state().memory.weights === 'released', 20_000);
    expect((await post(s.url, '/resume_memory_occupation', { tags: ['weights'] })).status).toBe(200);
    expect(
      GenerateResponseSchema.parse((await post(s.url, '/generate', short)).json).meta_info.completion_tokens,
    ).toBe(3);
  });

  it('without early release, release answers once the memory is free', async () => {
    const s = await start({ enableMemorySaver: true, simOffloadMs: 100 });
    expect((await post(s.url, '/release_memory_occupation', { tags: ['weights'] })).status).toBe(200);
    expect(s.state().memory.weights).toBe('released');
  });

  it('a client that goes away mid-stream frees its request', async () => {
    const s = await start({ simDecodeUsPerToken: 5000 });
    const ac = new AbortController();
    const res = await fetch(`${s.url}/generate`, {
      method: 'POST',
      body: JSON.stringify({
        text: 'x',
        stream: true,
        sampling_params: { max_new_tokens: 100_000, ignore_eos: true },
      }),
      signal: ac.signal,
    });
    const reader = res.body?.getReader();
    await reader?.read();
    ac.abort();
    await waitFor(() => s.stats().running === 0);
    expect(s.stats().kvTokensUsed).toBe(0);
  });
});

describe('launch errors', () => {
  it.each([
    [{ nnodes: 2 }, /dist-init-addr is required/],
    [{ nnodes: 2, distInitAddr: 'nohost' }, /host:port/],
    [{ nnodes: 2, nodeRank: 2, distInitAddr: '127.0.0.1:1' }, /node-rank/],
  ])('refuses %j before listening', async (o, msg) => {
    const { startSimServer } = await import('./server.ts');
    await expect(startSimServer(o)).rejects.toThrow(msg);
  });
});
