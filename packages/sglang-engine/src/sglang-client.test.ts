/**
 * Conformance of the engine client against each supported SGLang release: every call uis makes goes to a
 * stand-in server built from that release's committed surface (its routes and methods, its request classes'
 * fields, the fields its answers carry). A call to a route the release lacks must be the client's documented
 * fallback (answered 404, then the other name) or a feature the release's table says it lacks; a body field the
 * release would not read, or an answer field our schema requires that the release does not produce, fails here.
 */
import { isUisError } from '@uis/spec';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SGLangClient } from './client.ts';
import { SGLangEngine } from './engine.ts';
import {
  AbortRequestSchema,
  ChatCompletionRequestSchema,
  CompletionRequestSchema,
  DestroyWeightsUpdateGroupRequestSchema,
  GenerateReqInputSchema,
  InitWeightsUpdateGroupRequestSchema,
  MemoryOccupationRequestSchema,
  PauseGenerationRequestSchema,
  type PauseMode,
  UpdateWeightsFromDiskRequestSchema,
  UpdateWeightsFromDistributedRequestSchema,
  UpdateWeightsFromTensorRequestSchema,
  UpdateWeightVersionRequestSchema,
} from './protocol.ts';
import { sglangFeatures } from './sglang-features.ts';
import { classFields, hasRoute, SGLANG_VERSIONS, surfaceOf } from './sglang-surface.ts';
import { type SurfaceServer, startSurfaceServer } from './surface-server.fixture.ts';

/** The client's fallbacks: first name -> the name it tries after a 404. */
const FALLBACKS: Record<string, string> = {
  '/model_info': '/get_model_info',
  '/server_info': '/get_server_info',
  '/get_weight_version': '/model_info',
  '/get_load': '/v1/loads',
};

let server: SurfaceServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function drain<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

for (const version of SGLANG_VERSIONS) {
  describe(`engine client against SGLang ${version}`, () => {
    const surface = surfaceOf(version)!;
    const features = sglangFeatures(surface);

    it('generation, info and load calls reach routes the release has (or their fallback) and parse its answers', async () => {
      server = await startSurfaceServer(surface);
      const c = new SGLangClient(server.url);
      const gen = { text: 'a', sampling_params: { max_new_tokens: 1, temperature: 0 }, rid: 'r1' };
      expect((await c.generate(gen)).text).toBe('hi');
      expect(await c.generateBatch({ ...gen, text: ['a', 'b'], rid: undefined })).toHaveLength(2);
      expect(await drain(c.generateStream(gen))).toHaveLength(1);
      const chat = { model: 'm', messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 1 };
      expect((await c.chatCompletions(chat)).choices[0]?.message.content).toBe('hi');
      expect(await drain(c.chatCompletionsStream(chat))).toHaveLength(1);
      expect((await c.completions({ model: 'm', prompt: 'a', max_tokens: 1 })).choices[0]?.text).toBe('hi');
      expect((await c.models()).data[0]?.id).toBe('m');
      expect(await c.health()).toBe(true);
      expect(await c.healthGenerate()).toBe(true);
      expect((await c.modelInfo()).model_path).toBe('/models/m');
      expect((await c.serverInfo()).version).toBe(version);
      expect(await c.weightVersion()).toBe('v1');
      const load = await c.load();
      expect(load.reduce((n, r) => n + r.num_reqs, 0)).toBeGreaterThan(0);
      expect(await c.flushCacheOnce()).toBe(true);
      await c.close();
      expect(server.missingFields).toEqual([]);
      expect(server.unknownFields).toEqual([]);
      expectOnlyFallbacks(server);
    }, 60_000);

    it('control and weight calls as the engine makes them: bodies the release reads, or refused by its features', async () => {
      server = await startSurfaceServer(surface);
      const e = new SGLangEngine({ engineId: 'm/0', baseUrl: server.url, pollMs: 1 });
      expect(await e.detectSGLangVersion()).toBe(version);
      await e.client.abortRequest('r1');
      await e.client.abortAll();
      for (const mode of ['abort', 'retract', 'in_place'] satisfies PauseMode[]) {
        if (!features.pauseModes.includes(mode)) continue;
        await e.drain({ policy: mode, deadlineMs: 1000 });
        await e.resumeGeneration();
      }
      await e.sleep(features.memoryTags.length > 0 ? ['kv_cache'] : undefined);
      await e.wake(features.memoryTags.length > 0 ? ['kv_cache'] : undefined);
      await e.sleep();
      await e.wake();
      await e.updateWeights({ source: 'disk', modelPath: '/models/m2', weightVersion: 'v2' });
      await e.initWeightsUpdateGroup({
        master_address: '127.0.0.1',
        master_port: 29500,
        rank_offset: 1,
        world_size: 2,
        group_name: 'g',
        backend: 'nccl',
      });
      await e.updateWeights({
        source: 'distributed',
        weightVersion: 'v3',
        names: ['w'],
        dtypes: ['bfloat16'],
        shapes: [[2, 2]],
        groupName: 'g',
      });
      await e.updateWeights({ source: 'version', weightVersion: 'v4' });
      const destroyed = await e.destroyWeightsUpdateGroup({ group_name: 'g' }).then(
        () => 'ok',
        (err: unknown) => (isUisError(err) ? err.code : String(err)),
      );
      expect(destroyed).toBe(features.destroyWeightsUpdateGroup ? 'ok' : 'sglang_feature_unsupported');
      await e.shutdown();
      expect(server.missingFields).toEqual([]);
      // 0.5.2's pause takes no body: it pauses and aborts (the abort mode), and reads no `mode`.
      const ignored = pausedWithoutBody(surface)
        ? ['POST /pause_generation: mode (the route reads no body)']
        : [];
      expect([...new Set(server.unknownFields)]).toEqual(ignored);
      expectOnlyFallbacks(server);
    }, 60_000);
  });
}

