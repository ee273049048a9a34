/** Fast non-cryptographic hashing for rendezvous (HRW) selection. Pure 32-bit integer math, no BigInt, so it
 * runs the same in browsers and Node and costs nanoseconds per call. */

/** A 64-bit hash as two unsigned 32-bit halves. */
export interface Hash64 {
  hi: number;
  lo: number;
}

const FNV_OFFSET_HI = 0xcbf29ce4;
const FNV_OFFSET_LO = 0x84222325;

/** 64-bit FNV-1a over the UTF-16 code units of `text` (prime 2^40 + 0x1b3, computed with 32-bit halves). */
export function fnv1a64(text: string): Hash64 {
  let hi = FNV_OFFSET_HI;
  let lo = FNV_OFFSET_LO;
  for (let i = 0; i < text.length; i++) {
    lo ^= text.charCodeAt(i);
    // (hi:lo) * (0x100:0x000001b3) mod 2^64, split so no intermediate exceeds 2^53.
    const loMul = lo * 0x1b3;
    const carry = Math.floor(loMul / 0x100000000);
    const newLo = loMul >>> 0;
    hi = (Math.imul(hi, 0x1b3) + Math.imul(lo, 0x100) + carry) >>> 0;
    lo = newLo;
  }
  return { hi: hi >>> 0, lo: lo >>> 0 };
}

/** murmur3's 32-bit finalizer: full avalanche of one word. */
function fmix32(h: number): number {
  let x = h ^ (h >>> 16);
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** The rendezvous weight of (key, replica) as a non-negative number below 2^53. Mixing both halves of both
 * hashes makes the weights of one key across replicas independent, which is what bounds key movement to ~1/N. */
export function rendezvousWeight(key: Hash64, replica: Hash64): number {
  const a = fmix32((key.lo ^ Math.imul(replica.hi, 0x9e3779b1)) >>> 0);
  const b = fmix32((key.hi ^ replica.lo ^ Math.imul(a, 0x85ebca77)) >>> 0);
  const c = fmix32((a ^ Math.imul(b, 0xc2b2ae3d)) >>> 0);
  return (b & 0x1fffff) * 0x100000000 + c;
}
