import {
  GenerateResponseSchema,
  SuccessMessageSchema,
  UpdateWeightsFromDiskResponseSchema,
} from '@uis/sglang-engine';
import { waitFor } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import { type SimServer, startSimServer } from './server.ts';
import { get, post, simsPerTest } from './testing.ts';

const { start, track } = simsPerTest();
const probe = {
  text: 'probe',
  sampling_params: { max_new_tokens: 10, ignore_eos: true },
  return_logprob: true,
};
const answer = async (s: SimServer) =>
  GenerateResponseSchema.parse((await post(s.url, '/generate', probe)).json);
/** The weight version as model info reports it (the default release, 0.5.23, has no /get_weight_version). */
const version = async (s: SimServer) => ({
  weight_version: ((await get(s.url, '/model_info')).json as { weight_version: unknown }).weight_version,
});

describe('weight updates', () => {
  it('update_weights_from_disk changes the reported version, model path and the outputs', async () => {
    const s = await start();
    const before = await answer(s);
    const r = await post(s.url, '/update_weights_from_disk', {
      model_path: '/ckpt/step-10',
      weight_version: 'step-10',
    });
    expect(r.status).toBe(200);
    expect(UpdateWeightsFromDiskResponseSchema.parse(r.json)).toMatchObject({
      success: true,
      num_paused_requests: 0,
    });
    expect(await version(s)).toEqual({ weight_version: 'step-10' });
    expect((await get(s.url, '/get_model_info')).json).toMatchObject({
      model_path: '/ckpt/step-10',
      weight_version: 'step-10',
    });
    const after = await answer(s);
    expect(after.text).not.toBe(before.text);
    expect(after.meta_info.weight_version).toBe('step-10');
  });

  it('two engines given the same update produce the same outputs', async () => {
    const [a, b] = [await start(), await start()];
    for (const s of [a, b])
      await post(s.url, '/update_weights_from_disk', { model_path: '/ckpt/x', weight_version: 'v7' });
    expect((await answer(a)).text).toBe((await answer(b)).text);
  });

  it('distributed updates need an initialised group, and change version and outputs', async () => {
    const s = await start();
    const upd = {
      names: ['w'],
      dtypes: ['bfloat16'],
      shapes: [[4, 4]],
      group_name: 'g',
      weight_version: 'v2',
    };
    const missing = await post(s.url, '/update_weights_from_distributed', upd);
    expect(missing.status).toBe(400);
    expect(SuccessMessageSchema.parse(missing.json).success).toBe(false);
    const init = {
      master_address: '127.0.0.1',
      master_port: 29500,
      rank_offset: 1,
      world_size: 2,
      group_name: 'g',
      backend: 'nccl',
    };
    expect(
      SuccessMessageSchema.parse((await post(s.url, '/init_weights_update_group', init)).json).success,
    ).toBe(true);
    expect((await post(s.url, '/init_weights_update_group', init)).status).toBe(400);
    const before = await answer(s);
    const ok = await post(s.url, '/update_weights_from_distributed', upd);
    expect(ok.status).toBe(200);
    expect(await version(s)).toEqual({ weight_version: 'v2' });
    expect((await answer(s)).text).not.toBe(before.text);
    expect((await post(s.url, '/destroy_weights_update_group', { group_name: 'g' })).status).toBe(200);
    expect((await post(s.url, '/destroy_weights_update_group', { group_name: 'g' })).status).toBe(400);
    expect((await post(s.url, '/update_weights_from_distributed', { ...upd, dtypes: [] })).status).toBe(422);
  });

  it('update_weights_from_tensor as SGLang takes it: one base64 payload per TP rank, dp 1', async () => {
    const tp2 = await start({ tpSize: 2 });
    const ok = await post(tp2.url, '/update_weights_from_tensor', {
      serialized_named_tensors: ['cmFuazA=', 'cmFuazE='],
      weight_version: 't1',
    });
    expect(ok.status).toBe(200);
    expect(SuccessMessageSchema.parse(ok.json)).toMatchObject({ success: true });
    expect((await version(tp2)).weight_version).toBe('t1');
    // Rank 1 has no entry: it raises in the scheduler, which takes the server down.
    await post(tp2.url, '/update_weights_from_tensor', { serialized_named_tensors: ['cmFuazA='] }).catch(
      () => undefined,
    );
    expect(tp2.state().status).toBe('crashed');
    // Not base64: before 0.5.15 the scheduler's decode raises (the server dies); from 0.5.15 the HTTP layer
    // answers 422.
    const old = await start({ simSglangVersion: '0.5.10.post1' });
    await post(old.url, '/update_weights_from_tensor', { serialized_named_tensors: ['not base64!'] }).catch(
      () => undefined,
    );
    expect(old.state().status).toBe('crashed');
    const edge = await start({ simSglangVersion: '0.5.17' });
    const refused = await post(edge.url, '/update_weights_from_tensor', { serialized_named_tensors: ['x'] });
    expect(refused.status).toBe(422);
    expect(edge.state().status).toBe('ready');
    // The tokenizer manager asserts a single data-parallel rank: FastAPI's 500, the server lives on.
    const dp2 = await start({ dpSize: 2, simSglangVersion: '0.5.17' });
    expect(
      (await post(dp2.url, '/update_weights_from_tensor', { serialized_named_tensors: ['AAAA'] })).status,
    ).toBe(500);
    expect(dp2.state().status).toBe('ready');
  });

  it('an unversioned update still changes outputs; update_weight_version only relabels', async () => {
    const s = await start();
    const first = await answer(s);
    await post(s.url, '/update_weights_from_tensor', { serialized_named_tensors: ['eA=='] });
    const second = await answer(s);
    expect(second.text).not.toBe(first.text);
    const r = await post(s.url, '/update_weight_version', { new_version: 'v9' });
    expect(r.json).toEqual({ success: true, message: 'Weight version updated to v9', new_version: 'v9' });
    const third = await answer(s);
    expect(third.text).toBe(second.text);
    expect(third.meta_info.weight_version).toBe('v9');
  });

  it('abort_all_requests on an update aborts running requests', async () => {
    const s = await start({ simDecodeUsPerToken: 20_000 });
    const running = post(s.url, '/generate', {
      text: 'x',
      sampling_params: { max_new_tokens: 10_000, ignore_eos: true },
    });
    await waitFor(() => s.stats().running === 1);
    await post(s.url, '/update_weight_version', { new_version: 'v1', abort_all_requests: true });
    expect(GenerateResponseSchema.parse((await running).json).meta_info.finish_reason?.type).toBe('abort');
  });
});

