import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SGLangClient } from './client.ts';
import type { SGLangEngine } from './engine.ts';
import { alive, failure, simEngine } from './testing.ts';
import { waitFor } from './wait-for.ts';

/** Every client endpoint over real HTTP against one sglang-sim process started through buildServerArgs and the
 * local launcher. */
let engine: SGLangEngine;
let client: SGLangClient;

beforeAll(async () => {
  engine = await simEngine({ offload: true, simFlags: ['--sim-decode-us-per-token', '2000'] });
  await engine.start({ deadlineMs: 60_000 });
  client = engine.client;
}, 90_000);

afterAll(async () => {
  const pids = engine.pids();
  await engine.shutdown(5000);
  expect(pids.filter(alive)).toEqual([]);
}, 30_000);

// A sim child process; its polls allow 20 s, which the 5 s default test timeout cut short on a loaded machine.
describe('SGLangClient against sglang-sim', { timeout: 30_000 }, () => {
  it('health, models, model and server info, load', async () => {
    expect(await client.health()).toBe(true);
    expect(await client.healthGenerate()).toBe(true);
    const models = await client.models();
    expect(models.data.map((m) => m.id)).toEqual(['sim-model']);
    const info = await client.modelInfo();
    expect(info.model_path).toBe('sim/tiny-model');
    expect(info.is_generation).toBe(true);
    const server = await client.serverInfo();
    expect(server.tp_size).toBe(2);
    expect(server.enable_memory_saver).toBe(true);
    const load = await client.load();
    expect(load[0]).toMatchObject({ dp_rank: 0, num_reqs: 0, num_waiting_reqs: 0 });
  });

  it('generate: plain, deterministic, with logprobs, prefill-only scoring, batch', async () => {
    const req = { text: 'The capital of France is', sampling_params: { max_new_tokens: 8, temperature: 0 } };
    const a = await client.generate(req);
    const b = await client.generate(req);
    expect(a.text).toBe(b.text);
    expect(a.meta_info.completion_tokens).toBe(8);
    expect(a.meta_info.finish_reason).toEqual({ type: 'length', length: 8 });

    const lp = await client.generate({ ...req, return_logprob: true, logprob_start_len: 0 });
    expect(lp.meta_info.output_token_logprobs).toHaveLength(8);
    expect(lp.meta_info.input_token_logprobs).toHaveLength(lp.meta_info.prompt_tokens);

    const score = await client.generate({
      input_ids: [1, 2, 3, 4, 5],
      sampling_params: { max_new_tokens: 0, temperature: 0 },
      return_logprob: true,
      logprob_start_len: 2,
    });
    expect(score.meta_info.completion_tokens).toBe(0);
    expect(score.meta_info.input_token_logprobs).toHaveLength(3);

    const batch = await client.generateBatch({
      text: ['one', 'two', 'three'],
      sampling_params: { max_new_tokens: 4, temperature: 0 },
    });
    expect(batch).toHaveLength(3);
    expect(batch.every((r) => r.meta_info.completion_tokens === 4)).toBe(true);
  });

  it('generate stream: cumulative text chunks ending in the full text', async () => {
    const req = { text: 'stream me', sampling_params: { max_new_tokens: 6, temperature: 0 } };
    const chunks = [];
    for await (const c of client.generateStream(req)) chunks.push(c);
    expect(chunks.length).toBeGreaterThan(1);
    for (let i = 1; i < chunks.length; i++)
      expect(chunks[i]!.text.startsWith(chunks[i - 1]!.text)).toBe(true);
    const whole = await client.generate(req);
    expect(chunks.at(-1)!.text).toBe(whole.text);
    expect(chunks.at(-1)!.meta_info.finish_reason?.type).toBe('length');
  });

  it('chat completions: plain and streaming', async () => {
    const req = {
      model: 'sim-model',
      messages: [{ role: 'user' as const, content: 'Hello' }],
      max_tokens: 5,
      temperature: 0,
    };
    const plain = await client.chatCompletions(req);
    expect(plain.choices[0]!.message.content).toBeTypeOf('string');
    expect(plain.usage.completion_tokens).toBe(5);
    let text = '';
    let finish: string | null | undefined;
    for await (const c of client.chatCompletionsStream(req)) {
      text += c.choices[0]?.delta.content ?? '';
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    expect(text).toBe(plain.choices[0]!.message.content);
    expect(finish).toBe('length');
  });

  it('text completions', async () => {
    const out = await client.completions({
      model: 'sim-model',
      prompt: 'Once upon',
      max_tokens: 4,
      temperature: 0,
    });
    expect(out.object).toBe('text_completion');
    expect(out.choices[0]!.finish_reason).toBe('length');
    expect(out.usage?.completion_tokens).toBe(4);
  });

  it('abort one rid and abort all end running streams', async () => {
    const long = (rid: string) =>
      (async () => {
        let last = '';
        for await (const c of client.generateStream({
          text: 'long',
          rid,
          sampling_params: { max_new_tokens: 100_000, ignore_eos: true },
        })) {
          last = c.meta_info.finish_reason?.type ?? last;
        }
        return last;
      })();
    const one = long('rid-one');
    await waitLoad(1);
    await client.abortRequest('rid-one');
    expect(await one).toBe('abort');
    const two = [long('rid-a'), long('rid-b')];
    await waitLoad(2);
    await client.abortAll();
    expect(await Promise.all(two)).toEqual(['abort', 'abort']);
  });

  it('breaking out of a stream closes it and the engine drops the request', async () => {
    let seen = 0;
    for await (const c of client.generateStream({
      text: 'cancel me',
      sampling_params: { max_new_tokens: 100_000, ignore_eos: true },
    })) {
      if (c.meta_info.id) seen++;
      if (seen === 2) break;
    }
    expect(seen).toBe(2);
    await waitFor(
      async () => (await client.load()).every((r) => r.num_reqs + r.num_waiting_reqs === 0),
      20_000,
      'the engine dropping the cancelled request',
    );
  });

  it('pause and continue generation', async () => {
    expect((await client.pauseGeneration('retract')).status).toBe('ok');
    expect((await client.continueGeneration()).status).toBe('ok');
  });

  it('flush_cache, release and resume memory by tag; generation fails while released', async () => {
    await client.flushCache({ deadlineMs: 10_000 });
    await client.releaseMemoryOccupation(['kv_cache']);
    const e = await failure(client.generate({ text: 'x', sampling_params: { max_new_tokens: 1 } }));
    expect(e.code).toBe('engine_http_error');
    await client.resumeMemoryOccupation(['kv_cache']);
    await client.releaseMemoryOccupation();
    await client.resumeMemoryOccupation(['weights']);
    await client.resumeMemoryOccupation(['kv_cache', 'cuda_graph']);
    expect((await client.generate({ text: 'x', sampling_params: { max_new_tokens: 1 } })).text).toBeTypeOf(
      'string',
    );
  });

  it('weight updates change the reported version and the output', async () => {
    const req = { text: 'weights matter', sampling_params: { max_new_tokens: 8, temperature: 0 } };
    const before = await client.generate(req);
    const disk = await client.updateWeightsFromDisk({ model_path: 'sim/tiny-model', weight_version: 'v2' });
    expect(disk.success).toBe(true);
    expect(await client.weightVersion()).toBe('v2');
    expect((await client.generate(req)).text).not.toBe(before.text);

    const init = await client.initWeightsUpdateGroup({
      master_address: '127.0.0.1',
      master_port: 29999,
      rank_offset: 1,
      world_size: 3,
      group_name: 'g1',
      backend: 'nccl',
    });
    expect(init.success).toBe(true);
    const dist = await client.updateWeightsFromDistributed({
      names: ['w'],
      dtypes: ['bfloat16'],
      shapes: [[2, 2]],
      group_name: 'g1',
      weight_version: 'v3',
      flush_cache: true,
    });
    expect(dist.success).toBe(true);
    expect(await client.weightVersion()).toBe('v3');
    expect((await client.destroyWeightsUpdateGroup({ group_name: 'g1' })).success).toBe(true);

    const ver = await client.updateWeightVersion({ new_version: 'v4' });
    expect(ver.success).toBe(true);
    expect(await client.weightVersion()).toBe('v4');
    expect((await client.modelInfo()).weight_version).toBe('v4');
  });
});

async function waitLoad(n: number): Promise<void> {
  await waitFor(
    async () => (await client.load()).reduce((s, r) => s + r.num_reqs + r.num_waiting_reqs, 0) >= n,
    20_000,
    `the engine having ${n} requests`,
  );
}
