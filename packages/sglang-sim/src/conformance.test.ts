import {
  ChatCompletionChunkSchema,
  ChatCompletionResponseSchema,
  CompletionChunkSchema,
  CompletionResponseSchema,
  FLUSH_CACHE_TEXT,
  GenerateBatchResponseSchema,
  GenerateResponseSchema,
  GenerateStreamChunkSchema,
  GetLoadResponseSchema,
  ModelCardSchema,
  ModelInfoSchema,
  ModelListSchema,
  OpenAIErrorSchema,
  routeOf,
  ServerInfoSchema,
  SGLANG_VERSIONS,
  SGLangErrorSchema,
  StatusMessageSchema,
  SuccessMessageSchema,
  surfaceOf,
  UpdateWeightsFromDiskResponseSchema,
  UpdateWeightVersionResponseSchema,
  V1LoadsSchema,
  ValidationErrorSchema,
} from '@uis/sglang-engine';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SIM_ROUTES } from './routes.ts';
import type { SimServer } from './server.ts';
import { sim } from './testing.ts';

/** What an endpoint answers: a JSON body of a schema, SSE events of a schema, plain text, a JSON null, nothing. */
type Answer = { json: z.ZodType } | { sse: z.ZodType } | { text: string } | { null: true } | { empty: true };

interface Row {
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  status: number;
  answer: Answer;
}

const sp = { max_new_tokens: 3, ignore_eos: true };
const chat = {
  model: 'tiny',
  messages: [{ role: 'user', content: 'hello' }],
  max_tokens: 3,
  ignore_eos: true,
};
const group = {
  master_address: '127.0.0.1',
  master_port: 29500,
  rank_offset: 1,
  world_size: 2,
  group_name: 'g',
};

