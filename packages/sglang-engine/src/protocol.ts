/**
 * The SGLang engine HTTP wire protocol as zod schemas (sgl-project/sglang `entrypoints/http_server.py`,
 * `managers/io_struct.py`, `entrypoints/openai/protocol.py`). Request and response objects are loose
 * (`z.looseObject`): SGLang adds fields often, and a client must not break on a field it does not know.
 */
import { z } from 'zod';

// ---------------------------------------------------------------------------------------------------------------
// /generate

/** One or a batch: SGLang accepts the scalar for a single request and a list for a batch. */
const oneOrMany = <T extends z.ZodType>(item: T) => z.union([item, z.array(item)]);

export const SamplingParamsSchema = z.looseObject({
  max_new_tokens: z.number().int().nonnegative().nullish(),
  min_new_tokens: z.number().int().nonnegative().nullish(),
  temperature: z.number().nonnegative().nullish(),
  top_p: z.number().nullish(),
  top_k: z.number().int().nullish(),
  min_p: z.number().nullish(),
  frequency_penalty: z.number().nullish(),
  presence_penalty: z.number().nullish(),
  repetition_penalty: z.number().nullish(),
  stop: z.union([z.string(), z.array(z.string())]).nullish(),
  stop_token_ids: z.array(z.number().int()).nullish(),
  ignore_eos: z.boolean().nullish(),
  skip_special_tokens: z.boolean().nullish(),
  spaces_between_special_tokens: z.boolean().nullish(),
  no_stop_trim: z.boolean().nullish(),
  n: z.number().int().positive().nullish(),
  json_schema: z.string().nullish(),
  regex: z.string().nullish(),
  ebnf: z.string().nullish(),
  sampling_seed: z.number().int().nullish(),
  custom_params: z.record(z.string(), z.unknown()).nullish(),
});
export type SamplingParams = z.infer<typeof SamplingParamsSchema>;

const TokenIds = z.array(z.number().int().nonnegative());

export const GenerateReqInputSchema = z
  .looseObject({
    text: oneOrMany(z.string()).nullish(),
    input_ids: z.union([TokenIds, z.array(TokenIds)]).nullish(),
    /** Pre-computed embeddings instead of tokens (multimodal / soft prompts). */
    input_embeds: z.array(z.unknown()).nullish(),
    sampling_params: oneOrMany(SamplingParamsSchema).nullish(),
    rid: oneOrMany(z.string()).nullish(),
    return_logprob: oneOrMany(z.boolean()).nullish(),
    /** -1 (default) = logprobs of output tokens only; k >= 0 = input logprobs from prompt position k. */
    logprob_start_len: oneOrMany(z.number().int()).nullish(),
    top_logprobs_num: oneOrMany(z.number().int().nonnegative()).nullish(),
    token_ids_logprob: z.union([TokenIds, z.array(TokenIds)]).nullish(),
    return_text_in_logprobs: z.boolean().nullish(),
    stream: z.boolean().nullish(),
    lora_path: oneOrMany(z.string().nullable()).nullish(),
    priority: z.number().int().nullish(),
    custom_logit_processor: oneOrMany(z.string().nullable()).nullish(),
    return_hidden_states: oneOrMany(z.boolean()).nullish(),
    // PD disaggregation: the router adds these so prefill and decode engines can pair up.
    bootstrap_host: oneOrMany(z.string().nullable()).nullish(),
    bootstrap_port: oneOrMany(z.number().int().nullable()).nullish(),
    bootstrap_room: oneOrMany(z.number().int().nullable()).nullish(),
    data_parallel_rank: z.number().int().nullish(),
    routed_dp_rank: z.number().int().nullish(),
  })
  .refine((r) => [r.text, r.input_ids, r.input_embeds].filter((x) => x != null).length === 1, {
    message: 'exactly one of text, input_ids or input_embeds must be given',
    path: ['text'],
  });
export type GenerateReqInput = z.infer<typeof GenerateReqInputSchema>;

/** How a sequence ended: a stop token / string, the length limit, or an abort. */
export const FinishReasonSchema = z.discriminatedUnion('type', [
  z.looseObject({
    type: z.literal('stop'),
    matched: z.union([z.string(), z.number().int()]).nullish(),
  }),
  z.looseObject({ type: z.literal('length'), length: z.number().int().nonnegative() }),
  z.looseObject({
    type: z.literal('abort'),
    message: z.string().nullish(),
    status_code: z.number().int().nullish(),
    err_type: z.string().nullish(),
  }),
]);
export type FinishReason = z.infer<typeof FinishReasonSchema>;

/** `[logprob, token_id, text | null]`; text is filled when `return_text_in_logprobs` is set. The first input
 * token has no logprob (null). */
