import {
  ChatCompletionChunkSchema,
  ChatCompletionResponseSchema,
  GenerateBatchResponseSchema,
  GenerateResponseSchema,
  GenerateStreamChunkSchema,
} from '@uis/sglang-engine';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderChatTemplate } from './chat.ts';
import type { SimServer } from './server.ts';
import { post, sim, sse } from './testing.ts';
import { EOS_ID, encode } from './tokenizer.ts';

let a: SimServer;
let b: SimServer;
beforeAll(async () => {
  a = await sim({ servedModelName: 'tiny' });
  b = await sim({ servedModelName: 'tiny' });
});
afterAll(async () => {
  await a.close();
  await b.close();
});

const gen = async (s: SimServer, body: unknown) => {
  const r = await post(s.url, '/generate', body);
  expect(r.status).toBe(200);
  return GenerateResponseSchema.parse(r.json);
};

describe('/generate', () => {
  it('answers text with output_ids and meta_info, deterministically across engines', async () => {
    const body = { text: 'The answer is', sampling_params: { max_new_tokens: 12, ignore_eos: true } };
    const x = await gen(a, body);
    const y = await gen(b, body);
    expect(x.text).toBe(y.text);
    expect(x.output_ids).toEqual(y.output_ids);
    expect(x.meta_info).toMatchObject({
      finish_reason: { type: 'length', length: 12 },
      prompt_tokens: encode('The answer is').length,
      completion_tokens: 12,
      weight_version: 'default',
    });
    expect(x.text.length).toBeGreaterThan(12);
  });

  it('text and the same input_ids give the same output; rid is echoed', async () => {
    const t = await gen(a, {
      text: 'hello',
      rid: 'r-1',
      sampling_params: { max_new_tokens: 5, ignore_eos: true },
    });
    const ids = await gen(a, {
      input_ids: encode('hello'),
      sampling_params: { max_new_tokens: 5, ignore_eos: true },
    });
    expect(ids.text).toBe(t.text);
    expect(t.meta_info.id).toBe('r-1');
  });

  it('a different seed changes sampled output, temperature 0 ignores the seed', async () => {
    const sp = (seed: number, temperature = 1) => ({
      max_new_tokens: 16,
      ignore_eos: true,
      sampling_seed: seed,
      temperature,
    });
    const s1 = await gen(a, { text: 'x', sampling_params: sp(1) });
    const s2 = await gen(a, { text: 'x', sampling_params: sp(2) });
    expect(s1.text).not.toBe(s2.text);
    const g1 = await gen(a, { text: 'x', sampling_params: sp(1, 0) });
    const g2 = await gen(a, { text: 'x', sampling_params: sp(2, 0) });
    expect(g1.text).toBe(g2.text);
  });

  it('batch input gives a list in input order, each equal to its single answer', async () => {
    const sp = { max_new_tokens: 6, ignore_eos: true };
    const r = await post(a.url, '/generate', {
      text: ['one', 'two'],
      sampling_params: sp,
      rid: ['b0', 'b1'],
    });
    const list = GenerateBatchResponseSchema.parse(r.json);
    expect(list.map((x) => x.meta_info.id)).toEqual(['b0', 'b1']);
    expect(list[1]?.text).toBe((await gen(a, { text: 'two', sampling_params: sp })).text);
    const ids = GenerateBatchResponseSchema.parse(
      (await post(a.url, '/generate', { input_ids: [encode('one'), encode('two')], sampling_params: sp }))
        .json,
    );
    expect(ids.map((x) => x.text)).toEqual(list.map((x) => x.text));
  });

  it('sampling_params.n gives n answers per prompt, the first equal to n = 1', async () => {
    const sp = { max_new_tokens: 8, ignore_eos: true };
    const r = await post(a.url, '/generate', { text: 'many', rid: 'm', sampling_params: { ...sp, n: 3 } });
    const list = GenerateBatchResponseSchema.parse(r.json);
    expect(list.map((x) => x.meta_info.id)).toEqual(['m-0', 'm-1', 'm-2']);
    expect(new Set(list.map((x) => x.text)).size).toBe(3);
    expect(list[0]?.text).toBe((await gen(a, { text: 'many', sampling_params: sp })).text);
    const greedy = GenerateBatchResponseSchema.parse(
      (await post(a.url, '/generate', { text: 'many', sampling_params: { ...sp, n: 2, temperature: 0 } }))
        .json,
    );
    expect(greedy[0]?.text).toBe(greedy[1]?.text);
  });

  it('returns logprobs as [logprob, id, text|null] honouring logprob_start_len', async () => {
    const prompt = encode('abcdef');
    const r = await gen(a, {
      input_ids: prompt,
      return_logprob: true,
      logprob_start_len: 2,
      sampling_params: { max_new_tokens: 4, ignore_eos: true },
    });
    expect(r.meta_info.input_token_logprobs?.map((t) => t[1])).toEqual(prompt.slice(2));
    expect(r.meta_info.input_token_logprobs?.every((t) => t[2] === null && typeof t[0] === 'number')).toBe(
      true,
    );
    expect(r.meta_info.output_token_logprobs?.map((t) => t[1])).toEqual(r.output_ids);
    const withText = await gen(a, {
      input_ids: prompt,
      return_logprob: true,
      logprob_start_len: 0,
      return_text_in_logprobs: true,
      sampling_params: { max_new_tokens: 1 },
    });
    expect(withText.meta_info.input_token_logprobs?.[0]).toEqual([null, prompt[0], 'a']);
    const outOnly = await gen(a, {
      input_ids: prompt,
      return_logprob: true,
      sampling_params: { max_new_tokens: 2 },
    });
    expect(outOnly.meta_info.input_token_logprobs).toEqual([]);
  });

  it('max_new_tokens 0 scores a sequence with the logprobs it was generated with', async () => {
    const prompt = encode('score me');
    const g = await gen(a, {
      input_ids: prompt,
      return_logprob: true,
      sampling_params: { max_new_tokens: 8, ignore_eos: true },
    });
    const full = [...prompt, ...(g.output_ids ?? [])];
    const s = await gen(a, {
      input_ids: full,
      return_logprob: true,
      logprob_start_len: prompt.length,
      sampling_params: { max_new_tokens: 0 },
    });
    expect(s.text).toBe('');
    expect(s.meta_info.completion_tokens).toBe(0);
    expect(s.meta_info.finish_reason).toEqual({ type: 'length', length: 0 });
    expect(s.meta_info.input_token_logprobs?.map((t) => t[0])).toEqual(
      g.meta_info.output_token_logprobs?.map((t) => t[0]),
    );
  });

  it('token_ids_logprob reports the logprobs of chosen ids at every position, consistent with the sampled ones', async () => {
    const prompt = encode('pick');
    const g = await gen(a, {
      input_ids: prompt,
      return_logprob: true,
      sampling_params: { max_new_tokens: 4, ignore_eos: true },
    });
    const first = g.output_ids?.[0] as number;
    const r = await gen(a, {
      input_ids: prompt,
      return_logprob: true,
      logprob_start_len: 0,
      token_ids_logprob: [first, 300],
      sampling_params: { max_new_tokens: 4, ignore_eos: true },
    });
    const out = r.meta_info.output_token_ids_logprobs ?? [];
    expect(out).toHaveLength(4);
    expect(out[0]?.map((t) => t[1])).toEqual([first, 300]);
    expect(out[0]?.[0]?.[0]).toBe(g.meta_info.output_token_logprobs?.[0]?.[0]);
    const inp = r.meta_info.input_token_ids_logprobs ?? [];
    expect(inp).toHaveLength(prompt.length);
    expect(inp[0]).toBeNull();
    expect(inp[1]?.map((t) => t[1])).toEqual([first, 300]);
  });

  it('top_logprobs_num gives k candidates per output token, the chosen one first', async () => {
    const r = await gen(a, {
      text: 'q',
      return_logprob: true,
      top_logprobs_num: 3,
      sampling_params: { max_new_tokens: 3, ignore_eos: true },
    });
    expect(r.meta_info.input_top_logprobs).toEqual([]);
    const scored = await gen(a, {
      text: 'qr',
      return_logprob: true,
      logprob_start_len: 0,
      top_logprobs_num: 2,
      sampling_params: { max_new_tokens: 0 },
    });
    expect(scored.meta_info.input_top_logprobs?.[0]).toBeNull();
    expect(scored.meta_info.input_top_logprobs?.[1]?.map((t) => t[1])[0]).toBe(encode('qr')[1]);
    expect(scored.meta_info.input_top_logprobs?.[1]).toHaveLength(2);
    const tops = r.meta_info.output_top_logprobs ?? [];
    expect(tops).toHaveLength(3);
    tops.forEach((t, i) => {
      expect(t).toHaveLength(3);
      expect(t?.[0]?.[1]).toBe(r.output_ids?.[i]);
    });
  });

  it('stops on a stop string (trimmed) and on a stop token id', async () => {
    const base = await gen(a, {
      text: 'stop test',
      sampling_params: { max_new_tokens: 20, ignore_eos: true },
    });
    const words = base.text.split(' ').filter(Boolean);
    const stopWord = ` ${words[3]}`;
    const cut = base.text.indexOf(stopWord);
    const s = await gen(a, {
      text: 'stop test',
      sampling_params: { max_new_tokens: 20, ignore_eos: true, stop: [stopWord] },
    });
    expect(s.text).toBe(base.text.slice(0, cut));
    expect(s.meta_info.finish_reason).toEqual({ type: 'stop', matched: stopWord });
    const tid = base.output_ids?.[2] as number;
    const t = await gen(a, {
      text: 'stop test',
      sampling_params: { max_new_tokens: 20, ignore_eos: true, stop_token_ids: [tid] },
    });
    expect(t.meta_info.finish_reason).toEqual({ type: 'stop', matched: tid });
    expect(t.output_ids?.at(-1)).toBe(tid);
  });

  it('ends with EOS (finish stop, matched EOS id) when EOS is allowed', async () => {
    const r = await gen(a, { text: 'eos', sampling_params: { max_new_tokens: 4000 } });
    expect(r.meta_info.finish_reason).toEqual({ type: 'stop', matched: EOS_ID });
    expect(r.output_ids?.at(-1)).toBe(EOS_ID);
  });

  it('reports cached_tokens for a repeated prefix', async () => {
    const text = 'a long shared system prompt for caching';
    await gen(a, { text, sampling_params: { max_new_tokens: 1 } });
    const r = await gen(a, { text: `${text} plus more`, sampling_params: { max_new_tokens: 1 } });
    expect(r.meta_info.cached_tokens).toBe(encode(text).length);
  });

  it('streams cumulative text, then [DONE]; the last chunk equals the non-streamed answer', async () => {
    const body = {
      text: 'stream',
      sampling_params: { max_new_tokens: 5, ignore_eos: true },
      return_logprob: true,
    };
    const { status, events } = await sse(a.url, '/generate', { ...body, stream: true });
    expect(status).toBe(200);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => GenerateStreamChunkSchema.parse(e));
    expect(chunks).toHaveLength(5);
    chunks.forEach((c, i) => {
      expect(c.meta_info.completion_tokens).toBe(i + 1);
      if (i > 0) expect(c.text.startsWith(chunks[i - 1]?.text ?? '')).toBe(true);
      expect(c.meta_info.finish_reason === null).toBe(i < 4);
    });
    const plain = await gen(a, body);
    expect(chunks[4]?.text).toBe(plain.text);
    expect(chunks[4]?.meta_info.output_token_logprobs).toEqual(plain.meta_info.output_token_logprobs);
  });

  it('--stream-interval sends one chunk every N tokens and always the last', async () => {
    const s = await sim({ streamInterval: 4 });
    try {
      const { events } = await sse(s.url, '/generate', {
        text: 'x',
        stream: true,
        sampling_params: { max_new_tokens: 10, ignore_eos: true },
      });
      const counts = events
        .slice(0, -1)
        .map((e) => GenerateStreamChunkSchema.parse(e).meta_info.completion_tokens);
      expect(counts).toEqual([4, 8, 10]);
    } finally {
      await s.close();
    }
  });

  it('streams a batch with an index per chunk', async () => {
    const { events } = await sse(a.url, '/generate', {
      text: ['p', 'q'],
      stream: true,
      sampling_params: { max_new_tokens: 2, ignore_eos: true },
    });
    const chunks = events.slice(0, -1).map((e) => GenerateStreamChunkSchema.parse(e));
    expect(chunks.filter((c) => c.index === 0)).toHaveLength(2);
    expect(chunks.filter((c) => c.index === 1)).toHaveLength(2);
  });

  it.each([
    [{}, 422],
    [{ text: 'x', input_ids: [1] }, 422],
    [{ text: 'x', sampling_params: { max_new_tokens: -1 } }, 422],
    [{ input_ids: [999999] }, 400],
    [{ input_embeds: [[0.5]] }, 400],
    [{ text: [] }, 400],
    [{ input_ids: [] }, 400],
    [{ text: '' }, 400],
    [null, 422],
    [[1, 2], 422],
  ])('rejects bad input %j with %i', async (body, status) => {
    const r = await post(a.url, '/generate', body);
    expect(r.status).toBe(status);
  });

  it('rejects invalid JSON with 422 and keeps serving', async () => {
    const r = await fetch(`${a.url}/generate`, { method: 'POST', body: '{nope' });
    expect(r.status).toBe(422);
    await r.text();
    expect(
      (await gen(a, { text: 'still alive', sampling_params: { max_new_tokens: 1 } })).meta_info
        .completion_tokens,
    ).toBe(1);
  });
});

