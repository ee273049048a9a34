import { mix } from './hash.ts';
import { EOS_ID, WORD_BASE, WORDS } from './tokenizer.ts';

/**
 * The simulated language model: a pure function of (weights fingerprint, context, seed). The context is folded
 * into a 32-bit hash one token at a time, so extending a sequence costs O(1) per token.
 *
 * The logprob of token t after context c depends only on (c, t), never on the seed: scoring a prompt plus a
 * generated answer (max_new_tokens 0) gives back exactly the logprobs reported while generating it.
 */
export function initialContext(fingerprint: number): number {
  return mix(fingerprint, 0x9e3779b9);
}

export function extend(ctx: number, token: number): number {
  return mix(ctx, token + 1);
}

export function tokenLogprob(ctx: number, token: number): number {
  const h = mix(ctx ^ 0x5bd1e995, token);
  // Spread over (-4.05, -0.05]; rounded so JSON stays short and tests compare exactly.
  return -Math.round((0.05 + ((h >>> 8) / 0x1000000) * 4) * 1e4) / 1e4;
}

export interface Sampled {
  token: number;
  logprob: number;
}

/** Picks the next token. seedKey 0 is greedy decoding (temperature 0); EOS comes out about once in 64 tokens. */
export function sampleNext(ctx: number, seedKey: number, allowEos: boolean): Sampled {
  const r = mix(ctx, seedKey ^ 0x27d4eb2f);
  const token = allowEos && r >>> 26 === 0 ? EOS_ID : WORD_BASE + (r % WORDS.length);
  return { token, logprob: tokenLogprob(ctx, token) };
}

/** Other candidates for top-logprob lists: distinct word tokens with lower logprobs than the chosen one. */
export function alternatives(ctx: number, chosen: number, chosenLogprob: number, k: number): Sampled[] {
  const out: Sampled[] = [{ token: chosen, logprob: chosenLogprob }];
  let h = ctx;
  for (let i = 1; out.length < k && i < k * 4 + 8; i++) {
    h = mix(h, i);
    const token = WORD_BASE + (h % WORDS.length);
    if (out.some((s) => s.token === token)) continue;
    const prev = (out[out.length - 1] as Sampled).logprob;
    out.push({ token, logprob: Math.round((prev - 0.1 - ((h >>> 24) / 256) * 0.5) * 1e4) / 1e4 });
  }
  return out;
}