function pausedWithoutBody(surface: NonNullable<ReturnType<typeof surfaceOf>>): boolean {
  return surface.routes.some((r) => r.path === '/pause_generation' && r.body === undefined);
}

/** Every call the release answered 404 was retried under the name the client falls back to, and that name
 * exists there; no call got a 405 (a method the release does not take). */
function expectOnlyFallbacks(s: SurfaceServer): void {
  expect(s.calls.filter((c) => c.status === 405)).toEqual([]);
  const missed = [...new Set(s.calls.filter((c) => c.status === 404).map((c) => c.path))];
  for (const path of missed) {
    const next = FALLBACKS[path];
    expect(next, `${path} answered 404 and the client has no fallback for it`).toBeDefined();
    expect(
      s.calls.some((c) => c.path === next && c.status === 200),
      `${path} answered 404 and its fallback ${next} was not answered`,
    ).toBe(true);
  }
}

describe('the fallbacks the client documents are needed and exist', () => {
  it('each first name is missing in some supported release, and its fallback is there whenever it is missing', () => {
    for (const [first, next] of Object.entries(FALLBACKS)) {
      const without = SGLANG_VERSIONS.filter((v) => !hasRoute(surfaceOf(v)!, 'GET', first));
      expect(without.length, `${first} is in every release: its fallback is dead code`).toBeGreaterThan(0);
      for (const v of without) expect(hasRoute(surfaceOf(v)!, 'GET', next), `${next} on ${v}`).toBe(true);
    }
  });
});

/** Our request schemas against SGLang's request classes: a field our schema names that a release's class lacks
 * is passed on by the client and ignored by that release. Each such gap is listed here with the releases it
 * holds for, so a new one (our misreading, or SGLang dropping a field) fails. */
const REQUEST_SCHEMAS: Array<[string, z.ZodType, string]> = [
  ['GenerateReqInputSchema', GenerateReqInputSchema, 'GenerateReqInput'],
  ['ChatCompletionRequestSchema', ChatCompletionRequestSchema, 'ChatCompletionRequest'],
  ['CompletionRequestSchema', CompletionRequestSchema, 'CompletionRequest'],
  ['UpdateWeightsFromDiskRequestSchema', UpdateWeightsFromDiskRequestSchema, 'UpdateWeightFromDiskReqInput'],
  [
    'InitWeightsUpdateGroupRequestSchema',
    InitWeightsUpdateGroupRequestSchema,
    'InitWeightsUpdateGroupReqInput',
  ],
  [
    'UpdateWeightsFromDistributedRequestSchema',
    UpdateWeightsFromDistributedRequestSchema,
    'UpdateWeightsFromDistributedReqInput',
  ],
  [
    'UpdateWeightsFromTensorRequestSchema',
    UpdateWeightsFromTensorRequestSchema,
    'UpdateWeightsFromTensorReqInput',
  ],
  ['UpdateWeightVersionRequestSchema', UpdateWeightVersionRequestSchema, 'UpdateWeightVersionReqInput'],
  ['AbortRequestSchema', AbortRequestSchema, 'AbortReq'],
  ['MemoryOccupationRequestSchema', MemoryOccupationRequestSchema, 'ReleaseMemoryOccupationReqInput'],
  ['PauseGenerationRequestSchema', PauseGenerationRequestSchema, 'PauseGenerationReqInput'],
  [
    'DestroyWeightsUpdateGroupRequestSchema',
    DestroyWeightsUpdateGroupRequestSchema,
    'DestroyWeightsUpdateGroupReqInput',
  ],
];

