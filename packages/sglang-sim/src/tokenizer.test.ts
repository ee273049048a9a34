import { describe, expect, it } from 'vitest';
import { decode, EOS_ID, encode, tokenText, VOCAB_SIZE, WORD_BASE } from './tokenizer.ts';

describe('tokenizer', () => {
  it.each(['', 'hello', ' the cat runs', 'Grüße 🌍 — ok', '  two  spaces', ' thesis', 'line\nbreak'])(
    'round-trips %j',
    (text) => {
      expect(decode(encode(text))).toBe(text);
    },
  );

  it('takes known words whole and falls back to bytes', () => {
    expect(encode(' the cat')).toEqual([WORD_BASE, WORD_BASE + 10]);
    expect(encode(' thesis').length).toBe(7);
    expect(encode('é').length).toBe(2);
  });

  it('skips special tokens unless asked', () => {
    expect(decode([WORD_BASE, EOS_ID])).toBe(' the');
    expect(decode([WORD_BASE, EOS_ID], false)).toBe(' the</s>');
    expect(tokenText(3 + 0xc3)).toBe('<0xC3>');
    expect(encode('any text at all').every((id) => id >= 0 && id < VOCAB_SIZE)).toBe(true);
  });
});
