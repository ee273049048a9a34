/**
 * One pass over a serving body that checks it is a JSON object (the grammar of RFC 8259, as `JSON.parse` reads it)
 * and records where each of its top-level members is, without building any value: routing reads a few members,
 * and a body forwarded unchanged never needs the rest parsed. UTF-8 is checked apart (`isUtf8`).
 *
 * It must never accept what `JSON.parse` refuses; the caller parses the body whole whenever it answers undefined
 * (an error then gets its exact message and path from the full parse), so refusing more than needed costs only time.
 */

/** One top-level member: the key's opening quote, the value's first byte and the byte after the value. */
export interface ScannedMember {
  key: string;
  start: number;
  valueStart: number;
  end: number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const SLASH = 0x2f;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;

/** What the scanner expects next. */
const VALUE = 0;
/** After `[`: a value or `]`. */
const VALUE_OR_CLOSE = 1;
/** After `{`: a key or `}`. */
const KEY_OR_CLOSE = 2;
/** After `,` in an object. */
const KEY = 3;
const COLON_NEXT = 4;
/** After a value: `,`, the closer, or the end of the text. */
const AFTER_VALUE = 5;

const isSpace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
const isDigit = (b: number) => b >= ZERO && b <= NINE;
const isHex = (b: number) => isDigit(b) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46);

/** End of the string whose opening quote is at `at` (the byte after its closing quote), or -1 when it is not a JSON
 * string. A negative `plain` flag reports escapes or non-ASCII bytes (its text then needs a real decode). */
function stringEnd(bytes: Uint8Array, at: number, plain: { ascii: boolean }): number {
  const n = bytes.length;
  let ascii = true;
  for (let i = at + 1; i < n; i++) {
    const b = bytes[i]!;
    if (b === QUOTE) {
      plain.ascii = ascii;
      return i + 1;
    }
    if (b < 0x20) return -1;
    if (b >= 0x80) ascii = false;
    else if (b === BACKSLASH) {
      ascii = false;
      const e = bytes[++i];
      if (e === 0x75 /* u */) {
        if (i + 4 >= n) return -1;
        for (let k = 1; k <= 4; k++) if (!isHex(bytes[i + k]!)) return -1;
        i += 4;
      } else if (
        e !== QUOTE &&
        e !== BACKSLASH &&
        e !== SLASH &&
        e !== 0x62 /* b */ &&
        e !== 0x66 /* f */ &&
        e !== 0x6e /* n */ &&
        e !== 0x72 /* r */ &&
        e !== 0x74 /* t */
      )
        return -1;
    }
  }
  return -1;
}

/** End of the number starting at `at` (`-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?`), or -1. */
function numberEnd(bytes: Uint8Array, at: number): number {
  let i = at;
  if (bytes[i] === MINUS) i++;
  if (bytes[i] === ZERO) i++;
  else if (isDigit(bytes[i]!)) while (isDigit(bytes[i]!)) i++;
  else return -1;
  if (bytes[i] === DOT) {
    i++;
    if (!isDigit(bytes[i]!)) return -1;
    while (isDigit(bytes[i]!)) i++;
  }
  if (bytes[i] === 0x65 || bytes[i] === 0x45) {
    i++;
    if (bytes[i] === PLUS || bytes[i] === MINUS) i++;
    if (!isDigit(bytes[i]!)) return -1;
    while (isDigit(bytes[i]!)) i++;
  }
  return i;
}

const TRUE = [0x74, 0x72, 0x75, 0x65];
const FALSE = [0x66, 0x61, 0x6c, 0x73, 0x65];
const NULL = [0x6e, 0x75, 0x6c, 0x6c];

function literalEnd(bytes: Uint8Array, at: number, word: readonly number[]): number {
  for (let k = 0; k < word.length; k++) if (bytes[at + k] !== word[k]) return -1;
  return at + word.length;
}

