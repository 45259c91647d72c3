import { createHash, randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

// Random bytes are drawn from a pool refilled 8 KB at a time, so an id costs no syscall.
let pool = randomBytes(8192);
let poolPos = 0;

const CHARS = Buffer.from(BASE62, 'latin1');
const out = Buffer.allocUnsafe(64);

/** `n` base62 characters. Rejection sampling keeps every character uniform. */
export function randomBase62(n: number): string {
  if (n > out.length) return randomBase62(out.length) + randomBase62(n - out.length);
  let k = 0;
  while (k < n) {
    if (poolPos >= pool.length) {
      pool = randomBytes(8192);
      poolPos = 0;
    }
    const b = pool[poolPos++] as number;
    if (b < 248) out[k++] = CHARS[b % 62] as number;
  }
  return out.toString('latin1', 0, n);
}

let lastMs = -1;
let lastPart = '';

/** Fixed-width base36 time part: lexical order is time order (good until year 5138). */
export function timePart(ms: number): string {
  if (ms !== lastMs) {
    lastMs = ms;
    lastPart = ms.toString(36).padStart(9, '0');
  }
  return lastPart;
}

/** An id whose string order is its creation order: `<prefix>_<time><random>`. */
export function sortableId(prefix: string, ms: number): string {
  return `${prefix}_${timePart(ms)}${randomBase62(14)}`;
}

export const newWakeId = (ms: number): string => sortableId('wk', ms);
export const newEventId = (ms: number): string => sortableId('evt', ms);
export const newDeliveryId = (ms: number): string => sortableId('dlv', ms);

/**
 * The delivery of event `eventId` (raised at `eventMs`) to endpoint `endpointId`: the
 * same id whoever fans the event out, so a fan-out written twice (a leader paused past
 * its lead, and the next one) is one delivery: one row in storage, one state in the
 * fleet's queue, one POST.
 */
export function fanoutDeliveryId(eventMs: number, eventId: string, endpointId: string): string {
  const h = createHash('sha256').update(`${eventId}\n${endpointId}`).digest();
  let tail = '';
  for (let i = 0; i < 14; i++) tail += BASE62[(h[i] as number) % 62];
  return `dlv_${timePart(eventMs)}${tail}`;
}
export const newKeyId = (): string => `key_${randomBase62(20)}`;
export const newEndpointId = (): string => `we_${randomBase62(20)}`;

/** Secret part: 43 base62 characters carry 256 bits (43 * log2(62) = 256.04). */
export const newSecret = (): string => randomBase62(43);

/** Reads the millisecond timestamp back out of a sortable id, or null. */
export function idTime(id: string): number | null {
  const m = /^[a-z]+_([0-9a-z]{9})[0-9A-Za-z]{14}$/.exec(id);
  if (!m) return null;
  const ms = Number.parseInt(m[1] as string, 36);
  return Number.isFinite(ms) ? ms : null;
}