/** Rows run in order against one engine: later rows rely on the state earlier rows leave (the weight group). */
const TABLE: Row[] = [
  { method: 'GET', path: '/health', status: 200, answer: { empty: true } },
  { method: 'GET', path: '/health_generate', status: 200, answer: { empty: true } },
  { method: 'GET', path: '/get_model_info', status: 200, answer: { json: ModelInfoSchema } },
  { method: 'GET', path: '/model_info', status: 200, answer: { json: ModelInfoSchema } },
  { method: 'GET', path: '/get_server_info', status: 200, answer: { json: ServerInfoSchema } },
  { method: 'GET', path: '/server_info', status: 200, answer: { json: ServerInfoSchema } },
  // 0.5.9 to 0.5.17 keep the route only to answer 404 naming /model_info (0.5.2's 200 is in the release tests).
  {
    method: 'GET',
    path: '/get_weight_version',
    status: 404,
    answer: { json: z.looseObject({ detail: z.string() }) },
  },
  { method: 'GET', path: '/get_load', status: 200, answer: { json: GetLoadResponseSchema } },
  { method: 'GET', path: '/v1/loads', status: 200, answer: { json: V1LoadsSchema } },
  { method: 'GET', path: '/v1/models', status: 200, answer: { json: ModelListSchema } },
  { method: 'GET', path: '/v1/models/tiny', status: 200, answer: { json: ModelCardSchema } },
  {
    method: 'POST',
    path: '/generate',
    body: { text: 'a', sampling_params: sp },
    status: 200,
    answer: { json: GenerateResponseSchema },
  },
  {
    method: 'POST',
    path: '/generate',
    body: {
      input_ids: [[70, 71], [72]],
      sampling_params: sp,
      return_logprob: true,
      logprob_start_len: 0,
      top_logprobs_num: 2,
    },
    status: 200,
    answer: { json: GenerateBatchResponseSchema },
  },
  {
    method: 'POST',
    path: '/generate',
    body: { text: 'a', sampling_params: sp, stream: true },
    status: 200,
    answer: { sse: GenerateStreamChunkSchema },
  },
  {
    method: 'POST',
    path: '/generate',
    body: { text: 'a', input_ids: [1] },
    status: 422,
    answer: { json: ValidationErrorSchema },
  },
  {
    method: 'POST',
    path: '/generate',
    body: { input_ids: [1_000_000] },
    status: 400,
    answer: { json: SGLangErrorSchema },
  },
  {
    method: 'POST',
    path: '/v1/chat/completions',
    body: chat,
    status: 200,
    answer: { json: ChatCompletionResponseSchema },
  },
  {
    method: 'POST',
    path: '/v1/chat/completions',
    body: { ...chat, stream: true },
    status: 200,
    answer: { sse: ChatCompletionChunkSchema },
  },
  {
    method: 'POST',
    path: '/v1/chat/completions',
    body: { model: 'tiny' },
    status: 400,
    answer: { json: OpenAIErrorSchema },
  },
  {
    method: 'POST',
    path: '/v1/completions',
    body: { model: 'tiny', prompt: 'a', max_tokens: 2 },
    status: 200,
    answer: { json: CompletionResponseSchema },
  },
  {
    method: 'POST',
    path: '/v1/completions',
    body: {
      model: 'tiny',
      prompt: 'a',
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    },
    status: 200,
    answer: { sse: CompletionChunkSchema },
  },
  { method: 'POST', path: '/flush_cache', status: 200, answer: { text: FLUSH_CACHE_TEXT } },
  { method: 'GET', path: '/flush_cache', status: 200, answer: { text: FLUSH_CACHE_TEXT } },
  { method: 'POST', path: '/abort_request', body: { rid: 'nobody' }, status: 200, answer: { empty: true } },
  { method: 'POST', path: '/abort_request', body: { abort_all: true }, status: 200, answer: { empty: true } },
  {
    method: 'POST',
    path: '/pause_generation',
    body: { mode: 'in_place' },
    status: 200,
    answer: { json: StatusMessageSchema },
  },
  { method: 'POST', path: '/continue_generation', status: 200, answer: { json: StatusMessageSchema } },
  {
    method: 'POST',
    path: '/release_memory_occupation',
    body: { tags: ['weights', 'kv_cache'] },
    status: 200,
    answer: { null: true },
  },
  {
    method: 'POST',
    path: '/generate',
    body: { text: 'a' },
    status: 400,
    answer: { json: SGLangErrorSchema },
  },
  {
    method: 'POST',
    path: '/resume_memory_occupation',
    body: { tags: ['weights', 'kv_cache'] },
    status: 200,
    answer: { null: true },
  },
  {
    method: 'POST',
    path: '/release_memory_occupation',
    body: { tags: ['bogus'] },
    status: 422,
    answer: { json: ValidationErrorSchema },
  },
  {
    method: 'POST',
    path: '/update_weights_from_disk',
    body: { model_path: '/ckpt/1', weight_version: 'v1' },
    status: 200,
    answer: { json: UpdateWeightsFromDiskResponseSchema },
  },
  {
    method: 'POST',
    path: '/init_weights_update_group',
    body: group,
    status: 200,
    answer: { json: SuccessMessageSchema },
  },
  {
    method: 'POST',
    path: '/init_weights_update_group',
    body: group,
    status: 400,
    answer: { json: SuccessMessageSchema },
  },
  {
    method: 'POST',
    path: '/update_weights_from_distributed',
    body: { names: ['w'], dtypes: ['bfloat16'], shapes: [[2]], group_name: 'g', weight_version: 'v2' },
    status: 200,
    answer: { json: SuccessMessageSchema },
  },
  {
    method: 'POST',
    path: '/update_weights_from_tensor',
    body: { serialized_named_tensors: ['AAAA'] },
    status: 200,
    answer: { json: SuccessMessageSchema },
  },
  {
    method: 'POST',
    path: '/destroy_weights_update_group',
    body: { group_name: 'g' },
    status: 200,
    answer: { json: SuccessMessageSchema },
  },
  {
    method: 'POST',
    path: '/update_weight_version',
    body: { new_version: 'v3' },
    status: 200,
    answer: { json: UpdateWeightVersionResponseSchema },
  },
];

