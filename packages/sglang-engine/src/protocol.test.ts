import { describe, expect, it } from 'vitest';
import {
  AbortRequestSchema,
  FinishReasonSchema,
  GenerateReqInputSchema,
  GenerateResponseSchema,
  GetLoadResponseSchema,
  MemoryOccupationRequestSchema,
  UpdateWeightsFromDistributedRequestSchema,
} from './protocol.ts';

describe('GenerateReqInputSchema', () => {
  it.each([
    ['single text', { text: 'hi', sampling_params: { max_new_tokens: 4 } }],
    ['batch text', { text: ['a', 'b'], sampling_params: [{ temperature: 0 }, { temperature: 1 }] }],
    ['single ids', { input_ids: [1, 2, 3], return_logprob: true, logprob_start_len: 0 }],
    ['batch ids', { input_ids: [[1], [2, 3]], rid: ['x', 'y'] }],
    ['embeddings', { input_embeds: [[0.1, 0.2]] }],
    [
      'PD fields',
      { text: 'x', bootstrap_host: 'h', bootstrap_port: 8998, bootstrap_room: 7, routed_dp_rank: 1 },
    ],
  ])('accepts %s', (_, body) => {
    expect(GenerateReqInputSchema.safeParse(body).success).toBe(true);
  });

  it('keeps unknown fields (SGLang adds fields often)', () => {
    const parsed = GenerateReqInputSchema.parse({ text: 'x', future_field: 3 });
    expect((parsed as Record<string, unknown>).future_field).toBe(3);
  });

  it.each([
    ['neither text nor ids', {}],
    ['both text and ids', { text: 'x', input_ids: [1] }],
    ['ids and embeddings', { input_ids: [1], input_embeds: [[0.1]] }],
    ['negative max_new_tokens', { text: 'x', sampling_params: { max_new_tokens: -1 } }],
    ['token id not an int', { input_ids: [1.5] }],
  ])('rejects %s', (_, body) => {
    expect(GenerateReqInputSchema.safeParse(body).success).toBe(false);
  });
});

describe('responses', () => {
  it('parses a generate answer with logprobs', () => {
    const body = {
      text: ' b',
      output_ids: [5],
      meta_info: {
        id: 'r1',
        finish_reason: { type: 'length', length: 1 },
        prompt_tokens: 2,
        completion_tokens: 1,
        cached_tokens: 0,
        input_token_logprobs: [
          [null, 1, null],
          [-0.5, 2, 'a'],
        ],
        output_token_logprobs: [[-1.25, 5, ' b']],
        weight_version: 'v1',
      },
    };
    expect(GenerateResponseSchema.parse(body).meta_info.output_token_logprobs?.[0]?.[1]).toBe(5);
    const bad = { ...body, meta_info: { ...body.meta_info, output_token_logprobs: [[-1, 'x', null]] } };
    expect(GenerateResponseSchema.safeParse(bad).success).toBe(false);
  });

  it.each([
    [{ type: 'stop', matched: 2 }, true],
    [{ type: 'stop', matched: '\n' }, true],
    [{ type: 'length', length: 8 }, true],
    [{ type: 'abort', message: 'Abort before prefill' }, true],
    [{ type: 'length' }, false],
    [{ type: 'other' }, false],
  ])('finish reason %j -> %s', (value, ok) => {
    expect(FinishReasonSchema.safeParse(value).success).toBe(ok);
  });
});

describe('load', () => {
  it('accepts dp_rank null (builds without DP attention) and rejects negative counts', () => {
    const row = { dp_rank: null, num_reqs: 1, num_waiting_reqs: 0, num_tokens: 12, rid: null };
    expect(GetLoadResponseSchema.safeParse([row]).success).toBe(true);
    expect(GetLoadResponseSchema.safeParse([{ ...row, num_reqs: -1 }]).success).toBe(false);
  });
});

describe('control requests', () => {
  it('abort needs a rid or abort_all', () => {
    expect(AbortRequestSchema.safeParse({ rid: 'a' }).success).toBe(true);
    expect(AbortRequestSchema.safeParse({ abort_all: true }).success).toBe(true);
    expect(AbortRequestSchema.safeParse({}).success).toBe(false);
  });

  it('memory tags are weights | kv_cache | cuda_graph, null = all', () => {
    expect(MemoryOccupationRequestSchema.safeParse({ tags: ['weights', 'kv_cache'] }).success).toBe(true);
    expect(MemoryOccupationRequestSchema.safeParse({ tags: null }).success).toBe(true);
    expect(MemoryOccupationRequestSchema.safeParse({ tags: ['gpu'] }).success).toBe(false);
  });

  it('distributed update needs names, dtypes and shapes of one length', () => {
    const ok = { names: ['w'], dtypes: ['bfloat16'], shapes: [[2, 2]] };
    expect(UpdateWeightsFromDistributedRequestSchema.safeParse(ok).success).toBe(true);
    expect(UpdateWeightsFromDistributedRequestSchema.safeParse({ ...ok, dtypes: [] }).success).toBe(false);
  });
});
