import { randomBytes } from 'node:crypto';

/** Request ids and injected rids, shaped like a UUID: a random prefix per process and a counter. Unique among every
 * engine's in-flight rids (which is what SGLang needs) and across gateway restarts, at a fraction of randomUUID's
 * cost. */
const ID_PREFIX = randomBytes(10)
  .toString('hex')
  .replace(/^(.{8})(.{4})(.{4})(.{4})$/, '$1-$2-$3-$4-');
let idCounter = 0;
export function nextId(): string {
  idCounter++;
  return `${ID_PREFIX}${idCounter.toString(16).padStart(12, '0')}`;
}

/** What a client's `x-request-id` may be to be kept (printable ASCII, bounded). */
export const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;
