import { bodyFraming, parseResponseHead, type ResponseHead } from './http1.ts';

/**
 * An engine answers with the same head every time but for two values: uvicorn and node stamp each answer with
 * the time (`date`) and its body's length (`content-length`). A head seen before is recognised by comparing its
 * bytes with the remembered one around those two values, which are read on their own: no string per header and
 * no name lookup (the full parse was the gateway's largest function per request). Anything else (another shape,
 * a value outside the plain forms below, a head not whole yet) goes to `parseResponseHead`, whose result this
 * gives exactly: head-memo.test.ts holds both equal over a corpus of edge cases.
 */

/** Shapes remembered per engine: an engine answers JSON, event streams and errors with different heads. */
const MAX_TEMPLATES = 4;
const MAX_TEMPLATE_BYTES = 2048;
const MAX_DATE_BYTES = 64;
/** As `parseResponseHead`'s `\d{1,15}`. */
const MAX_LENGTH_DIGITS = 15;
/** Heads that could not be learned before learning slows to one in LEARN_EVERY misses. */
const MAX_FAILED_LEARNS = 32;
const LEARN_EVERY = 64;

const DATE = 0;
const LENGTH = 1;
const SP = 0x20;
const HT = 0x09;
const CR = 0x0d;

interface Template {
  readonly method: string;
  /** The head as first seen, through its blank line. */
  readonly bytes: Buffer;
  /** Per varying value, in order: its start and end in `bytes` and its kind (DATE or LENGTH). */
  readonly slots: readonly number[];
  /** The full parse of `bytes`: what every matching head shares. */
  readonly head: ResponseHead;
  readonly hasLength: boolean;
  readonly hasTransferEncoding: boolean;
  /** The last date read for this shape, as bytes and text (it changes once a second). */
  readonly lastDate: Buffer;
  lastDateLength: number;
  lastDateText: string;
}

/**
 * A varying value the shortcut reads itself: a date of printable ASCII with no space at either end, or 1-15
 * digits. Such a value is what the full parser's trim gives when OWS alone is before it and CR right after it.
 */
function plainValue(buf: Buffer, start: number, end: number, kind: number): boolean {
  if (end <= start) return false;
  if (kind === LENGTH) {
    if (end - start > MAX_LENGTH_DIGITS) return false;
    for (let i = start; i < end; i++) if (buf[i]! < 0x30 || buf[i]! > 0x39) return false;
    return true;
  }
  if (end - start > MAX_DATE_BYTES || buf[start] === SP || buf[end - 1] === SP) return false;
  for (let i = start; i < end; i++) if (buf[i]! < SP || buf[i]! > 0x7e) return false;
  return true;
}

/** A template of a fully parsed head, or undefined when its shape is not one the shortcut can give exactly:
 * a name twice (values merged), `set-cookie` (a list), a date or length outside the plain forms. */
function learn(buf: Buffer, method: string, head: ResponseHead): Template | undefined {
  if (head.status < 200 || head.end > MAX_TEMPLATE_BYTES) return undefined;
  const bytes = Buffer.from(buf.subarray(0, head.end));
  const text = bytes.toString('latin1');
  const at = head.end - 4;
  const slots: number[] = [];
  const seen = new Set<string>();
  let lineEnd = text.indexOf('\r\n');
  // Lines as parseResponseHead splits them (at CRLF only: a bare LF stays inside a value, fixed bytes here).
  for (let start = lineEnd + 2; start < at; start = lineEnd + 2) {
    lineEnd = text.indexOf('\r\n', start);
    const colon = text.indexOf(':', start);
    const name = text.slice(start, colon).toLowerCase();
    if (seen.has(name) || name === 'set-cookie') return undefined;
    seen.add(name);
    const kind = name === 'date' ? DATE : name === 'content-length' ? LENGTH : -1;
    if (kind === -1) continue;
    let from = colon + 1;
    while (bytes[from] === SP || bytes[from] === HT) from++;
    if (!plainValue(bytes, from, lineEnd, kind)) return undefined;
    slots.push(from, lineEnd, kind);
  }
  return {
    method,
    bytes,
    slots,
    // A copy: the caller owns the headers it was given.
    head: { ...head, headers: { ...head.headers } },
    hasLength: seen.has('content-length'),
    hasTransferEncoding: seen.has('transfer-encoding'),
    lastDate: Buffer.alloc(MAX_DATE_BYTES),
    lastDateLength: 0,
    lastDateText: '',
  };
}

