import { GenerateResponseSchema } from '@uis/sglang-engine';
import { waitFor } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import type { SimServer } from './server.ts';
import { get, post, simsPerTest } from './testing.ts';

// What a weight switch relies on, as SGLang 0.5.10's tokenizer manager and scheduler do it: an update on an engine
// that is not paused takes model_update_lock's writer side (it waits for every request in flight, new requests
// wait behind it); pause_generation(in_place) freezes running requests with their KV cache so they finish on the
// new weights; pause_generation(abort) ends them with their partial output; a load that fails keeps the old weights.
const { start } = simsPerTest();

const generate = (s: SimServer, rid: string, tokens: number) =>
  post(s.url, '/generate', {
    rid,
    text: 'x',
    sampling_params: { max_new_tokens: tokens, ignore_eos: true },
  }).then((r) => GenerateResponseSchema.parse(r.json));
const running = async (s: SimServer) => s.stats().running + s.stats().waiting;
const update = (s: SimServer, v: string) =>
  post(s.url, '/update_weights_from_disk', { model_path: `/ckpt/${v}`, weight_version: v });

describe('switch semantics of the simulator', () => {
  it('an update without a pause waits for the requests in flight; a request sent meanwhile runs on the new weights', async () => {
    const s = await start({ simDecodeUsPerToken: 2000, weightVersion: 'v1' });
    const early = generate(s, 'early', 100);
    await waitFor(async () => (await running(s)) === 1, 10_000, 'request running');
    const updating = update(s, 'v2');
    await waitFor(
      () => s.state().weightVersion === 'v1' && s.stats().running === 1,
      10_000,
      'update waiting',
    );
    const late = generate(s, 'late', 5);
    const [a, u, b] = await Promise.all([early, updating, late]);
    expect(u.status).toBe(200);
    expect(a.meta_info.weight_version).toBe('v1');
    expect(s.tokenVersions('early')).toEqual([[0, 'v1']]);
    expect(b.meta_info.weight_version).toBe('v2');
    expect(s.tokenVersions('late')).toEqual([[0, 'v2']]);
  });

  it('pause in place: a running request keeps its tokens and finishes on the new weights', async () => {
    const s = await start({ simDecodeUsPerToken: 2000, weightVersion: 'v1' });
    const spanning = generate(s, 'span', 200);
    await waitFor(() => s.stats().running === 1, 10_000, 'request running');
    expect((await post(s.url, '/pause_generation', { mode: 'in_place' })).status).toBe(200);
    // A paused engine updates at once (no writer lock), with the request still frozen in its batch.
    expect((await update(s, 'v2')).status).toBe(200);
    expect(s.stats().running).toBe(1);
    await post(s.url, '/continue_generation', {});
    const out = await spanning;
    expect(out.meta_info.finish_reason).toMatchObject({ type: 'length' });
    expect(out.meta_info.weight_version).toBe('v2');
    const runs = s.tokenVersions('span') ?? [];
    expect(runs.map(([, v]) => v)).toEqual(['v1', 'v2']);
    expect(runs[1]?.[0]).toBeGreaterThan(0);
  });

  it('pause abort: a running request ends with its partial output and finish_reason abort', async () => {
    const s = await start({ simDecodeUsPerToken: 2000, weightVersion: 'v1' });
    const cut = generate(s, 'cut', 500);
    await waitFor(() => s.stats().running === 1, 10_000, 'request running');
    await post(s.url, '/pause_generation', { mode: 'abort' });
    const out = await cut;
    expect(out.meta_info.finish_reason).toMatchObject({ type: 'abort' });
    expect(out.meta_info.completion_tokens).toBeLessThan(500);
    await post(s.url, '/continue_generation', {});
  });

  it('an injected load failure answers 400 and keeps the old weights and version', async () => {
    const s = await start({ weightVersion: 'v1' });
    const armed = await post(s.url, '/sim/faults', { fail_weight_updates: 1 });
    expect(armed.json).toEqual({
      fail_weight_updates: 1,
      hold_arrivals: false,
      arrivals_waiting: 0,
      at_break: false,
    });
    const failed = await update(s, 'v2');
    expect(failed.status).toBe(400);
    expect(failed.json).toMatchObject({ success: false });
    expect(((await get(s.url, '/model_info')).json as { weight_version: string }).weight_version).toBe('v1');
    expect((await update(s, 'v2')).status).toBe(200);
    expect(s.state().weightVersion).toBe('v2');
  });
});
