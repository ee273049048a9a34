import { UisError } from '@uis/spec';

/** Nesting the gateway accepts in any JSON body. SGLang requests nest a few levels (messages, content parts,
 * tool schemas a few dozen at most); thousands of levels only exhaust recursive code somewhere downstream. */
export const DEFAULT_MAX_JSON_DEPTH = 128;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;

/** The byte offset where `bytes` (JSON text, maybe invalid) first nests deeper than `max`, or -1. One pass over the
 * bytes, no allocation: brackets inside strings do not count. */
export function depthExceededAt(bytes: Uint8Array, max: number): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) inString = true;
    else if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
      if (++depth > max) return i;
    } else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) depth--;
  }
  return -1;
}

/** The JSON path (`body.messages[0].content`) of the container opened at byte `at`; only run on a refused body. */
function pathAt(bytes: Uint8Array, at: number, root: string): string {
  const frames: Array<{ array: boolean; index: number; key: string | undefined }> = [];
  let lastString: string | undefined;
  let stringStart = -1;
  const text = new TextDecoder();
  for (let i = 0; i < at; i++) {
    const b = bytes[i]!;
    if (stringStart >= 0) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) {
        lastString = text.decode(bytes.subarray(stringStart, i));
        stringStart = -1;
      }
      continue;
    }
    const top = frames[frames.length - 1];
    if (b === QUOTE) stringStart = i + 1;
    else if (b === 0x3a && top && !top.array) top.key = lastString;
    else if (b === COMMA && top?.array) top.index++;
    else if (b === OPEN_OBJECT || b === OPEN_ARRAY)
      frames.push({ array: b === OPEN_ARRAY, index: 0, key: undefined });
    else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) frames.pop();
  }
  let path = root;
  for (const f of frames) {
    if (f.array) path += `[${f.index}]`;
    else if (f.key !== undefined)
      path += /^[A-Za-z_$][\w$]*$/.test(f.key) ? `.${f.key}` : `[${JSON.stringify(f.key)}]`;
  }
  return path;
}

/** 400 `json_too_deep` at the path where `bytes` nests deeper than `max`, or undefined. The path is cut after
 * `max` segments (it is that deep by definition). */
export function jsonDepthError(bytes: Uint8Array, max: number, root = 'body'): UisError | undefined {
  const at = depthExceededAt(bytes, max);
  if (at < 0) return undefined;
  return new UisError({
    code: 'json_too_deep',
    path: pathAt(bytes, at, root),
    message: `JSON nests deeper than ${max} levels here; flatten the request (the gateway refuses deeper bodies)`,
  });
}
