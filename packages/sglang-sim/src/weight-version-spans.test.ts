import { type GenerateResponse, GenerateResponseSchema } from '@uis/sglang-engine';
import { waitFor } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import type { SimServer } from './server.ts';
import { post, simsPerTest, sse } from './testing.ts';

// SGLang 0.5.19+ (the 0.5.23 surface here) report which weight version produced which output tokens on every
// finished answer: the scheduler records (old version, output tokens so far) for each live request when the version
// changes, compute_weight_version_spans turns that into [{version, start, end}], add_weight_versions_to_meta_info
// sets meta_info.weight_versions and the answer's weight_version to the last span's; OpenAI answers carry them in
// metadata (build_endpoint_weight_version_metadata); only the finished chunk of a stream has them. Older releases
// have none of it.
const { start } = simsPerTest();

const body = (rid: string, tokens: number) => ({
  rid,
  text: 'x',
  sampling_params: { max_new_tokens: tokens, ignore_eos: true },
});
const generate = (s: SimServer, rid: string, tokens: number) =>
  post(s.url, '/generate', body(rid, tokens)).then((r) => GenerateResponseSchema.parse(r.json));
const update = (s: SimServer, v: string) =>
  post(s.url, '/update_weights_from_disk', { model_path: `/ckpt/${v}`, weight_version: v });

/** Pauses in place once the running request made some tokens, updates to `v`, continues. */
async function switchInPlace(s: SimServer, v: string): Promise<void> {
  await waitFor(() => s.stats().running === 1 && s.stats().steps > 3, 10_000, 'tokens made');
  await post(s.url, '/pause_generation', { mode: 'in_place' });
  expect((await update(s, v)).status).toBe(200);
  await post(s.url, '/continue_generation', {});
}

/** The sim's own record of which version made each token, as spans: what the answer must say. */
function truth(s: SimServer, rid: string, n: number) {
  const runs = s.tokenVersions(rid) ?? [];
  return runs.map(([start, version], i) => ({ version, start, end: runs[i + 1]?.[0] ?? n }));
}

describe('weight version spans on answers (SGLang >= 0.5.19)', () => {
  it('a request that spanned an in-place switch reports both versions and the token index where they changed', async () => {
    const s = await start({ simDecodeUsPerToken: 3000, weightVersion: 'v1' });
    const pending = generate(s, 'span', 120);
    await switchInPlace(s, 'v2');
    const out = await pending;
    const spans = out.meta_info.weight_versions ?? [];
    expect(spans.map((x) => x.version)).toEqual(['v1', 'v2']);
    expect(spans).toEqual(truth(s, 'span', 120));
    expect(spans[0]).toMatchObject({ start: 0 });
    expect(spans[0]?.end).toBe(spans[1]?.start);
    expect(spans[1]?.end).toBe(120);
    expect(out.meta_info.weight_version).toBe('v2');
  });

  it('an answer on one version has one span of all its tokens; a plain request too', async () => {
    const s = await start({ weightVersion: 'v7' });
    const out = await generate(s, 'plain', 9);
    expect(out.meta_info.weight_versions).toEqual([{ version: 'v7', start: 0, end: 9 }]);
  });

  it('streams carry the spans on the finished chunk only', async () => {
    const s = await start({ simDecodeUsPerToken: 3000, weightVersion: 'v1' });
    const pending = sse(s.url, '/generate', { ...body('st', 60), stream: true });
    await switchInPlace(s, 'v2');
    const { events } = await pending;
    const chunks = events.filter((e): e is GenerateResponse => e !== '[DONE]');
    const last = chunks[chunks.length - 1]!;
    expect(chunks.slice(0, -1).every((c) => c.meta_info.weight_versions === undefined)).toBe(true);
    expect(last.meta_info.weight_versions).toEqual(truth(s, 'st', 60));
    expect(last.meta_info.weight_versions?.map((x) => x.version)).toEqual(['v1', 'v2']);
    // Each chunk's own weight_version is the engine's when it was sent: the change shows at the span's start.
    const change = last.meta_info.weight_versions?.[1]?.start ?? -1;
    for (const c of chunks.slice(0, -1))
      expect(c.meta_info.weight_version).toBe(c.meta_info.completion_tokens > change ? 'v2' : 'v1');
  });

  it('an abort after an in-place switch: the spans end at the partial output, the version is its last token', async () => {
    const s = await start({ simDecodeUsPerToken: 3000, weightVersion: 'v1' });
    const pending = generate(s, 'cut', 500);
    await waitFor(() => s.stats().running === 1 && s.stats().steps > 3, 10_000, 'tokens made');
    await post(s.url, '/pause_generation', { mode: 'in_place' });
    await update(s, 'v2');
    // Aborted while paused: no token was made on v2, so SGLang drops the empty v2 span.
    await post(s.url, '/abort_request', { rid: 'cut' });
    const out = await pending;
    expect(out.meta_info.finish_reason).toMatchObject({ type: 'abort' });
    const n = out.meta_info.completion_tokens;
    expect(out.meta_info.weight_versions).toEqual([{ version: 'v1', start: 0, end: n }]);
    expect(out.meta_info.weight_version).toBe('v1');
    await post(s.url, '/continue_generation', {});
  });

  it('a request aborted in the waiting queue has one empty span of the current version', async () => {
    const s = await start({ weightVersion: 'v3', simMaxRunningRequests: 1, simDecodeUsPerToken: 3000 });
    const first = generate(s, 'first', 400);
    const queued = generate(s, 'queued', 5);
    await waitFor(() => s.stats().waiting === 1, 10_000, 'queued');
    await post(s.url, '/abort_request', { rid: 'queued' });
    const out = await queued;
    expect(out.meta_info.finish_reason).toMatchObject({ type: 'abort', message: 'Abort in waiting queue' });
    expect(out.meta_info.weight_versions).toEqual([{ version: 'v3', start: 0, end: 0 }]);
    await post(s.url, '/abort_request', { rid: 'first' });
    await first;
  });

  it('OpenAI answers carry them in metadata (chat and completions)', async () => {
    const s = await start({ weightVersion: 'v4' });
    const chat = await post(s.url, '/v1/chat/completions', {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 6,
      ignore_eos: true,
    });
    expect(chat.json).toMatchObject({
      metadata: { weight_version: 'v4', weight_versions: [{ version: 'v4', start: 0, end: 6 }] },
    });
    const cmpl = await post(s.url, '/v1/completions', {
      model: 'm',
      prompt: 'hi',
      max_tokens: 4,
      ignore_eos: true,
    });
    expect(cmpl.json).toMatchObject({
      metadata: { weight_version: 'v4', weight_versions: [{ version: 'v4', start: 0, end: 4 }] },
    });
  });

  it('an older release (0.5.17) reports no spans, even across an in-place switch', async () => {
    const s = await start({ simSglangVersion: '0.5.17', simDecodeUsPerToken: 3000, weightVersion: 'v1' });
    const pending = generate(s, 'old', 60);
    await switchInPlace(s, 'v2');
    const out = await pending;
    expect(out.meta_info.weight_version).toBe('v2');
    expect(out.meta_info.weight_versions).toBeUndefined();
    expect(s.tokenVersions('old')?.map(([, v]) => v)).toEqual(['v1', 'v2']);
    const chat = await post(s.url, '/v1/chat/completions', {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 3,
    });
    expect((chat.json as { metadata: unknown }).metadata).toEqual({ weight_version: 'v2' });
  });
});