describe('memory release / resume', () => {
  it('fails without --enable-memory-saver', async () => {
    const s = await start();
    const r = await post(s.url, '/release_memory_occupation', { tags: ['weights'] });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ error: { message: expect.stringContaining('--enable-memory-saver') } });
    expect((await post(s.url, '/resume_memory_occupation', {})).status).toBe(400);
  });

  it('releases by tag; generation fails while weights or KV are released; resume restores it', async () => {
    const s = await start({
      enableMemorySaver: true,
      enableWeightsCpuBackup: true,
      simOffloadMs: 20,
      simOnloadMs: 20,
    });
    const before = await answer(s);
    const rel = await post(s.url, '/release_memory_occupation', { tags: ['kv_cache'] });
    expect(rel.status).toBe(200);
    expect(rel.json).toBeNull();
    expect(s.state().memory).toEqual({ weights: 'resident', kv_cache: 'released', cuda_graph: 'resident' });
    const denied = await post(s.url, '/generate', probe);
    expect(denied.status).toBe(400);
    expect(denied.json).toMatchObject({ error: { message: expect.stringContaining('kv_cache') } });
    expect(
      (await post(s.url, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }] }))
        .status,
    ).toBe(400);
    expect((await get(s.url, '/health_generate')).status).toBe(503);
    expect((await get(s.url, '/health')).status).toBe(200);

    await post(s.url, '/release_memory_occupation', { tags: ['weights', 'cuda_graph'] });
    expect(s.state().memory).toEqual({ weights: 'released', kv_cache: 'released', cuda_graph: 'released' });
    const upd = await post(s.url, '/update_weights_from_disk', { model_path: 'm2' });
    expect(upd.status).toBe(400);
    expect(UpdateWeightsFromDiskResponseSchema.parse(upd.json).success).toBe(false);

    await post(s.url, '/resume_memory_occupation', { tags: ['weights'] });
    expect(s.state().memory.weights).toBe('resident');
    expect((await post(s.url, '/generate', probe)).status).toBe(400);
    await post(s.url, '/resume_memory_occupation', { tags: ['kv_cache', 'cuda_graph'] });
    expect((await answer(s)).text).toBe(before.text);
  });

  it.each([
    ['release', 'released', 'Cannot pause allocation that is not active'],
    ['resume', 'resident', "KeyError: 'weights'"],
  ])('a second %s of memory that is already %s kills the engine, as in SGLang', async (call, _state, why) => {
    const crashed: string[] = [];
    const s = track(
      await startSimServer(
        { host: '127.0.0.1', port: 0, enableMemorySaver: true },
        { onCrash: (reason) => crashed.push(reason) },
      ),
    );
    await s.ready;
    if (call === 'release') await post(s.url, '/release_memory_occupation', { tags: ['weights'] });
    const again = await post(s.url, `/${call}_memory_occupation`, { tags: ['weights'] });
    expect(again.status).toBe(500);
    expect(crashed).toEqual([expect.stringContaining(why)]);
    expect(s.state().status).toBe('crashed');
  });

  it('weights released without --enable-weights-cpu-backup come back wrong until the next weight update', async () => {
    const fresh = await start({ weightVersion: 'v1' });
    const s = await start({ enableMemorySaver: true, weightVersion: 'v1' });
    const before = await answer(s);
    await post(s.url, '/release_memory_occupation', { tags: ['weights'] });
    await post(s.url, '/resume_memory_occupation', { tags: ['weights'] });
    expect(s.state().weightsValid).toBe(false);
    expect((await answer(s)).text).not.toBe(before.text);
    for (const e of [s, fresh])
      await post(e.url, '/update_weights_from_disk', { model_path: '/ckpt/2', weight_version: 'v2' });
    expect(s.state().weightsValid).toBe(true);
    expect((await answer(s)).text).toBe((await answer(fresh)).text);
  });

  it('refuses to release while requests run', async () => {
    const s = await start({ enableMemorySaver: true, simDecodeUsPerToken: 20_000 });
    const running = post(s.url, '/generate', {
      text: 'x',
      sampling_params: { max_new_tokens: 10_000, ignore_eos: true },
    });
    await waitFor(() => s.stats().running === 1);
    expect((await post(s.url, '/release_memory_occupation', {})).status).toBe(400);
    await post(s.url, '/abort_request', { abort_all: true });
    await running;
  });

  it('rejects unknown tags', async () => {
    const s = await start({ enableMemorySaver: true });
    expect((await post(s.url, '/release_memory_occupation', { tags: ['gpu'] })).status).toBe(422);
  });
});
