import http from 'node:http';
import { bucketHash, hashOut } from '../../src/ratelimit/bucket-hash.js';

/** The unkeyed hash the bucket table used before issue #34 (FNV-1a), its first word: what picked a bucket's home. */
export function oldHome(tag: string, id: string, slots: number): number {
  let a = 0x811c9dc5;
  for (const s of [tag, id]) for (let i = 0; i < s.length; i++) a = Math.imul(a ^ s.charCodeAt(i), 0x01000193);
  return (a >>> 0) % slots;
}

/** Today's keyed hash with a known seed: the home an attacker who knows the seed computes. */
export function seededHome(seed: readonly [number, number], tag: string, id: string, slots: number): number {
  bucketHash(seed[0], seed[1], tag, id);
  return (hashOut.h1 >>> 0) % slots;
}

/** The n-th loopback address past 127.0.1.0: every one reaches a listener on 127.0.0.1 (Linux routes 127/8 to lo). */
export const loopback = (n: number): string => `127.${1 + ((n >> 16) & 0x7f)}.${(n >> 8) & 0xff}.${n & 0xff}`;

/**
 * Client addresses whose per-address buckets (`tag`) have their homes at `home`,
 * `home+1`, ... `home+count-1`: one for each slot of a window, in that order.
 */
export function fillers(home: (ip: string) => number, first: number, count: number, from = 0): string[] {
  const out: (string | undefined)[] = new Array(count);
  let found = 0;
  for (let n = from; found < count && n < 0x7fffff; n++) {
    const ip = loopback(n);
    const k = home(ip) - first;
    if (k >= 0 && k < count && out[k] === undefined) {
      out[k] = ip;
      found++;
    }
  }
  if (found < count) throw new Error('not enough loopback addresses');
  return out as string[];
}

/** One GET from `from`; its status, or 0 if no answer came within `timeoutMs`. */
export function getFrom(url: string, from: string, timeoutMs: number): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(url, { localAddress: from, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.setTimeout(timeoutMs, () => {
      req.destroy();
      resolve(0);
    });
    req.on('error', () => resolve(0));
  });
}
