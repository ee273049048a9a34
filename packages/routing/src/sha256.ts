/** SHA-256 (FIPS 180-4) in plain 32-bit integer math: synchronous and the same in browsers and Node (WebCrypto's
 * digest is async, node:crypto is Node-only), for the affinity rule that must pick the replica Relax's Python
 * resolver picks. A message is hashed from a saved midstate so that many messages sharing a long prefix pay for
 * the prefix's whole blocks once. */

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);

export const SHA256_INITIAL: Readonly<Uint32Array> = new Uint32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);

const W = new Uint32Array(64);

/** Compresses the 64-byte block at `bytes[offset..]` into `state` (8 words, updated in place). */
function compress(state: Uint32Array, bytes: ArrayLike<number>, offset: number): void {
  for (let i = 0; i < 16; i++) {
    const j = offset + i * 4;
    W[i] = ((bytes[j]! << 24) | (bytes[j + 1]! << 16) | (bytes[j + 2]! << 8) | bytes[j + 3]!) >>> 0;
  }
  for (let i = 16; i < 64; i++) {
    const w15 = W[i - 15]!;
    const w2 = W[i - 2]!;
    const s0 = ((w15 >>> 7) | (w15 << 25)) ^ ((w15 >>> 18) | (w15 << 14)) ^ (w15 >>> 3);
    const s1 = ((w2 >>> 17) | (w2 << 15)) ^ ((w2 >>> 19) | (w2 << 13)) ^ (w2 >>> 10);
    W[i] = (W[i - 16]! + s0 + W[i - 7]! + s1) >>> 0;
  }
  let a = state[0]!;
  let b = state[1]!;
  let c = state[2]!;
  let d = state[3]!;
  let e = state[4]!;
  let f = state[5]!;
  let g = state[6]!;
  let h = state[7]!;
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const ch = (e & f) ^ (~e & g);
    const t1 = (h + S1 + ch + K[i]! + W[i]!) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const maj = (a & b) ^ (a & c) ^ (b & c);
    const t2 = (S0 + maj) | 0;
    h = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  state[0] = (state[0]! + a) >>> 0;
  state[1] = (state[1]! + b) >>> 0;
  state[2] = (state[2]! + c) >>> 0;
  state[3] = (state[3]! + d) >>> 0;
  state[4] = (state[4]! + e) >>> 0;
  state[5] = (state[5]! + f) >>> 0;
  state[6] = (state[6]! + g) >>> 0;
  state[7] = (state[7]! + h) >>> 0;
}

/** A hash in progress after some whole 64-byte blocks: the chaining state and how many bytes it has consumed. */
export interface Sha256Midstate {
  state: Uint32Array;
  length: number;
  /** The bytes after the last whole block, not yet compressed. */
  rest: Uint8Array;
}

/** Absorbs `bytes`' whole blocks; the remainder is kept for `sha256Finish`. */
export function sha256Prefix(bytes: Uint8Array): Sha256Midstate {
  const state = new Uint32Array(SHA256_INITIAL);
  const whole = bytes.length - (bytes.length % 64);
  for (let off = 0; off < whole; off += 64) compress(state, bytes, off);
  return { state, length: bytes.length, rest: bytes.subarray(whole) };
}

const TAIL = new Uint8Array(256);

/** The digest of prefix + `suffix` as 8 big-endian words (comparing them as unsigned numbers, first word first,
 * orders digests as their bytes). `out` is filled and returned. */
export function sha256Finish(mid: Sha256Midstate, suffix: Uint8Array, out: Uint32Array): Uint32Array {
  out.set(mid.state);
  let tail = TAIL;
  const restLen = mid.rest.length + suffix.length;
  const padded = (restLen + 9 + 63) & ~63;
  if (padded > tail.length) tail = new Uint8Array(padded);
  else tail.fill(0, 0, padded);
  tail.set(mid.rest, 0);
  tail.set(suffix, mid.rest.length);
  tail[restLen] = 0x80;
  const bits = (mid.length + suffix.length) * 8;
  // Message length in bits, big-endian 64-bit (messages here are far below 2^53 bits).
  const hi = Math.floor(bits / 0x100000000);
  const lo = bits >>> 0;
  tail[padded - 8] = hi >>> 24;
  tail[padded - 7] = (hi >>> 16) & 0xff;
  tail[padded - 6] = (hi >>> 8) & 0xff;
  tail[padded - 5] = hi & 0xff;
  tail[padded - 4] = lo >>> 24;
  tail[padded - 3] = (lo >>> 16) & 0xff;
  tail[padded - 2] = (lo >>> 8) & 0xff;
  tail[padded - 1] = lo & 0xff;
  for (let off = 0; off < padded; off += 64) compress(out, tail, off);
  return out;
}

/** SHA-256 of `bytes` as lowercase hex. */
export function sha256Hex(bytes: Uint8Array): string {
  const words = sha256Finish(sha256Prefix(bytes), new Uint8Array(0), new Uint32Array(8));
  return [...words].map((w) => w.toString(16).padStart(8, '0')).join('');
}
