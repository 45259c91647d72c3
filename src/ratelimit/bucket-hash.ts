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

let v0 = 0;
let v1 = 0;
let v2 = 0;
let v3 = 0;

function round(): void {
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

function word(m: number): void {
  v3 ^= m;
  round();
  v0 ^= m;
}

/** Feeds `s` two code units a word (an odd last unit padded with 0: every tag is prefix-free). */
function feed(s: string): void {
  const n = s.length;
  let i = 0;
  for (; i + 1 < n; i += 2) word(s.charCodeAt(i) | (s.charCodeAt(i + 1) << 16));
  if (i < n) word(s.charCodeAt(i));
}

/** Hashes `tag` then `id` under the key (`k0`, `k1`) into `hashOut`; allocates nothing. */
export function bucketHash(k0: number, k1: number, tag: string, id: string): void {
  v0 = k0;
  v1 = k1 ^ 0xee;
  v2 = 0x6c796765 ^ k0;
  v3 = 0x74656462 ^ k1;
  feed(tag);
  feed(id);
  const b = ((tag.length + id.length) & 0xffff) | (tag.length << 16);
  word(b);
  v2 ^= 0xee;
  round();
  round();
  round();
  const h1 = v1 ^ v3;
  v1 ^= 0xdd;
  round();
  round();
  round();
  hashOut.h1 = h1 | 0;
  hashOut.h2 = (v1 ^ v3) | 1;
}
