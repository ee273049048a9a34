import type {
  GenerateReqInput,
  GenerateResponse,
  SamplingParams,
  WeightVersionSpan,
} from '@uis/sglang-engine';
import { SimFailure } from './engine.ts';
import { hashString } from './hash.ts';
import type { SequenceSpec, SimSequence } from './request.ts';
import { encode, isValidTokenId } from './tokenizer.ts';

/** SGLang's default when sampling_params.max_new_tokens is absent. */
export const DEFAULT_MAX_NEW_TOKENS = 128;

export interface Defaults {
  seed: number;
  dpSize: number;
  nextRid: () => string;
}

const pick = <T>(v: T | T[] | null | undefined, i: number): T | undefined =>
  Array.isArray(v) ? v[i] : (v ?? undefined);

/** Sample `sample` of a parallel-sampling request (n > 1); sample 0 is what n = 1 gives. */
export function seedKeyOf(params: SamplingParams | undefined, seed: number, sample = 0): number {
  if ((params?.temperature ?? 1) === 0) return 0;
  const s = params?.sampling_seed ?? seed;
  return hashString(sample === 0 ? `seed:${s}` : `seed:${s}:${sample}`) || 1;
}

export function specFromSampling(
  rid: string,
  inputIds: number[],
  params: SamplingParams | undefined,
  extra: Partial<SequenceSpec>,
  defaults: Pick<Defaults, 'seed'>,
): SequenceSpec {
  const stop = params?.stop;
  return {
    rid,
    inputIds,
    maxNewTokens: params?.max_new_tokens ?? DEFAULT_MAX_NEW_TOKENS,
    minNewTokens: params?.min_new_tokens ?? 0,
    stop: stop == null ? [] : Array.isArray(stop) ? stop : [stop],
    stopTokenIds: params?.stop_token_ids ?? [],
    ignoreEos: params?.ignore_eos ?? false,
    noStopTrim: params?.no_stop_trim ?? false,
    seedKey: seedKeyOf(params, defaults.seed),
    returnLogprob: false,
    logprobStartLen: -1,
    topLogprobsNum: 0,
    tokenIdsLogprob: [],
    returnTextInLogprobs: false,
    dpRank: 0,
    ...extra,
  };
}

/** token_ids_logprob is one list for a single request, or one list per item of a batch. */
function tokenIdsFor(v: number[] | number[][] | null | undefined, i: number, batch: boolean): number[] {
  if (v == null || v.length === 0) return [];
  const nested = Array.isArray(v[0]);
  const ids = nested ? ((v as number[][])[batch ? i : 0] ?? []) : (v as number[]);
  return ids.filter(isValidTokenId);
}

/** Splits a /generate body into one spec per sequence; `batch` says whether the answer is a list. */
export function specsFromGenerate(
  req: GenerateReqInput,
  defaults: Defaults,
): { batch: boolean; specs: SequenceSpec[] } {
  let inputs: number[][];
  let batch: boolean;
  if (req.input_embeds != null)
    throw new SimFailure('The simulator does not support input_embeds; send text or input_ids.');
  if (req.text != null) {
    batch = Array.isArray(req.text);
    inputs = (Array.isArray(req.text) ? req.text : [req.text]).map(encode);
  } else {
    const ids = req.input_ids ?? [];
    batch = ids.length > 0 && Array.isArray(ids[0]);
    inputs = batch ? (ids as number[][]) : [ids as number[]];
  }
  if (inputs.length === 0) throw new SimFailure('The batch is empty.');
  const specs = inputs.map((inputIds, i) => {
    if (inputIds.length === 0) throw new SimFailure(`The input of item ${i} is empty.`);
    const bad = inputIds.findIndex((id) => !isValidTokenId(id));
    if (bad !== -1) throw new SimFailure(`input_ids[${bad}] = ${inputIds[bad]} is outside the vocabulary.`);
    const ridIn = pick(req.rid, i);
    const dp = req.routed_dp_rank ?? req.data_parallel_rank;
    return specFromSampling(
      ridIn ?? defaults.nextRid(),
      inputIds,
      pick(req.sampling_params, i),
      {
        returnLogprob: pick(req.return_logprob, i) ?? false,
        logprobStartLen: pick(req.logprob_start_len, i) ?? -1,
        topLogprobsNum: pick(req.top_logprobs_num, i) ?? 0,
        tokenIdsLogprob: tokenIdsFor(req.token_ids_logprob, i, batch),
        returnTextInLogprobs: req.return_text_in_logprobs ?? false,
        dpRank: dp ?? hashString(ridIn ?? String(i)) % defaults.dpSize,
      },
      defaults,
    );
  });
  // Parallel sampling: n answers per prompt, grouped by prompt, as a list (like a batch).
  const expanded: SequenceSpec[] = [];
  for (const [i, spec] of specs.entries()) {
    const params = pick(req.sampling_params, i);
    const n = params?.n ?? 1;
    if (n === 1) expanded.push(spec);
    else {
      for (let k = 0; k < n; k++) {
        expanded.push({ ...spec, rid: `${spec.rid}-${k}`, seedKey: seedKeyOf(params, defaults.seed, k) });
      }
    }
  }
  return { batch: batch || expanded.length > specs.length, specs: expanded };
}

/** The /generate answer (or stream chunk) for a sequence in its current state. `spans`: a finished answer's
 * weight versions (releases that report them): SGLang then declares the last span's version as the answer's. */
export function generateResponse(
  s: SimSequence,
  weightVersion: string,
  now: number,
  index?: number,
  spans?: WeightVersionSpan[],
): GenerateResponse {
  const meta: GenerateResponse['meta_info'] = {
    id: s.spec.rid,
    finish_reason: s.finishReason,
    prompt_tokens: s.spec.inputIds.length,
    completion_tokens: s.outputIds.length,
    cached_tokens: s.cachedTokens,
    weight_version: weightVersion,
    e2e_latency: (now - s.createdAt) / 1000,
  };
  if (spans !== undefined) {
    meta.weight_versions = spans;
    meta.weight_version = spans[spans.length - 1]?.version ?? weightVersion;
  }
  if (s.spec.returnLogprob) {
    meta.input_token_logprobs = s.inputTokenLogprobs();
    meta.output_token_logprobs = s.outputTokenLogprobs();
    if (s.spec.tokenIdsLogprob.length > 0) {
      meta.input_token_ids_logprobs = s.inputTokenIdsLogprobs();
      meta.output_token_ids_logprobs = s.outputTokenIdsLogprobs();
    }
    if (s.spec.topLogprobsNum > 0) {
      meta.input_top_logprobs = s.inputTopLogprobs();
      meta.output_top_logprobs = s.outputTopLogprobs();
    }
  }
  const out: GenerateResponse = { text: s.text, output_ids: s.outputIds.slice(), meta_info: meta };
  if (index !== undefined) (out as GenerateResponse & { index: number }).index = index;
  return out;
}
