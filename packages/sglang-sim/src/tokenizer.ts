/**
 * The simulator's tiny tokenizer: ids 0-2 are special (`<pad>`, `<s>`, `</s>` = EOS), ids 3-258 are the 256 bytes
 * of UTF-8, ids from 259 on are a fixed list of words, each with its leading space (" the"). Encoding takes a
 * known " word" whole and falls back to bytes for everything else, so every string round-trips. The model only
 * ever emits word tokens and EOS, so generated text is readable and decodes token by token.
 */
export const PAD_ID = 0;
export const BOS_ID = 1;
export const EOS_ID = 2;
const BYTE_BASE = 3;
export const WORD_BASE = BYTE_BASE + 256;

export const WORDS = [
  'the',
  'a',
  'model',
  'engine',
  'token',
  'reward',
  'policy',
  'gradient',
  'value',
  'batch',
  'cat',
  'dog',
  'river',
  'stone',
  'light',
  'shadow',
  'green',
  'blue',
  'red',
  'quick',
  'slow',
  'bright',
  'quiet',
  'loud',
  'runs',
  'jumps',
  'sees',
  'makes',
  'takes',
  'gives',
  'and',
  'or',
  'but',
  'if',
  'then',
  'so',
  'because',
  'while',
  'of',
  'to',
  'in',
  'on',
  'with',
  'from',
  'over',
  'under',
  'one',
  'two',
  'three',
  'four',
  'answer',
  'is',
  'was',
  'will',
  'yes',
  'no',
  'maybe',
  'true',
  'false',
  'step',
  'north',
  'south',
  'east',
  'west',
] as const;
export const VOCAB_SIZE = WORD_BASE + WORDS.length;

const SPECIAL = ['<pad>', '<s>', '</s>'];
const wordIds = new Map<string, number>(WORDS.map((w, i) => [w, WORD_BASE + i]));
const WORD_RE = / ([a-z]+)/y;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encode(text: string): number[] {
  const ids: number[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 32) {
      WORD_RE.lastIndex = i;
      const m = WORD_RE.exec(text);
      const id = m ? wordIds.get(m[1] as string) : undefined;
      if (m && id !== undefined) {
        ids.push(id);
        i += m[0].length;
        continue;
      }
    }
    if (c < 0x80) {
      ids.push(BYTE_BASE + c);
      i++;
      continue;
    }
    const cp = text.codePointAt(i) as number;
    const ch = String.fromCodePoint(cp);
    for (const b of encoder.encode(ch)) ids.push(BYTE_BASE + b);
    i += ch.length;
  }
  return ids;
}

/** The text of one token, as SGLang puts it in logprob triples (a lone non-ASCII byte shows as `<0xNN>`). */
export function tokenText(id: number): string {
  if (id >= WORD_BASE) return ` ${WORDS[id - WORD_BASE] ?? '<unk>'}`;
  if (id >= BYTE_BASE) {
    const b = id - BYTE_BASE;
    return b < 0x80 ? String.fromCharCode(b) : `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`;
  }
  return SPECIAL[id] ?? '<unk>';
}

export function decode(ids: readonly number[], skipSpecialTokens = true): string {
  let out = '';
  let bytes: number[] = [];
  const flush = () => {
    if (bytes.length > 0) out += decoder.decode(Uint8Array.from(bytes));
    bytes = [];
  };
  for (const id of ids) {
    if (id >= BYTE_BASE && id < WORD_BASE) {
      bytes.push(id - BYTE_BASE);
      continue;
    }
    flush();
    if (id >= WORD_BASE) out += tokenText(id);
    else if (!skipSpecialTokens) out += tokenText(id);
  }
  flush();
  return out;
}

export function isValidTokenId(id: number): boolean {
  return Number.isInteger(id) && id >= 0 && id < VOCAB_SIZE;
}
