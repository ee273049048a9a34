import type { IncomingMessage, ServerResponse } from 'node:http';
import { CompletionRequestSchema } from '@uis/sglang-engine';
import { chatSampling, continuousUsage, openAIFinish, openAIMetadata, usageOf } from './chat.ts';
import type { SimEngine } from './engine.ts';
import { type Defaults, specFromSampling } from './generate.ts';
import {
  OPENAI_REFUSAL,
  readBody,
  sendJson,
  sendOpenAIError,
  sseData,
  sseDone,
  startSse,
} from './http-util.ts';
import type { SimSequence } from './request.ts';
import { encode } from './tokenizer.ts';

/** What the completions route borrows from the head handler. */
export interface CompletionsContext {
  engine: SimEngine;
  defaults: Defaults;
  /** SGLang's --stream-interval: one chunk every N tokens (and always the last one). */
  interval: number;
  created: () => number;
  /** Admission: false when it already answered (engine not ready, injected fault). */
  gate: (res: ServerResponse, openai: boolean) => Promise<boolean>;
  failure: (res: ServerResponse, e: unknown, openai: boolean) => void;
}

/** `POST /v1/completions` as SGLang's OpenAI server answers it: one prompt (text or token ids), plain or streamed
 * (`text_completion` chunks, a last chunk with `finish_reason`, a usage chunk with `stream_options.include_usage`,
 * then `[DONE]`). */
export function completionsHandler(ctx: CompletionsContext) {
  const { engine, defaults, interval } = ctx;
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const r = await readBody(req, res, CompletionRequestSchema, OPENAI_REFUSAL);
    if (r === undefined) return;
    if (typeof r.prompt !== 'string' && typeof r.prompt[0] !== 'number') {
      return sendOpenAIError(res, 400, 'The simulator accepts one prompt (a string or a list of token ids).');
    }
    if (!(await ctx.gate(res, true))) return;
    const ids = typeof r.prompt === 'string' ? encode(r.prompt) : (r.prompt as number[]);
    const echo = r.echo && typeof r.prompt === 'string' ? r.prompt : '';
    const ts = ctx.created();
    const usage = continuousUsage(r, engine.options.simSglangVersion);
    const chunk = (s: SimSequence, text: string, last: boolean) => ({
      id: s.spec.rid,
      object: 'text_completion',
      created: ts,
      model: r.model,
      choices: [
        {
          index: 0,
          text,
          logprobs: null,
          ...(last ? openAIFinish(s.finishReason) : { finish_reason: null, matched_stop: null }),
        },
      ],
      usage: usage ? usageOf(s) : null,
    });
    let seq: SimSequence;
    try {
      engine.assertCanGenerate();
      const sp = chatSampling({ ...r, messages: [{ role: 'user', content: '' }] });
      const spec = specFromSampling(r.rid ?? `cmpl-${defaults.nextRid()}`, ids, sp, {}, defaults);
      if (!r.stream) {
        seq = engine.start(
          spec,
          () => {},
          (s) =>
            sendJson(res, 200, {
              ...chunk(s, echo + s.text, true),
              usage: usageOf(s),
              metadata: openAIMetadata(engine.weightVersion, engine.versions.spans(s, engine.weightVersion)),
            }),
        );
      } else {
        let sent = 0;
        // An echoed prompt leads the first chunk.
        let prefix = echo;
        const text = (s: SimSequence) => {
          const out = prefix + s.text.slice(sent);
          prefix = '';
          sent = s.text.length;
          return out;
        };
        startSse(res);
        const push = (s: SimSequence) => {
          if (s.text.length <= sent || s.outputIds.length % interval !== 0) return;
          sseData(res, chunk(s, text(s), false));
        };
        seq = engine.start(spec, push, (s) => {
          sseData(res, chunk(s, text(s), true));
          if (r.stream_options?.include_usage)
            sseData(res, {
              id: s.spec.rid,
              object: 'text_completion',
              created: ts,
              model: r.model,
              choices: [],
              usage: usageOf(s),
            });
          sseDone(res);
        });
      }
    } catch (e) {
      return ctx.failure(res, e, true);
    }
    res.on('close', () => engine.drop(seq));
  };
}
