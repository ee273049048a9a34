import { type InferenceModelSpec, UisError, zodError } from '@uis/spec';
import { z } from 'zod';

/** Relax's GenRM request: a judge conversation plus optional sampling overrides. `model` / `route_key` pick a
 * GenRM model when the role serves several; `chat_template_kwargs` (e.g. `enable_thinking`) merge over the
 * model's. */
export const GenrmMessagesRequestSchema = z.looseObject({
  messages: z
    .array(
      z.looseObject({
        role: z.string().min(1),
        content: z.union([z.string(), z.array(z.unknown())]),
      }),
    )
    .min(1),
  sampling_params: z.record(z.string(), z.unknown()).nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  model: z.string().min(1).optional(),
  route_key: z.string().min(1).optional(),
});
export type GenrmMessagesRequest = z.infer<typeof GenrmMessagesRequestSchema>;

/** Relax's GenRM defaults; the model's `sampling_defaults` override them, then the request's `sampling_params`. */
export const GENRM_SAMPLING_DEFAULTS = Object.freeze({
  temperature: 0.2,
  top_p: 1.0,
  top_k: -1,
  max_new_tokens: 1024,
});

/** Python's truthiness, as Relax tests `stream`: `0`, `""`, `[]`, `{}`, `null` and `false` do not stream. */
function pythonTruthy(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === 'object' && value !== null) return Object.keys(value).length > 0;
  return Boolean(value);
}

/** Relax's GenRM input rules: a bad conversation (`messages`, `sampling_params`) is a 422, as Relax's FastAPI model
 * answers; a body that is no object, or mixes `messages` with raw generation (`text`, `input_ids`) or with
 * streaming, is a 400, as Relax's gateway answers (checked after the conversation, in Relax's order). */
export function parseGenrmRequest(json: unknown): GenrmMessagesRequest | UisError {
  const r = GenrmMessagesRequestSchema.safeParse(json);
  if (!r.success) {
    const conversation = r.error.issues.some(
      (i) => i.path[0] === 'messages' || i.path[0] === 'sampling_params',
    );
    return zodError(r.error, 'body', conversation ? 'invalid_genrm_messages' : 'invalid_body');
  }
  const raw = ['text', 'input_ids'].find((key) => Object.hasOwn(r.data, key));
  const mixed = raw ?? (pythonTruthy(r.data.stream) ? 'stream' : undefined);
  if (mixed !== undefined) {
    return new UisError({
      code: 'invalid_body',
      path: `body.${mixed}`,
      message: `GenRM "messages" cannot be mixed with ${mixed === 'stream' ? 'streaming' : `raw generation ("${mixed}")`}: send a conversation alone, or call /generate without "messages"`,
    });
  }
  return r.data;
}

/**
 * The engine request for one GenRM call. Decision: the adapter calls the engine's OpenAI chat completions, so the
 * engine renders its own chat template (with `chat_template_kwargs`) exactly as SGLang does for every other chat
 * caller, instead of the gateway tokenizing with a copy of the template; SGLang's `max_new_tokens` is spelt
 * `max_tokens` there, and the other sampling fields (top_k, min_p, stop, ...) pass as SGLang extensions.
 */
export function genrmChatBody(
  req: GenrmMessagesRequest,
  model: Pick<InferenceModelSpec, 'sampling_defaults' | 'chat_template_kwargs'>,
  servedName: string,
): Record<string, unknown> {
  const sampling: Record<string, unknown> = {
    ...GENRM_SAMPLING_DEFAULTS,
    ...model.sampling_defaults,
    ...(req.sampling_params ?? {}),
  };
  // Relax's sampling config spells the budget `max_response_len`; keep accepting it.
  if (sampling.max_response_len !== undefined && req.sampling_params?.max_new_tokens === undefined) {
    sampling.max_new_tokens = sampling.max_response_len;
  }
  delete sampling.max_response_len;
  const { max_new_tokens, chat_template_kwargs: fromSampling, ...rest } = sampling;
  const kwargs = {
    ...model.chat_template_kwargs,
    ...(typeof fromSampling === 'object' && fromSampling !== null ? (fromSampling as object) : {}),
    ...(req.chat_template_kwargs ?? {}),
  };
  return {
    ...rest,
    model: servedName,
    messages: req.messages,
    ...(max_new_tokens === undefined ? {} : { max_tokens: max_new_tokens }),
    ...(Object.keys(kwargs).length > 0 ? { chat_template_kwargs: kwargs } : {}),
    stream: false,
  };
}

const ChatAnswerSchema = z.looseObject({
  choices: z.array(z.looseObject({ message: z.looseObject({ content: z.string().nullish() }) })).min(1),
});

/** The engine's chat answer -> Relax's `{"response": "<text>"}` with the text stripped. */
export function genrmResponse(answer: unknown): { response: string } | UisError {
  const r = ChatAnswerSchema.safeParse(answer);
  if (!r.success)
    return new UisError({
      code: 'engine_bad_answer',
      message: 'the GenRM engine answered without choices[0].message',
    });
  return { response: (r.data.choices[0]?.message.content ?? '').trim() };
}