/** The key of a top-level member, from its bytes (`start` at its opening quote, `end` after its closing one). */
function keyText(bytes: Buffer, start: number, end: number, ascii: boolean): string {
  return ascii
    ? bytes.toString('latin1', start + 1, end - 1)
    : (JSON.parse(bytes.toString('utf8', start, end)) as string);
}

/**
 * The top-level members of `bytes` when it is exactly one JSON object (whitespace around it allowed) nesting at
 * most `maxDepth` levels; undefined otherwise (not JSON, not an object, too deep: the full parse says which).
 */
export function scanObject(bytes: Buffer, maxDepth: number): ScannedMember[] | undefined {
  const n = bytes.length;
  const members: ScannedMember[] = [];
  /** Open containers, innermost last: true for an object. */
  const stack: boolean[] = [];
  const plain = { ascii: true };
  let i = 0;
  while (i < n && isSpace(bytes[i]!)) i++;
  if (bytes[i] !== OPEN_OBJECT || maxDepth < 1) return undefined;
  stack.push(true);
  i++;
  let expect = KEY_OR_CLOSE;
  let member: ScannedMember | undefined;
  while (i < n) {
    const b = bytes[i]!;
    if (isSpace(b)) {
      i++;
      continue;
    }
    switch (expect) {
      case KEY_OR_CLOSE:
      case KEY: {
        if (b === CLOSE_OBJECT && expect === KEY_OR_CLOSE) {
          stack.pop();
          i++;
          expect = AFTER_VALUE;
          break;
        }
        if (b !== QUOTE) return undefined;
        const end = stringEnd(bytes, i, plain);
        if (end === -1) return undefined;
        if (stack.length === 1)
          member = { key: keyText(bytes, i, end, plain.ascii), start: i, valueStart: -1, end: -1 };
        i = end;
        expect = COLON_NEXT;
        break;
      }
      case COLON_NEXT:
        if (b !== COLON) return undefined;
        i++;
        expect = VALUE;
        break;
      case VALUE:
      case VALUE_OR_CLOSE: {
        if (b === CLOSE_ARRAY && expect === VALUE_OR_CLOSE) {
          stack.pop();
          i++;
          expect = AFTER_VALUE;
          break;
        }
        if (stack.length === 1 && member !== undefined) member.valueStart = i;
        if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
          if (stack.length >= maxDepth) return undefined;
          stack.push(b === OPEN_OBJECT);
          i++;
          expect = b === OPEN_OBJECT ? KEY_OR_CLOSE : VALUE_OR_CLOSE;
          break;
        }
        let end: number;
        if (b === QUOTE) end = stringEnd(bytes, i, plain);
        else if (b === MINUS || isDigit(b)) end = numberEnd(bytes, i);
        else if (b === 0x74) end = literalEnd(bytes, i, TRUE);
        else if (b === 0x66) end = literalEnd(bytes, i, FALSE);
        else if (b === 0x6e) end = literalEnd(bytes, i, NULL);
        else return undefined;
        if (end === -1) return undefined;
        i = end;
        expect = AFTER_VALUE;
        break;
      }
      case AFTER_VALUE: {
        if (stack.length === 0) return undefined; // something after the object
        // A top-level member's value ended (its own containers closed): it spans start..i.
        if (stack.length === 1 && member !== undefined && member.valueStart !== -1) {
          member.end = endOfValue(bytes, i);
          members.push(member);
          member = undefined;
        }
        const inObject = stack[stack.length - 1]!;
        if (b === COMMA) {
          i++;
          expect = inObject ? KEY : VALUE;
        } else if (b === (inObject ? CLOSE_OBJECT : CLOSE_ARRAY)) {
          stack.pop();
          i++;
          expect = AFTER_VALUE;
        } else return undefined;
        break;
      }
    }
  }
  return stack.length === 0 && expect === AFTER_VALUE ? members : undefined;
}

/** The byte after a value that ends before `at` with only whitespace between. */
function endOfValue(bytes: Uint8Array, at: number): number {
  let e = at;
  while (e > 0 && isSpace(bytes[e - 1]!)) e--;
  return e;
}