export const TokenLogprobSchema = z.tuple([z.number().nullable(), z.number().int(), z.string().nullable()]);
export type TokenLogprob = z.infer<typeof TokenLogprobSchema>;
const TopLogprobs = z.array(z.array(TokenLogprobSchema).nullable());

/** Output tokens `[start, end)` of an answer were produced by weight `version` (SGLang >= 0.5.19's
 * `add_weight_versions_to_meta_info`; a request that ran across weight updates has one span per version). */
export const WeightVersionSpanSchema = z.looseObject({
  version: z.string(),
  start: z.number().int().nonnegative(),
  end: z.number().int().nonnegative(),
});
export type WeightVersionSpan = z.infer<typeof WeightVersionSpanSchema>;

export const GenerateMetaInfoSchema = z.looseObject({
  id: z.string(),
  /** null while a streamed sequence is still running. */
  finish_reason: FinishReasonSchema.nullable(),
  prompt_tokens: z.number().int().nonnegative(),
  completion_tokens: z.number().int().nonnegative(),
  cached_tokens: z.number().int().nonnegative(),
  e2e_latency: z.number().optional(),
  weight_version: z.string().nullish(),
  /** Set on a finished answer by releases that report it (see WeightVersionSpanSchema). */
  weight_versions: z.array(WeightVersionSpanSchema).optional(),
  input_token_logprobs: z.array(TokenLogprobSchema).optional(),
  output_token_logprobs: z.array(TokenLogprobSchema).optional(),
  input_top_logprobs: TopLogprobs.optional(),
  output_top_logprobs: TopLogprobs.optional(),
  input_token_ids_logprobs: TopLogprobs.optional(),
  output_token_ids_logprobs: TopLogprobs.optional(),
});
export type GenerateMetaInfo = z.infer<typeof GenerateMetaInfoSchema>;

export const GenerateResponseSchema = z.looseObject({
  text: z.string(),
  output_ids: z.array(z.number().int()).optional(),
  meta_info: GenerateMetaInfoSchema,
});
export type GenerateResponse = z.infer<typeof GenerateResponseSchema>;

/** A batch input (list of texts or of token id lists) gives a list of answers, in input order. */
export const GenerateBatchResponseSchema = z.array(GenerateResponseSchema);
export type GenerateBatchResponse = z.infer<typeof GenerateBatchResponseSchema>;

/** One `data:` event of a streamed /generate; `text` is cumulative, `output_ids` too. */
export const GenerateStreamChunkSchema = GenerateResponseSchema.extend({
  index: z.number().int().optional(),
});
export type GenerateStreamChunk = z.infer<typeof GenerateStreamChunkSchema>;

/** The error shape SGLang uses for 4xx answers and for a failure in the middle of a stream. */
export const SGLangErrorSchema = z.looseObject({
  error: z.looseObject({
    message: z.string(),
    type: z.string().optional(),
    code: z.union([z.string(), z.number()]).optional(),
    param: z.string().nullish(),
  }),
});
export type SGLangError = z.infer<typeof SGLangErrorSchema>;

/** FastAPI's 422 answer when a body does not match the endpoint's request model. */
export const ValidationErrorSchema = z.looseObject({
  detail: z.array(
    z.looseObject({ type: z.string(), loc: z.array(z.union([z.string(), z.number()])), msg: z.string() }),
  ),
});
export type ValidationError = z.infer<typeof ValidationErrorSchema>;

/** OpenAI-style error body of the /v1 endpoints. */
export const OpenAIErrorSchema = z.looseObject({
  object: z.literal('error').optional(),
  message: z.string(),
  type: z.string(),
  param: z.string().nullish(),
  code: z.number().int(),
});
export type OpenAIError = z.infer<typeof OpenAIErrorSchema>;

export const SSE_DONE = '[DONE]';

// ---------------------------------------------------------------------------------------------------------------
// OpenAI-compatible /v1/chat/completions, /v1/completions, /v1/models

const ChatContentPart = z.looseObject({ type: z.string(), text: z.string().optional() });

export const ChatMessageSchema = z.looseObject({
  role: z.enum(['system', 'user', 'assistant', 'tool', 'developer']),
  content: z.union([z.string(), z.array(ChatContentPart)]).nullish(),
  name: z.string().optional(),
  tool_call_id: z.string().optional(),
  tool_calls: z.array(z.unknown()).nullish(),
  reasoning_content: z.string().nullish(),
});
export type ChatMessage = z.infer<typeof ChatMessageSchema>;

