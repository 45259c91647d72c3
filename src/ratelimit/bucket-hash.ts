/**
 * The keyed hash that places a bucket in the shared table: HalfSipHash-1-3 (Aumasson
 * and Bernstein's SipHash on 32-bit words, the one Linux keys its hash tables with,
 * `hsiphash`) with a 64-bit key and a 64-bit result, over the UTF-16 code units of
 * the bucket's tag then its id, two units a word.
 *
 * Keyed with a random per-process seed (held in the table's SharedArrayBuffer, so every
 * thread mapping the table agrees), nobody who does not know the seed can choose names
 * that share a window of the table. An unkeyed hash (FNV-1a, as before) let anyone
 * compute such names offline.
 */

/** The result of the last `bucketHash`: two 32-bit words, the second never 0 (0 marks an empty slot). */
export const hashOut = { h1: 0, h2: 0 };

/**
 * Hashes `tag` then `id` under the key (`k0`, `k1`) into `hashOut`; allocates nothing.
 * Each string is fed two code units a word (an odd last unit padded with 0: every tag
 * is prefix-free), then the lengths. The state stays in locals (module-level state
 * made it several times slower), so the round is written out where it runs.
 */
export function bucketHash(k0: number, k1: number, tag: string, id: string): void {
  let v0 = k0 | 0;
  let v1 = (k1 ^ 0xee) | 0;
  let v2 = (0x6c796765 ^ k0) | 0;
  let v3 = (0x74656462 ^ k1) | 0;
  const words = ((tag.length + 1) >> 1) + ((id.length + 1) >> 1) + 1;
  let s = tag;
  let i = 0;
  for (let w = 0; w < words; w++) {
    let m: number;
    if (w === words - 1) {
      m = ((tag.length + id.length) & 0xffff) | (tag.length << 16);
    } else {
      if (i >= s.length) {
        s = id;
        i = 0;
      }
      m = i + 1 < s.length ? s.charCodeAt(i) | (s.charCodeAt(i + 1) << 16) : s.charCodeAt(i);
      i += 2;
    }
    v3 ^= m;
    v0 = (v0 + v1) | 0;
    v1 = (v1 << 5) | (v1 >>> 27);
    v1 ^= v0;
    v0 = (v0 << 16) | (v0 >>> 16);
    v2 = (v2 + v3) | 0;
    v3 = (v3 << 8) | (v3 >>> 24);
    v3 ^= v2;
    v0 = (v0 + v3) | 0;
    v3 = (v3 << 7) | (v3 >>> 25);
    v3 ^= v0;
    v2 = (v2 + v1) | 0;
    v1 = (v1 << 13) | (v1 >>> 19);
    v1 ^= v2;
    v2 = (v2 << 16) | (v2 >>> 16);
    v0 ^= m;
  }
  v2 ^= 0xee;
  let h1 = 0;
  for (let r = 0; r < 6; r++) {
    if (r === 3) {
      h1 = v1 ^ v3;
      v1 ^= 0xdd;
    }
    v0 = (v0 + v1) | 0;
    v1 = (v1 << 5) | (v1 >>> 27);
    v1 ^= v0;
    v0 = (v0 << 16) | (v0 >>> 16);
    v2 = (v2 + v3) | 0;
    v3 = (v3 << 8) | (v3 >>> 24);
    v3 ^= v2;
    v0 = (v0 + v3) | 0;
    v3 = (v3 << 7) | (v3 >>> 25);
    v3 ^= v0;
    v2 = (v2 + v1) | 0;
    v1 = (v1 << 13) | (v1 >>> 19);
    v1 ^= v2;
    v2 = (v2 << 16) | (v2 >>> 16);
  }
  hashOut.h1 = h1 | 0;
  hashOut.h2 = (v1 ^ v3) | 1;
}