describe('/v1/chat/completions', () => {
  const messages = [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: 'hi' },
  ];

  it('renders the chat template and answers in the OpenAI shape with usage', async () => {
    const r = await post(a.url, '/v1/chat/completions', {
      model: 'tiny',
      messages,
      max_tokens: 6,
      ignore_eos: true,
    });
    expect(r.status).toBe(200);
    const c = ChatCompletionResponseSchema.parse(r.json);
    const prompt = renderChatTemplate(messages as never);
    const g = await gen(a, { text: prompt, sampling_params: { max_new_tokens: 6, ignore_eos: true } });
    expect(c.choices[0]?.message.content).toBe(g.text);
    expect(c.usage).toMatchObject({
      prompt_tokens: encode(prompt).length,
      completion_tokens: 6,
      total_tokens: encode(prompt).length + 6,
    });
    expect(c.choices[0]?.finish_reason).toBe('length');
  });

  it('honours chat_template_kwargs', async () => {
    expect(renderChatTemplate([{ role: 'user', content: 'hi' }], { enable_thinking: false })).toContain(
      '<think>\n\n</think>',
    );
    const body = { model: 'tiny', messages, max_tokens: 8, ignore_eos: true };
    const plain = ChatCompletionResponseSchema.parse((await post(a.url, '/v1/chat/completions', body)).json);
    const kw = ChatCompletionResponseSchema.parse(
      (
        await post(a.url, '/v1/chat/completions', {
          ...body,
          chat_template_kwargs: { enable_thinking: false },
        })
      ).json,
    );
    expect(kw.usage.prompt_tokens).toBeGreaterThan(plain.usage.prompt_tokens);
    expect(kw.choices[0]?.message.content).not.toBe(plain.choices[0]?.message.content);
  });

  it('returns chat logprobs when asked', async () => {
    const c = ChatCompletionResponseSchema.parse(
      (
        await post(a.url, '/v1/chat/completions', {
          model: 'tiny',
          messages,
          max_tokens: 3,
          ignore_eos: true,
          logprobs: true,
          top_logprobs: 2,
        })
      ).json,
    );
    expect(c.choices[0]?.logprobs?.content).toHaveLength(3);
    expect(c.choices[0]?.logprobs?.content?.[0]?.top_logprobs).toHaveLength(2);
  });

  it('streams deltas that add up to the full answer, then usage and [DONE]', async () => {
    const body = { model: 'tiny', messages, max_tokens: 5, ignore_eos: true };
    const full = ChatCompletionResponseSchema.parse((await post(a.url, '/v1/chat/completions', body)).json);
    const { events } = await sse(a.url, '/v1/chat/completions', {
      ...body,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => ChatCompletionChunkSchema.parse(e));
    expect(chunks[0]?.choices[0]?.delta.role).toBe('assistant');
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe(full.choices[0]?.message.content);
    const finals = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finals).toHaveLength(1);
    expect(finals[0]?.choices[0]?.finish_reason).toBe('length');
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(5);
  });

  it('answers a bad request with an OpenAI error body', async () => {
    const r = await post(a.url, '/v1/chat/completions', { model: 'tiny', messages: [] });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ object: 'error', code: 400 });
  });

  it('serves /v1/completions', async () => {
    const r = await post(a.url, '/v1/completions', {
      model: 'tiny',
      prompt: 'abc',
      max_tokens: 4,
      ignore_eos: true,
    });
    expect(r.status).toBe(200);
    const g = await gen(a, { text: 'abc', sampling_params: { max_new_tokens: 4, ignore_eos: true } });
    expect(r.json).toMatchObject({
      object: 'text_completion',
      choices: [{ text: g.text, finish_reason: 'length' }],
    });
  });
});
