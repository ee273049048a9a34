/** How a GenRM judge's text becomes a number. A parser returns null when the text holds no score: the batch then
 * fails whole with the reason instead of inventing a reward. */
export type ScoreParser = (text: string) => number | null;

/** Relax's judge parse (relax/engine/rewards/dapo_genrm + examples/generate_reward_model): strip, keep what follows
 * the last `Judgement:`, and score 1 if a `1` appears in its first 16 characters, else 0. Never null. */
export const judgementScore: ScoreParser = (text) => {
  let prediction = text.trim();
  const marker = 'Judgement:';
  if (prediction.includes(marker)) prediction = (prediction.split(marker).pop() ?? '').trim();
  return prediction.slice(0, 16).includes('1') ? 1 : 0;
};

const NUMBER = /[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?/g;

/** The last number in the text (`... so the score is 7.5` -> 7.5). */
export const lastNumberScore: ScoreParser = (text) => {
  const matches = text.match(NUMBER);
  const last = matches?.[matches.length - 1];
  if (last === undefined) return null;
  const n = Number(last);
  return Number.isFinite(n) ? n : null;
};

/** The content of the last `\boxed{...}` (balanced braces), read as a number. */
export const boxedScore: ScoreParser = (text) => {
  const start = text.lastIndexOf('\\boxed{');
  if (start < 0) return null;
  let depth = 0;
  let i = start + '\\boxed'.length;
  const open = i;
  for (; i < text.length; i++) {
    if (text[i] === '{') depth++;
    else if (text[i] === '}') {
      depth--;
      if (depth === 0) break;
    }
  }
  if (depth !== 0) return null;
  const inner = text.slice(open + 1, i).trim();
  if (!/^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/.test(inner)) return null;
  return Number(inner);
};

const VERDICT = /\b(yes|no|true|false|correct|incorrect)\b/gi;
const POSITIVE = new Set(['yes', 'true', 'correct']);

/** The judge's last verdict word: yes / true / correct -> 1, no / false / incorrect -> 0. */
export const verdictScore: ScoreParser = (text) => {
  const matches = text.match(VERDICT);
  const last = matches?.[matches.length - 1];
  if (last === undefined) return null;
  return POSITIVE.has(last.toLowerCase()) ? 1 : 0;
};

export const SCORE_PARSERS = {
  judgement: judgementScore,
  last_number: lastNumberScore,
  boxed: boxedScore,
  verdict: verdictScore,
} as const;
export type ScoreParserName = keyof typeof SCORE_PARSERS;
