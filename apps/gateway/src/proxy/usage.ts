/** Token counts an engine reported for one answer: SGLang's `meta_info.{prompt,completion}_tokens` on
 * `/generate`, OpenAI's `usage.{prompt,completion}_tokens` on chat completions. */
export interface TokenUsage {
  prompt: number;
  completion: number;
}

const PROMPT = Buffer.from('"prompt_tokens"');
const COMPLETION = Buffer.from('"completion_tokens"');
const SPACE = 0x20;
const COLON = 0x3a;
const ZERO = 0x30;
const NINE = 0x39;

/** The non-negative integer after `"key"` and a colon at `at` (JSON allows spaces around the colon), or -1 when
 * something else follows (`null` in a stream chunk, a key like `"prompt_tokens_details"` never matches the quote). */
function numberAfter(buf: Buffer, at: number, keyLength: number): number {
  let i = at + keyLength;
  while (buf[i] === SPACE) i++;
  if (buf[i] !== COLON) return -1;
  i++;
  while (buf[i] === SPACE) i++;
  let n = -1;
  for (let c = buf[i]; c !== undefined && c >= ZERO && c <= NINE; c = buf[++i])
    n = (n < 0 ? 0 : n * 10) + c - ZERO;
  return n;
}

/** Sum of every value of `key` in `buf`. A quoted key with its closing quote cannot occur inside a JSON string
 * (quotes there are escaped), so a byte search finds exactly the object keys. */
function sumOf(buf: Buffer, key: Buffer): number {
  let total = 0;
  for (let at = buf.indexOf(key); at !== -1; at = buf.indexOf(key, at + key.length)) {
    const n = numberAfter(buf, at, key.length);
    if (n > 0) total += n;
  }
  return total;
}

function lastOf(buf: Buffer, key: Buffer): number {
  for (let at = buf.lastIndexOf(key); at !== -1; at = at === 0 ? -1 : buf.lastIndexOf(key, at - 1)) {
    const n = numberAfter(buf, at, key.length);
    if (n >= 0) return n;
  }
  return -1;
}

/** Usage of a whole JSON answer: a batch `/generate` answer is a list, one `meta_info` per prompt, so every
 * occurrence counts. Undefined when the answer reports none. */
export function usageOfBody(body: Buffer): TokenUsage | undefined {
  if (body.indexOf(COMPLETION) === -1) return undefined;
  return { prompt: sumOf(body, PROMPT), completion: sumOf(body, COMPLETION) };
}

/** Usage of an event stream from its last bytes: SGLang's `/generate` events carry cumulative counts, an OpenAI
 * stream carries one `usage` chunk at the end (when the client asked with `stream_options.include_usage`), so the
 * last value reported is the answer's. Undefined when the stream reported none. */
export function usageOfStreamTail(tail: Buffer): TokenUsage | undefined {
  const completion = lastOf(tail, COMPLETION);
  if (completion < 0) return undefined;
  return { prompt: Math.max(0, lastOf(tail, PROMPT)), completion };
}
