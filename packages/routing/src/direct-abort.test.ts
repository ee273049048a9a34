import { GenerateResponseSchema } from '@uis/sglang-engine';
import { waitFor } from '@uis/sglang-engine/testing';
import { type SimServer, startSimServer } from '@uis/sglang-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectClient } from './direct-client.ts';

const long = { input_ids: [3, 4, 5], sampling_params: { max_new_tokens: 10_000, ignore_eos: true } };

describe('DirectClient.abort: the replica the client chose aborts the request', { timeout: 30_000 }, () => {
  let sims: SimServer[];
  beforeAll(async () => {
    // 20 ms per token: a long generation still runs when the abort lands.
    sims = await Promise.all(
      [0, 1].map(() => startSimServer({ host: '127.0.0.1', port: 0, simDecodeUsPerToken: 20_000 })),
    );
    await Promise.all(sims.map((s) => s.ready));
  });
  afterAll(() => Promise.all(sims.map((s) => s.close())));

  it('a stream without a rid gets one (meta_info.id); abort ends it with the partial output, then [DONE]', async () => {
    const c = new DirectClient({ engineUrls: sims.map((s) => s.url) });
    await c.start();
    const chunks: string[] = [];
    const reading = (async () => {
      for await (const d of c.generateStream(long)) chunks.push(d);
    })();
    await waitFor(() => chunks.length >= 3);
    const rid = GenerateResponseSchema.parse(JSON.parse(chunks[0] as string)).meta_info.id;
    expect(rid).toMatch(/^direct-/);
    expect(await c.abort(rid)).toBe(true);
    await reading;
    const last = GenerateResponseSchema.parse(JSON.parse(chunks.at(-1) as string));
    expect(last.meta_info.finish_reason).toEqual({
      type: 'abort',
      message: 'Aborted',
      status_code: null,
      err_type: null,
    });
    expect(last.output_ids?.length).toBeGreaterThanOrEqual(3);
    expect(await c.abort(rid)).toBe(false);
  });

  it('a plain request keeps its rid; only the replica holding it is asked; an unknown rid is false', async () => {
    const c = new DirectClient({ engineUrls: sims.map((s) => s.url) });
    await c.start();
    const before = sims.map((s) => s.stats().aborted);
    const answer = c.generate({ ...long, rid: 'ts-plain' });
    const at = await waitFor(() => sims.find((s) => s.stats().running === 1));
    const other = sims.find((s) => s !== at) as SimServer;
    expect(await c.abort('ts-plain')).toBe(true);
    const out = GenerateResponseSchema.parse(await answer);
    expect(out.meta_info.finish_reason?.type).toBe('abort');
    expect(out.meta_info.id).toBe('ts-plain');
    expect(sims.map((s, i) => s.stats().aborted - (before[i] as number))).toEqual(
      sims.map((s) => (s === at ? 1 : 0)),
    );
    expect(other.stats().running).toBe(0);
    expect(await c.abort('never-sent')).toBe(false);
  });
});