const KNOWN_FIELD_GAPS: Record<string, string[]> = {
  // Renamed: data_parallel_rank -> routed_dp_rank in 0.5.10; 0.5.23 takes both again.
  'GenerateReqInputSchema.routed_dp_rank': ['0.5.2', '0.5.6.post2', '0.5.9'],
  'GenerateReqInputSchema.data_parallel_rank': ['0.5.15.post1', '0.5.17'],
  'ChatCompletionRequestSchema.priority': ['0.5.2'],
  'CompletionRequestSchema.priority': ['0.5.2'],
  'UpdateWeightsFromDistributedRequestSchema.load_format': ['0.5.2'],
  // 0.5.2's pause takes no body; destroy_weights_update_group came in 0.5.6 (see the features table).
  'PauseGenerationRequestSchema.*': ['0.5.2'],
  'DestroyWeightsUpdateGroupRequestSchema.*': ['0.5.2'],
};

/** The object shape under a schema's refinements. */
function keysOf(schema: z.ZodType): string[] {
  let s: unknown = schema;
  while (s instanceof z.ZodPipe) s = s.in;
  return s instanceof z.ZodObject ? Object.keys(s.shape) : [];
}

describe('our request schemas name only fields SGLang reads', () => {
  it('every field, in every supported release, but the gaps listed', () => {
    const gaps: Record<string, string[]> = {};
    for (const [name, schema, cls] of REQUEST_SCHEMAS) {
      const keys = keysOf(schema);
      expect(keys.length, name).toBeGreaterThan(0);
      for (const v of SGLANG_VERSIONS) {
        const fields = classFields(surfaceOf(v)!, cls);
        const missing = fields === undefined ? ['*'] : keys.filter((k) => !fields.includes(k));
        for (const k of missing) gaps[`${name}.${k}`] = [...(gaps[`${name}.${k}`] ?? []), v];
      }
    }
    expect(gaps).toEqual(KNOWN_FIELD_GAPS);
  });
});

describe('an engine refuses what its SGLang release cannot do, before calling it', () => {
  it('0.5.2: no retract or in_place pause, no destroy group; a cuda_graph tag it does not know is left out', async () => {
    server = await startSurfaceServer(surfaceOf('0.5.2')!);
    const e = new SGLangEngine({ engineId: 'judge/0', baseUrl: server.url, pollMs: 1 });
    expect(e.sglangVersion).toBeUndefined();
    expect(await e.detectSGLangVersion()).toBe('0.5.2');
    const refusal = await e.drain({ policy: 'in_place', deadlineMs: 1000 }).catch((err: unknown) => err);
    expect(isUisError(refusal) && refusal.code).toBe('sglang_feature_unsupported');
    expect((refusal as Error).message).toBe(
      'judge/0 runs SGLang 0.5.2, which cannot pause generation in mode in_place; supported releases that can: 0.5.6.post2, 0.5.9, 0.5.10.post1, 0.5.12, 0.5.15.post1, 0.5.17, 0.5.23',
    );
    const before = server.calls.length;
    await e.sleep(['kv_cache', 'cuda_graph']);
    const release = server.calls.slice(before).find((c) => c.path === '/release_memory_occupation');
    expect(release?.body).toEqual({ tags: ['kv_cache'] });
    await e.wake(['cuda_graph']);
    expect(server.calls.some((c, i) => i > before && c.path === '/resume_memory_occupation')).toBe(false);
    await e.shutdown();
  }, 60_000);
});