let s: SimServer;
beforeAll(async () => {
  // 0.5.17 serves every row but /get_weight_version (a 404 there; 0.5.23 dropped /get_load too; see the release
  // tests below).
  s = await sim({ servedModelName: 'tiny', enableMemorySaver: true, simSglangVersion: '0.5.17' });
});
afterAll(async () => {
  await s.close();
});

describe('conformance: each endpoint answers the shape reference/sglang.md and protocol.ts describe', () => {
  it.each(TABLE.map((r, i) => [i, r.method, r.path, r.status, r] as const))(
    '#%i %s %s -> %i',
    async (_i, method, path, status, row) => {
      const res = await fetch(`${s.url}${path}`, {
        method,
        headers: row.body === undefined ? undefined : { 'content-type': 'application/json' },
        body: row.body === undefined ? undefined : JSON.stringify(row.body),
      });
      expect(res.status).toBe(status);
      const text = await res.text();
      const a = row.answer;
      if ('empty' in a) expect(text).toBe('');
      else if ('null' in a) expect(JSON.parse(text)).toBeNull();
      else if ('text' in a) {
        expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
        expect(text).toBe(a.text);
      } else if ('json' in a) {
        expect(res.headers.get('content-type')).toMatch(/^application\/json/);
        const parsed = a.json.safeParse(JSON.parse(text));
        expect(parsed.success, JSON.stringify(parsed.error)).toBe(true);
      } else {
        expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
        const events = text.split('\n\n').filter(Boolean);
        expect(events.at(-1)).toBe('data: [DONE]');
        expect(events.length).toBeGreaterThan(1);
        for (const e of events.slice(0, -1)) {
          expect(e.startsWith('data: ')).toBe(true);
          const parsed = a.sse.safeParse(JSON.parse(e.slice(6)));
          expect(parsed.success, JSON.stringify(parsed.error)).toBe(true);
        }
      }
    },
  );
});

describe("the simulator against SGLang's own routes (the committed surfaces)", () => {
  it('serves each route it claims with the methods every release that has it takes', () => {
    const wrong: string[] = [];
    for (const [methods, path] of SIM_ROUTES) {
      const having = SGLANG_VERSIONS.filter((v) => routeOf(surfaceOf(v)!, path) !== undefined);
      if (having.length === 0) wrong.push(`${path}: no supported release serves it`);
      for (const v of having) {
        const route = routeOf(surfaceOf(v)!, path);
        const theirs = [...(route?.methods ?? [])].sort().join(',');
        if (theirs !== methods) wrong.push(`${path}: the sim takes ${methods}, SGLang ${v} takes ${theirs}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it.each([
    [
      '0.5.2',
      ['/get_model_info', '/get_server_info', '/get_weight_version', '/get_load'],
      ['/model_info', '/server_info', '/v1/loads', '/destroy_weights_update_group'],
    ],
    ['0.5.10.post1', ['/model_info', '/server_info', '/get_load', '/v1/loads'], ['/get_weight_version']],
    [
      '0.5.23',
      ['/model_info', '/server_info', '/v1/loads', '/get_model_info'],
      ['/get_weight_version', '/get_load'],
    ],
  ] as const)('simulating %s, serves its routes and 404s the ones it lacks', async (version, has, lacks) => {
    const old = await sim({ simSglangVersion: version });
    try {
      for (const path of has) expect((await fetch(`${old.url}${path}`)).status, path).toBe(200);
      for (const path of lacks) expect((await fetch(`${old.url}${path}`)).status, path).toBe(404);
      const info = ServerInfoSchema.parse(await (await fetch(`${old.url}${has[1]}`)).json());
      expect(info.version).toBe(version);
    } finally {
      await old.close();
    }
  });
});
