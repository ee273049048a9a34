import { ChatCompletionRequestSchema, GenerateReqInputSchema } from '@uis/sglang-engine';
import {
  chatChunk,
  chatResponse,
  chatSampling,
  continuousUsage,
  openAIMetadata,
  renderChatTemplate,
  usageOf,
} from './chat.ts';
import { generateResponse, specFromSampling, specsFromGenerate } from './generate.ts';
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
import type { Handler, RouteContext } from './route-context.ts';
import { encode } from './tokenizer.ts';

/** `POST /generate`: one prompt or a batch, plain or streamed (SGLang's native API). */
export function generateHandler(ctx: RouteContext): Handler {
  const { engine, defaults, interval, body, gate, failure } = ctx;
  const generate: Handler = async (req, res) => {
    const input = await body(req, res, GenerateReqInputSchema);
    if (!input || !(await gate(res, false))) return;
    let seqs: SimSequence[];
    let batch: boolean;
    const stream = input.stream === true;
    let remaining = 0;
    const answer = (s: SimSequence, index?: number) =>
      generateResponse(
        s,
        engine.weightVersion,
        engine.now(),
        index,
        engine.versions.spans(s, engine.weightVersion),
      );
    const finish = () => {
      if (--remaining > 0) return;
      if (stream) sseDone(res);
      else {
        const out = seqs.map((s) => answer(s));
        sendJson(res, 200, batch ? out : out[0]);
      }
    };
    try {
      engine.assertCanGenerate();
      const parsed = specsFromGenerate(input, defaults);
      batch = parsed.batch;
      remaining = parsed.specs.length;
      for (const spec of parsed.specs) engine.check(spec);
      if (stream) startSse(res);
      seqs = [];
      parsed.specs.forEach((spec, i) => {
        const index = batch ? i : undefined;
        const onProgress = stream
          ? (s: SimSequence) => {
              if (s.outputIds.length % interval === 0) {
                sseData(res, generateResponse(s, engine.weightVersion, engine.now(), index));
              }
            }
          : () => {};
        const onDone = (s: SimSequence) => {
          if (stream) sseData(res, answer(s, index));
          finish();
        };
        seqs.push(engine.start(spec, onProgress, onDone));
      });
    } catch (e) {
      return failure(res, e, false);
    }
    res.on('close', () => {
      for (const s of seqs) engine.drop(s);
    });
  };
  return generate;
}

/** `POST /v1/chat/completions` as SGLang's OpenAI server answers it (n = 1), plain or streamed. */
export function chatHandler(ctx: RouteContext): Handler {
  const { engine, defaults, interval, created, gate, failure } = ctx;
  const chat: Handler = async (req, res) => {
    const r = await readBody(req, res, ChatCompletionRequestSchema, OPENAI_REFUSAL);
    if (r === undefined) return;
    if ((r.n ?? 1) !== 1) return sendOpenAIError(res, 400, 'The simulator supports n = 1 only.');
    if (!(await gate(res, true))) return;
    const wantLogprobs = r.logprobs === true;
    const top = r.top_logprobs ?? 0;
    const model = r.model;
    const ts = created();
    const prompt = renderChatTemplate(r.messages, r.chat_template_kwargs);
    let seq: SimSequence;
    try {
      engine.assertCanGenerate();
      const spec = specFromSampling(
        r.rid ?? `chatcmpl-${defaults.nextRid()}`,
        encode(prompt),
        chatSampling(r),
        {
          returnLogprob: wantLogprobs,
          topLogprobsNum: top,
        },
        defaults,
      );
      if (!r.stream) {
        seq = engine.start(
          spec,
          () => {},
          (s) => {
            const body = chatResponse(s, model, ts, wantLogprobs, top);
            body.metadata = openAIMetadata(
              engine.weightVersion,
              engine.versions.spans(s, engine.weightVersion),
            );
            sendJson(res, 200, body);
          },
        );
      } else {
        let sentChars = 0;
        let sentTokens = 0;
        const usage = continuousUsage(r, engine.options.simSglangVersion);
        const content = (s: SimSequence) =>
          chatChunk(
            s,
            model,
            ts,
            { content: s.text.slice(sentChars) },
            sentTokens,
            wantLogprobs,
            top,
            false,
            usage,
          );
        const push = (s: SimSequence) => {
          if (s.text.length <= sentChars || s.outputIds.length % interval !== 0) return;
          sseData(res, content(s));
          sentChars = s.text.length;
          sentTokens = s.outputIds.length;
        };
        startSse(res);
        seq = engine.start(spec, push, (s) => {
          if (s.text.length > sentChars) {
            sseData(res, content(s));
            sentChars = s.text.length;
          }
          const last = chatChunk(s, model, ts, {}, s.outputIds.length, false, 0, true, usage);
          sseData(res, last);
          if (r.stream_options?.include_usage) {
            sseData(res, {
              id: s.spec.rid,
              object: 'chat.completion.chunk',
              created: ts,
              model,
              choices: [],
              usage: usageOf(s),
            });
          }
          sseDone(res);
        });
        sseData(res, chatChunk(seq, model, ts, { role: 'assistant', content: '' }, 0, false, 0));
      }
    } catch (e) {
      return failure(res, e, true);
    }
    res.on('close', () => engine.drop(seq));
  };
  return chat;
}
