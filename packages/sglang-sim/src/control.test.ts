import {
  GenerateResponseSchema,
  GetLoadResponseSchema,
  ModelInfoSchema,
  ModelListSchema,
  ServerInfoSchema,
  StatusMessageSchema,
  V1LoadsSchema,
} from '@uis/sglang-engine';
import { waitFor } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import { get, post, simsPerTest } from './testing.ts';

const { start, track } = simsPerTest();
/** 20 ms per decode step: long generations stay running long enough to act on them. */
const SLOW = { simDecodeUsPerToken: 20_000 };
const long = (rid: string) => ({
  text: 'long',
  rid,
  sampling_params: { max_new_tokens: 10_000, ignore_eos: true },
});
const short = { text: 'hi', sampling_params: { max_new_tokens: 4, ignore_eos: true } };
/** 2 s of SLOW decoding: a request still runs when a control call sent once it started lands, even on a loaded
 * machine, and still ends in a few seconds. */
const WINDOW_TOKENS = 100;

describe('info endpoints', () => {
  it('serve model info, server info, weight version, models and health', async () => {
    const s = await start({
      modelPath: 'org/m',
      servedModelName: 'm',
      tpSize: 2,
      baseGpuId: 2,
      gpuIdStep: 2,
      cudaVisibleDevices: '0,1,2,3,4,5',
    });
    for (const p of ['/get_model_info', '/model_info']) {
      expect(ModelInfoSchema.parse((await get(s.url, p)).json)).toMatchObject({
        model_path: 'org/m',
        is_generation: true,
        weight_version: 'default',
      });
    }
    for (const p of ['/get_server_info', '/server_info']) {
      const info = ServerInfoSchema.parse((await get(s.url, p)).json);
      expect(info).toMatchObject({
        tp_size: 2,
        served_model_name: 'm',
        cuda_visible_devices: '0,1,2,3,4,5',
        gpu_ids: [2, 4],
      });
    }
    // 0.5.23 (the default release) dropped /get_weight_version: the version is in model info.
    expect((await get(s.url, '/get_weight_version')).status).toBe(404);
    expect(ModelListSchema.parse((await get(s.url, '/v1/models')).json).data[0]).toMatchObject({
      id: 'm',
      root: 'm',
    });
    expect((await get(s.url, '/v1/models/m')).status).toBe(200);
    expect((await get(s.url, '/v1/models/other')).status).toBe(404);
    expect((await get(s.url, '/health')).status).toBe(200);
    expect((await get(s.url, '/health_generate')).status).toBe(200);
    expect((await get(s.url, '/nope')).status).toBe(404);
    expect((await get(s.url, '/generate')).status).toBe(405);
  });

  it('answers 503 on /health until the startup delay is over', async () => {
    const { startSimServer } = await import('./server.ts');
    // Long enough that both requests below are answered before it ends, even on a loaded machine.
    const s = await startSimServer({ simStartupMs: 3000 });
    track(s);
    expect((await get(s.url, '/health')).status).toBe(503);
    expect((await post(s.url, '/generate', short)).status).toBe(503);
    await s.ready;
    expect((await get(s.url, '/health')).status).toBe(200);
  });

  it('reports load per DP rank (/get_load up to 0.5.17, /v1/loads from 0.5.8)', async () => {
    const s = await start({ ...SLOW, dpSize: 2, simSglangVersion: '0.5.17' });
    const pending = [post(s.url, '/generate', { ...long('l0'), routed_dp_rank: 1 })];
    await waitFor(
      async () => GetLoadResponseSchema.parse((await get(s.url, '/get_load')).json)[1]?.num_reqs === 1,
    );
    const load = GetLoadResponseSchema.parse((await get(s.url, '/get_load')).json);
    expect(load.map((l) => l.dp_rank)).toEqual([0, 1]);
    expect(load[0]?.num_reqs).toBe(0);
    expect(load[1]?.num_tokens).toBeGreaterThan(0);
    const v1 = V1LoadsSchema.parse((await get(s.url, '/v1/loads')).json);
    expect(v1.loads.map((l) => [l.dp_rank, l.num_running_reqs + l.num_waiting_reqs])).toEqual([
      [0, 0],
      [1, 1],
    ]);
    await post(s.url, '/abort_request', { abort_all: true });
    await Promise.all(pending);
  });
});