/** Sampling fields shared by chat and completions, with SGLang's extras. */
const OpenAISamplingFields = {
  model: z.string(),
  max_tokens: z.number().int().nonnegative().nullish(),
  temperature: z.number().nonnegative().nullish(),
  top_p: z.number().nullish(),
  n: z.number().int().positive().nullish(),
  stop: z.union([z.string(), z.array(z.string())]).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z
    .looseObject({ include_usage: z.boolean().nullish(), continuous_usage_stats: z.boolean().nullish() })
    .nullish(),
  seed: z.number().int().nullish(),
  logprobs: z.union([z.boolean(), z.number().int()]).nullish(),
  frequency_penalty: z.number().nullish(),
  presence_penalty: z.number().nullish(),
  user: z.string().nullish(),
  // SGLang extras
  top_k: z.number().int().nullish(),
  min_p: z.number().nullish(),
  min_tokens: z.number().int().nullish(),
  regex: z.string().nullish(),
  ebnf: z.string().nullish(),
  repetition_penalty: z.number().nullish(),
  stop_token_ids: z.array(z.number().int()).nullish(),
  no_stop_trim: z.boolean().nullish(),
  ignore_eos: z.boolean().nullish(),
  skip_special_tokens: z.boolean().nullish(),
  lora_path: z.string().nullish(),
  rid: z.string().nullish(),
  priority: z.number().int().nullish(),
  bootstrap_host: z.string().nullish(),
  bootstrap_port: z.number().int().nullish(),
  bootstrap_room: z.number().int().nullish(),
};