function dateText(t: Template, buf: Buffer, start: number, end: number): string {
  const n = end - start;
  const last = t.lastDate;
  if (n === t.lastDateLength) {
    let i = 0;
    while (i < n && buf[start + i] === last[i]) i++;
    if (i === n) return t.lastDateText;
  }
  buf.copy(last, 0, start, end);
  t.lastDateLength = n;
  t.lastDateText = buf.toString('latin1', start, end);
  return t.lastDateText;
}

/** The head in `buf` when it is `t`'s shape with plain varying values, else undefined. */
function match(t: Template, buf: Buffer): ResponseHead | undefined {
  const tpl = t.bytes;
  const slots = t.slots;
  const n = buf.length;
  let at = 0;
  let from = 0;
  let date: string | undefined;
  let length = 0;
  let lengthText: string | undefined;
  for (let s = 0; ; s += 3) {
    const last = s === slots.length;
    const to = last ? tpl.length : slots[s]!;
    if (at + to - from > n) return undefined;
    for (let i = from; i < to; i++) if (buf[at++] !== tpl[i]) return undefined;
    if (last) break;
    from = slots[s + 1]!;
    // The value runs to the CR that starts the next fixed bytes (compared on the next turn).
    const start = at;
    if (slots[s + 2] === LENGTH) {
      let v = 0;
      for (let c = buf[at]!; at < n && c >= 0x30 && c <= 0x39; c = buf[++at]!) v = v * 10 + c - 0x30;
      if (at === start || at - start > MAX_LENGTH_DIGITS) return undefined;
      length = v;
      // Digits without a leading zero are the number's own text.
      lengthText = buf[start] !== 0x30 || at - start === 1 ? String(v) : buf.toString('latin1', start, at);
    } else {
      const limit = Math.min(n, start + MAX_DATE_BYTES);
      while (at < limit && buf[at]! >= SP && buf[at]! <= 0x7e) at++;
      if (at === n || buf[at] !== CR || !plainValue(buf, start, at, DATE)) return undefined;
      date = dateText(t, buf, start, at);
    }
  }
  const head = t.head;
  const headers = { ...head.headers };
  if (date !== undefined) headers.date = date;
  if (lengthText !== undefined) headers['content-length'] = lengthText;
  return {
    status: head.status,
    headers,
    // Only the length varies what the framing depends on; whatever it is, a length framing (none or length)
    // never closes, so the template's keep-alive holds.
    framing: bodyFraming(
      t.method,
      head.status,
      t.hasTransferEncoding,
      head.framing === 'chunked',
      t.hasLength ? length : undefined,
    ),
    contentLength: length,
    keepAlive: head.keepAlive,
    keepAliveHintS: head.keepAliveHintS,
    end: at,
  };
}

/** The response heads of one engine origin: recognised when seen before, else parsed in full and learned. */
export class HeadMemo {
  readonly #templates: Template[] = [];
  #failedLearns = 0;
  #misses = 0;
  /** Heads given by the shortcut (tests check it is taken). */
  hits = 0;

  /** As `parseResponseHead(buf, method)`: undefined until the head is whole; throws ProtocolError. */
  parse(buf: Buffer, method: string): ResponseHead | undefined {
    const templates = this.#templates;
    for (let i = 0; i < templates.length; i++) {
      const t = templates[i]!;
      if (t.method !== method) continue;
      const head = match(t, buf);
      if (head === undefined) continue;
      this.hits++;
      return head;
    }
    const head = parseResponseHead(buf, method);
    if (head === undefined || head.status < 200) return head;
    this.#misses++;
    if (this.#failedLearns < MAX_FAILED_LEARNS || this.#misses % LEARN_EVERY === 0) {
      const t = learn(buf, method, head);
      if (t === undefined) this.#failedLearns++;
      else if (templates.unshift(t) > MAX_TEMPLATES) templates.pop();
    }
    return head;
  }
}
