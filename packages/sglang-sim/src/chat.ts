import {
  type ChatCompletionChunk,
  type ChatCompletionRequest,
  type ChatCompletionResponse,
  type ChatMessage,
  type FinishReason,
  featuresOf,
  type SamplingParams,
  type WeightVersionSpan,
} from '@uis/sglang-engine';
import type { SimSequence } from './request.ts';
import { tokenText } from './tokenizer.ts';

/** An OpenAI answer's `metadata` (build_endpoint_weight_version_metadata): the answer's weight version, and the
 * spans of a release that reports them (the version is then the last span's, as in meta_info). */
export function openAIMetadata(
  engineVersion: string,
  spans: WeightVersionSpan[] | undefined,
): { weight_version: string; weight_versions?: WeightVersionSpan[] } {
  if (spans === undefined) return { weight_version: engineVersion };
  return { weight_version: spans[spans.length - 1]?.version ?? engineVersion, weight_versions: spans };
}

function contentText(m: ChatMessage): string {
  if (m.content == null) return '';
  if (typeof m.content === 'string') return m.content;
  return m.content.map((p) => p.text ?? '').join('');
}

/**
 * The simulator's chat template (deterministic, ChatML-like):
 * `<|im_start|>{role}\n{content}<|im_end|>\n` per message, then `<|im_start|>assistant\n`. chat_template_kwargs
 * are honoured: `enable_thinking: false` appends an empty think block (as Qwen3's template does) and any other
 * kwargs are rendered sorted into a leading `<|kwargs|>` line, so they visibly change the prompt.
 */
export function renderChatTemplate(
  messages: readonly ChatMessage[],
  kwargs?: Record<string, unknown> | null,
): string {
  let out = '';
  const rest = Object.entries(kwargs ?? {})
    .filter(([k]) => k !== 'enable_thinking')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (rest.length > 0) out += `<|kwargs|>${rest.map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(',')}\n`;
  for (const m of messages) out += `<|im_start|>${m.role}\n${contentText(m)}<|im_end|>\n`;
  out += '<|im_start|>assistant\n';
  if (kwargs?.enable_thinking === false) out += '<think>\n\n</think>\n\n';
  return out;
}

export function chatSampling(req: ChatCompletionRequest): SamplingParams {
  return {
    max_new_tokens: req.max_completion_tokens ?? req.max_tokens ?? undefined,
    min_new_tokens: req.min_tokens ?? undefined,
    temperature: req.temperature ?? undefined,
    stop: req.stop ?? undefined,
    stop_token_ids: req.stop_token_ids ?? undefined,
    ignore_eos: req.ignore_eos ?? undefined,
    no_stop_trim: req.no_stop_trim ?? undefined,
    sampling_seed: req.seed ?? undefined,
  };
}

export function openAIFinish(f: FinishReason | null): {
  finish_reason: 'stop' | 'length' | 'abort' | null;
  matched_stop: string | number | null;
} {
  if (f === null) return { finish_reason: null, matched_stop: null };
  if (f.type === 'stop') return { finish_reason: 'stop', matched_stop: f.matched ?? null };
  return { finish_reason: f.type, matched_stop: null };
}

function chatLogprobs(s: SimSequence, from: number, top: number) {
  const tops = top > 0 ? s.outputTopLogprobs() : [];
  const content = [];
  for (let i = from; i < s.outputIds.length; i++) {
    const id = s.outputIds[i] as number;
    const token = tokenText(id);
    content.push({
      token,
      logprob: s.outputLogprobs[i] as number,
      bytes: [...Buffer.from(token)],
      top_logprobs: (tops[i] ?? []).map((t) => ({ token: tokenText(t[1]), logprob: t[0] as number })),
    });
  }
  return { content };
}

/** Whether a stream's chunks carry the usage so far: `stream_options.continuous_usage_stats`, on a release that
 * has it (SGLang >= 0.5.6; older ones ignore the field). */
export function continuousUsage(
  r: Pick<ChatCompletionRequest, 'stream_options'>,
  release: string | undefined,
) {
  return r.stream_options?.continuous_usage_stats === true && release !== undefined
    ? (featuresOf(release)?.continuousUsageStats ?? false)
    : false;
}

export function usageOf(s: SimSequence) {
  return {
    prompt_tokens: s.spec.inputIds.length,
    completion_tokens: s.outputIds.length,
    total_tokens: s.spec.inputIds.length + s.outputIds.length,
    prompt_tokens_details: { cached_tokens: s.cachedTokens },
  };
}

export function chatResponse(
  s: SimSequence,
  model: string,
  created: number,
  wantLogprobs: boolean,
  top: number,
): ChatCompletionResponse {
  return {
    id: s.spec.rid,
    object: 'chat.completion',
    created,
    model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: s.text, reasoning_content: null, tool_calls: null },
        logprobs: wantLogprobs ? chatLogprobs(s, 0, top) : null,
        ...openAIFinish(s.finishReason),
      },
    ],
    usage: usageOf(s),
    metadata: { weight_version: null },
  };
}

/** A streamed delta: the text and logprobs produced since the previous chunk. */
export function chatChunk(
  s: SimSequence,
  model: string,
  created: number,
  delta: ChatCompletionChunk['choices'][number]['delta'],
  fromToken: number,
  wantLogprobs: boolean,
  top: number,
  final = false,
  continuous = false,
): ChatCompletionChunk {
  const fin = final ? openAIFinish(s.finishReason) : { finish_reason: null, matched_stop: null };
  return {
    id: s.spec.rid,
    object: 'chat.completion.chunk',
    created,
    model,
    choices: [
      {
        index: 0,
        delta,
        logprobs: wantLogprobs && s.outputIds.length > fromToken ? chatLogprobs(s, fromToken, top) : null,
        ...fin,
      },
    ],
    usage: continuous ? usageOf(s) : null,
  };
}