export const ChatCompletionRequestSchema = z.looseObject({
  ...OpenAISamplingFields,
  messages: z.array(ChatMessageSchema).min(1),
  // Chat only: no SGLang release's CompletionRequest has these two (its `logprobs` is a count).
  max_completion_tokens: z.number().int().nonnegative().nullish(),
  top_logprobs: z.number().int().nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  separate_reasoning: z.boolean().nullish(),
  continue_final_message: z.boolean().nullish(),
  tools: z.array(z.unknown()).nullish(),
  tool_choice: z.unknown().optional(),
  response_format: z.unknown().optional(),
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

export const UsageSchema = z.looseObject({
  prompt_tokens: z.number().int().nonnegative(),
  completion_tokens: z.number().int().nonnegative(),
  total_tokens: z.number().int().nonnegative(),
  prompt_tokens_details: z.looseObject({ cached_tokens: z.number().int() }).nullish(),
});
export type Usage = z.infer<typeof UsageSchema>;

/** OpenAI finish reasons plus SGLang's `abort`. */
export const OpenAIFinishReasonSchema = z.enum(['stop', 'length', 'tool_calls', 'content_filter', 'abort']);

/** The fields every OpenAI answer object (a completion or one streamed chunk of it) starts with. */
const openAIObject = <const T extends string>(object: T) => ({
  id: z.string(),
  object: z.literal(object),
  created: z.number().int(),
  model: z.string(),
});

/** SGLang's extension: the stop string or token id that ended the choice. */
const MatchedStop = z.union([z.string(), z.number().int()]).nullish();

const ChatLogprobContent = z.looseObject({
  token: z.string(),
  logprob: z.number(),
  bytes: z.array(z.number().int()).nullish(),
  top_logprobs: z.array(z.looseObject({ token: z.string(), logprob: z.number() })).optional(),
});
const ChatLogprobs = z.looseObject({ content: z.array(ChatLogprobContent).nullish() });

export const ChatCompletionResponseSchema = z.looseObject({
  ...openAIObject('chat.completion'),
  choices: z.array(
    z.looseObject({
      index: z.number().int(),
      message: z.looseObject({
        role: z.literal('assistant'),
        content: z.string().nullable(),
        reasoning_content: z.string().nullish(),
        tool_calls: z.array(z.unknown()).nullish(),
      }),
      logprobs: ChatLogprobs.nullish(),
      finish_reason: OpenAIFinishReasonSchema.nullable(),
      matched_stop: MatchedStop,
    }),
  ),
  usage: UsageSchema,
  metadata: z.record(z.string(), z.unknown()).nullish(),
});
export type ChatCompletionResponse = z.infer<typeof ChatCompletionResponseSchema>;

export const ChatCompletionChunkSchema = z.looseObject({
  ...openAIObject('chat.completion.chunk'),
  choices: z.array(
    z.looseObject({
      index: z.number().int(),
      delta: z.looseObject({
        role: z.literal('assistant').nullish(),
        content: z.string().nullish(),
        reasoning_content: z.string().nullish(),
        tool_calls: z.array(z.unknown()).nullish(),
      }),
      logprobs: ChatLogprobs.nullish(),
      finish_reason: OpenAIFinishReasonSchema.nullish(),
      matched_stop: MatchedStop,
    }),
  ),
  usage: UsageSchema.nullish(),
});
export type ChatCompletionChunk = z.infer<typeof ChatCompletionChunkSchema>;

export const CompletionRequestSchema = z.looseObject({
  ...OpenAISamplingFields,
  prompt: z.union([z.string(), z.array(z.string()), TokenIds, z.array(TokenIds)]),
  echo: z.boolean().nullish(),
  suffix: z.string().nullish(),
});
export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;

const CompletionChoice = z.looseObject({
  index: z.number().int(),
  text: z.string(),
  logprobs: z.unknown().nullish(),
  finish_reason: OpenAIFinishReasonSchema.nullable(),
});

export const CompletionResponseSchema = z.looseObject({
  ...openAIObject('text_completion'),
  choices: z.array(CompletionChoice.extend({ matched_stop: MatchedStop })),
  usage: UsageSchema.nullish(),
});
export type CompletionResponse = z.infer<typeof CompletionResponseSchema>;

/** One event of a streamed `/v1/completions`: the text since the last chunk; the last chunk carries the finish
 * reason, a usage-only chunk (no choices) follows with `stream_options.include_usage`. */
export const CompletionChunkSchema = z.looseObject({
  ...openAIObject('text_completion'),
  choices: z.array(CompletionChoice),
  usage: UsageSchema.nullish(),
});
export type CompletionChunk = z.infer<typeof CompletionChunkSchema>;

export const ModelCardSchema = z.looseObject({
  id: z.string(),
  object: z.literal('model'),
  created: z.number().int(),
  owned_by: z.string(),
  root: z.string().nullish(),
  max_model_len: z.number().int().nullish(),
});
export type ModelCard = z.infer<typeof ModelCardSchema>;

export const ModelListSchema = z.looseObject({
  object: z.literal('list'),
  data: z.array(ModelCardSchema),
});
export type ModelList = z.infer<typeof ModelListSchema>;

// ---------------------------------------------------------------------------------------------------------------
// Info and load

/** GET /get_model_info (newer: /model_info). */
export const ModelInfoSchema = z.looseObject({
  model_path: z.string(),
  tokenizer_path: z.string().nullish(),
  is_generation: z.boolean(),
  preferred_sampling_params: z.unknown().optional(),
  weight_version: z.string().nullish(),
});
export type ModelInfo = z.infer<typeof ModelInfoSchema>;

/** GET /get_server_info (newer: /server_info): every server arg, scheduler info, per-DP internal states, version. */
export const ServerInfoSchema = z.looseObject({
  model_path: z.string(),
  served_model_name: z.string().nullish(),
  host: z.string().optional(),
  port: z.number().int().optional(),
  tp_size: z.number().int().positive(),
  pp_size: z.number().int().positive().optional(),
  dp_size: z.number().int().positive().optional(),
  ep_size: z.number().int().positive().optional(),
  nnodes: z.number().int().positive().optional(),
  node_rank: z.number().int().nonnegative().optional(),
  base_gpu_id: z.number().int().nonnegative().optional(),
  gpu_id_step: z.number().int().positive().optional(),
  enable_memory_saver: z.boolean().optional(),
  disaggregation_mode: z.string().optional(),
  weight_version: z.string().nullish(),
  max_total_num_tokens: z.number().int().optional(),
  max_running_requests: z.number().int().nullish(),
  internal_states: z.array(z.record(z.string(), z.unknown())).optional(),
  version: z.string(),
});
export type ServerInfo = z.infer<typeof ServerInfoSchema>;

export const WeightVersionSchema = z.looseObject({ weight_version: z.string().nullable() });
export type WeightVersion = z.infer<typeof WeightVersionSchema>;

/** GET /get_load: one entry per DP rank (some builds report `dp_rank: null` without DP attention). */
export const LoadEntrySchema = z.looseObject({
  dp_rank: z.number().int().nonnegative().nullable(),
  num_reqs: z.number().int().nonnegative(),
  num_waiting_reqs: z.number().int().nonnegative(),
  num_tokens: z.number().int().nonnegative(),
});
export const GetLoadResponseSchema = z.array(LoadEntrySchema);
export type LoadEntry = z.infer<typeof LoadEntrySchema>;

/** /get_load of engines before 0.5.6: one number, the KV tokens in use plus the waiting prompts' tokens
 * (0.5.2 `tokenizer_communicator_mixin.get_load`). */
export const LoadTotalSchema = z.looseObject({ load: z.number().nonnegative() });

/** GET /v1/loads (0.5.9+; the only load endpoint from 0.5.23): per-DP-rank snapshots. 0.5.9's and 0.5.10's
 * entries (GetLoadsReqOutput) have no num_total_tokens; num_used_tokens is in every release's. */
export const V1LoadsSchema = z.looseObject({
  loads: z.array(
    z.looseObject({
      dp_rank: z.number().int().nonnegative(),
      num_running_reqs: z.number().int().nonnegative(),
      num_waiting_reqs: z.number().int().nonnegative(),
      num_used_tokens: z.number().int().nonnegative(),
      num_total_tokens: z.number().int().nonnegative().optional(),
    }),
  ),
});

export * from './protocol-control.ts';
