import { type Sha256Midstate, sha256Finish, sha256Prefix } from './sha256.ts';

/** Relax's affinity rule, byte for byte: a keyed request goes to the eligible replica with the largest SHA-256
 * digest of the compact JSON array `[role, model_id, affinity_key, engine_id]` as Python writes it,
 * `json.dumps([...], separators=(",", ":"))` (ensure_ascii: every character outside printable ASCII is `\uXXXX`,
 * lowercase hex, astral characters as surrogate pairs), digests compared as bytes, the first replica in
 * discovery order winning a tie (Python's `max`). Python reference:
 *
 *   def pick(role, model_id, key, engine_ids):
 *       digest = lambda e: hashlib.sha256(
 *           json.dumps([role, model_id, key, e], separators=(",", ":")).encode()).digest()
 *       return max(engine_ids, key=digest)
 */

const ESCAPE = /[\u007f-\uffff]/g;
const hex4 = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** One string as Python's `json.dumps` writes it (ensure_ascii=True). JSON.stringify already escapes `"`, `\`
 * and control characters as Python does (`\n`, `\u001f`, ...); Python also escapes DEL and everything non-ASCII.
 * Lone surrogates come out as `\udXXX` from both. */
export function pythonJsonString(value: string): string {
  return JSON.stringify(value).replace(ESCAPE, hex4);
}

/** The hashed message for (role, model, key, engine): what `json.dumps` produces, as its ASCII bytes. */
export function affinityMessage(role: string, model: string, key: string, engineId: string): string {
  return `[${pythonJsonString(role)},${pythonJsonString(model)},${pythonJsonString(key)},${pythonJsonString(engineId)}]`;
}

/** ASCII text -> bytes (the JSON above is ASCII by construction). */
export function asciiBytes(text: string): Uint8Array {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
  return out;
}

/** The per-replica end of the message: `"<engine id>"]`, computed once per candidate. */
export function affinitySuffix(engineId: string): Uint8Array {
  return asciiBytes(`${pythonJsonString(engineId)}]`);
}

/** The shared start of every replica's message for one request: `[role,model,key,` absorbed once. */
export function affinityPrefix(role: string, model: string, key: string): Sha256Midstate {
  return sha256Prefix(
    asciiBytes(`[${pythonJsonString(role)},${pythonJsonString(model)},${pythonJsonString(key)},`),
  );
}

const best = new Uint32Array(8);
const current = new Uint32Array(8);

/** Index of the winner among `items` (whose `suffixOf` is their `affinitySuffix`), or -1 when there is none. */
export function rendezvousSha256<T>(
  prefix: Sha256Midstate,
  items: ReadonlyArray<T>,
  suffixOf: (item: T) => Uint8Array,
): number {
  let winner = -1;
  for (let i = 0; i < items.length; i++) {
    sha256Finish(prefix, suffixOf(items[i]!), current);
    if (winner === -1 || greater(current, best)) {
      best.set(current);
      winner = i;
    }
  }
  return winner;
}

function greater(a: Uint32Array, b: Uint32Array): boolean {
  for (let i = 0; i < 8; i++) {
    if (a[i] !== b[i]) return a[i]! > b[i]!;
  }
  return false;
}