describe('flush, abort, pause', () => {
  it('flush_cache answers 400 plain text while requests run, 200 when idle', async () => {
    const s = await start(SLOW);
    const pending = post(s.url, '/generate', long('f1'));
    await waitFor(() => s.stats().running === 1);
    const busy = await post(s.url, '/flush_cache');
    expect(busy.status).toBe(400);
    expect(busy.text).toContain('Cache flushed');
    await post(s.url, '/abort_request', { rid: 'f1' });
    await pending;
    expect((await post(s.url, '/flush_cache')).status).toBe(200);
    expect((await get(s.url, '/flush_cache')).status).toBe(200);
  });

  it('abort_request by rid ends that request with finish_reason abort, others go on', async () => {
    const s = await start(SLOW);
    const x = post(s.url, '/generate', long('x'));
    const y = post(s.url, '/generate', {
      ...long('y'),
      sampling_params: { max_new_tokens: 5, ignore_eos: true },
    });
    // Both admitted (x may arrive after y): an abort of an rid not yet known would leave x running for 200 s.
    await waitFor(() => s.stats().requests === 2);
    expect((await post(s.url, '/abort_request', { rid: 'x' })).status).toBe(200);
    const rx = GenerateResponseSchema.parse((await x).json);
    expect(rx.meta_info.finish_reason?.type).toBe('abort');
    const ry = GenerateResponseSchema.parse((await y).json);
    expect(ry.meta_info.finish_reason).toEqual({ type: 'length', length: 5 });
    expect((await post(s.url, '/abort_request', {})).status).toBe(422);
  });

  it("abort_request answers as SGLang's scheduler: partial output, a running or a queued abort's reason, rid prefixes", async () => {
    const s = await start({ ...SLOW, simMaxRunningRequests: 2 });
    const running = post(s.url, '/generate', long('r'));
    const sibling = post(s.url, '/generate', long('r-1'));
    await waitFor(() => s.stats().running === 2);
    const queued = post(s.url, '/generate', long('q'));
    await waitFor(() => s.stats().waiting === 1 && s.stats().steps >= 4);
    // No request has exactly this rid: the tokenizer manager drops the abort before the scheduler's prefix match.
    expect((await post(s.url, '/abort_request', { rid: 'r-' })).status).toBe(200);
    expect((await post(s.url, '/abort_request', { rid: '' })).status).toBe(200);
    expect(s.stats().running + s.stats().waiting).toBe(3);
    const aborted = await post(s.url, '/abort_request', { rid: 'r' });
    expect([aborted.status, aborted.text]).toEqual([200, '']);
    for (const answer of [await running, await sibling]) {
      const r = GenerateResponseSchema.parse(answer.json);
      expect(r.meta_info.finish_reason).toEqual({
        type: 'abort',
        message: 'Aborted',
        status_code: null,
        err_type: null,
      });
      expect(r.output_ids?.length).toBeGreaterThan(0);
      expect(r.meta_info.completion_tokens).toBe(r.output_ids?.length);
    }
    await waitFor(() => s.stats().running === 1);
    const second = post(s.url, '/generate', long('w'));
    await waitFor(() => s.stats().waiting === 0 && s.stats().running === 2);
    const third = post(s.url, '/generate', long('w2'));
    await waitFor(() => s.stats().waiting === 1);
    await post(s.url, '/abort_request', { rid: 'w2' });
    const waited = GenerateResponseSchema.parse((await third).json);
    expect(waited.meta_info.finish_reason).toEqual({ type: 'abort', message: 'Abort in waiting queue' });
    expect(waited.output_ids).toEqual([]);
    await post(s.url, '/abort_request', { abort_all: true });
    await Promise.all([queued, second]);
  });

  it('abort_all ends every request, streamed ones with a final abort chunk and [DONE]', async () => {
    const s = await start(SLOW);
    const streamed = fetch(`${s.url}/generate`, {
      method: 'POST',
      body: JSON.stringify({ ...long('s'), stream: true }),
    }).then((r) => r.text());
    const plain = post(s.url, '/generate', long('p'));
    await waitFor(() => s.stats().running === 2);
    await post(s.url, '/abort_request', { abort_all: true });
    const text = await streamed;
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(text).toContain('"type":"abort"');
    expect(GenerateResponseSchema.parse((await plain).json).meta_info.finish_reason?.type).toBe('abort');
  });

  it('pause in_place freezes requests until continue; pause abort aborts them', async () => {
    const s = await start(SLOW);
    const r = post(s.url, '/generate', {
      ...long('pp'),
      sampling_params: { max_new_tokens: WINDOW_TOKENS, ignore_eos: true },
    });
    await waitFor(() => s.stats().running === 1);
    const p = await post(s.url, '/pause_generation', { mode: 'in_place' });
    expect(StatusMessageSchema.parse(p.json).status).toBe('ok');
    expect((await post(s.url, '/flush_cache')).status).toBe(400);
    const steps = s.stats().steps;
    await new Promise((res) => setTimeout(res, 150));
    expect(s.stats().steps).toBe(steps);
    expect(s.state().paused).toBe('in_place');
    expect((await get(s.url, '/health_generate')).status).toBe(503);
    expect(StatusMessageSchema.parse((await post(s.url, '/continue_generation')).json).status).toBe('ok');
    expect(GenerateResponseSchema.parse((await r).json).meta_info.completion_tokens).toBe(WINDOW_TOKENS);

    const q = post(s.url, '/generate', long('pa'));
    await waitFor(() => s.stats().running === 1);
    await post(s.url, '/pause_generation', { mode: 'abort' });
    expect(GenerateResponseSchema.parse((await q).json).meta_info.finish_reason?.type).toBe('abort');
    await post(s.url, '/continue_generation');
  });

  it('pause retract moves running requests back to the queue and finishes them after continue', async () => {
    const s = await start(SLOW);
    const r = post(s.url, '/generate', {
      ...long('rt'),
      sampling_params: { max_new_tokens: WINDOW_TOKENS, ignore_eos: true },
    });
    await waitFor(() => s.stats().running === 1);
    await post(s.url, '/pause_generation', { mode: 'retract' });
    expect(s.stats()).toMatchObject({ running: 0, waiting: 1, kvTokensUsed: 0 });
    // The RL weight-sync sequence: retract, flush, update, continue.
    expect((await post(s.url, '/flush_cache')).status).toBe(200);
    await post(s.url, '/continue_generation');
    const done = GenerateResponseSchema.parse((await r).json);
    expect(done.meta_info.completion_tokens).toBe(WINDOW_TOKENS);
    const fresh = GenerateResponseSchema.parse(
      (
        await post(s.url, '/generate', {
          text: 'long',
          sampling_params: { max_new_tokens: WINDOW_TOKENS, ignore_eos: true },
        })
      ).json,
    );
    expect(done.text).toBe(fresh.text);
  });
});

describe('timing model', () => {
  it('batches up to max running requests and queues the rest', async () => {
    const s = await start({ ...SLOW, simMaxRunningRequests: 2 });
    const all = ['q1', 'q2', 'q3'].map((rid) => post(s.url, '/generate', long(rid)));
    await waitFor(() => s.stats().running === 2 && s.stats().waiting === 1);
    await post(s.url, '/abort_request', { abort_all: true });
    await Promise.all(all);
  });

  it('queues requests that do not fit the KV capacity', async () => {
    const s = await start({ ...SLOW, simKvCapacityTokens: 100 });
    const body = (rid: string) => ({
      text: 'kv',
      rid,
      sampling_params: { max_new_tokens: 60, ignore_eos: true },
    });
    const all = [post(s.url, '/generate', body('k1')), post(s.url, '/generate', body('k2'))];
    await waitFor(() => s.stats().running === 1 && s.stats().waiting === 1);
    expect(s.stats().kvTokensUsed).toBeLessThanOrEqual(100);
    await post(s.url, '/abort_request', { abort_all: true });
    await Promise.all(all);
    const tooLong = await post(s.url, '/generate', {
      text: 'x'.repeat(200),
      sampling_params: { max_new_tokens: 1 },
    });
    expect(tooLong.status).toBe(400);
    // One bad item fails a streamed batch before anything runs.
    const batch = await post(s.url, '/generate', { text: ['ok', 'x'.repeat(200)], stream: true });
    expect(batch.status).toBe(400);
    expect(s.stats()).toMatchObject({ running: 0, waiting: 0 });
  });

  it('takes modelled time: prefill tokens delay the first token, each decode step costs decode time', async () => {
    const s = await start({ simDecodeUsPerToken: 10_000, simPrefillUsPerToken: 1000 });
    const t0 = performance.now();
    const res = await fetch(`${s.url}/generate`, {
      method: 'POST',
      body: JSON.stringify({
        input_ids: Array(100).fill(70),
        stream: true,
        sampling_params: { max_new_tokens: 10, ignore_eos: true },
      }),
    });
    const reader = res.body?.getReader();
    await reader?.read();
    // First step: 100 prefill tokens x 1 ms + one decode step of 10 ms.
    expect(performance.now() - t0).toBeGreaterThanOrEqual(100);
    while (!(await reader?.read())?.done) {}
    // Then 9 more decode steps of 10 ms.
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
    expect(s.stats()).toMatchObject({ steps: 10, completionTokens: 10 });
  });
});
