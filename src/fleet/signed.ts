import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/*
 * What the fleet's instances say to each other through Redis: "<id> <version>", and
 * "revoked" when that version ends the thing (a key), never a record, authenticated
 * with a key Redis never sees. Someone who can publish on the channel can make nobody
 * hear anything, never make an instance believe a thing: a receiver re-reads what was
 * announced from storage.
 */

/** The HKDF info label: a key for channels, apart from every other use of the sealing key. */
const INFO = 'wakegate coordination channel v1';
/** A message longer than this is not one of ours (an id, a version, a MAC and an owner). */
const MAX_MESSAGE = 512;
const MAC_CHARS = 43; // 32 bytes in base64url
const ID = /^[A-Za-z0-9_-]{1,80}$/;
const VERSION = /^\d{1,16}$/;

/** The channel key, derived from the sealing key (storage.encryption_key or DATA_DIR/secret.key). */
export const channelKey = (sealingKey: Buffer): Buffer =>
  Buffer.from(hkdfSync('sha256', sealingKey, Buffer.alloc(0), INFO, 32));

const mac = (key: Buffer, channel: string, owner: string, body: string): string =>
  createHmac('sha256', key).update(`${channel}\n${owner}\n${body}`).digest('base64url');

export interface Announcement {
  id: string;
  version: number;
  /** This version revokes it (the receiver may refuse it at once, before storage answers). */
  revoked: boolean;
}

/** One announcement: `<owner> <mac> <id> <version>[ revoked]`, the MAC over channel, owner and the rest. */
export function signAnnouncement(key: Buffer, channel: string, owner: string, a: Announcement): string {
  const body = a.revoked ? `${a.id} ${a.version} revoked` : `${a.id} ${a.version}`;
  return `${owner} ${mac(key, channel, owner, body)} ${body}`;
}

/** The announcement a message carries if it passes its check on this channel; null for anything else. */
export function openAnnouncement(
  key: Buffer,
  channel: string,
  message: string,
): (Announcement & { owner: string }) | null {
  if (typeof message !== 'string' || message.length > MAX_MESSAGE) return null;
  const a = message.indexOf(' ');
  const b = message.indexOf(' ', a + 1);
  if (a <= 0 || b !== a + 1 + MAC_CHARS) return null;
  const owner = message.slice(0, a);
  const body = message.slice(b + 1);
  const [id, v, flag, ...rest] = body.split(' ');
  if (id === undefined || v === undefined || !ID.test(id) || !VERSION.test(v)) return null;
  if (rest.length > 0 || (flag !== undefined && flag !== 'revoked')) return null;
  const got = Buffer.from(message.slice(a + 1, b));
  const want = Buffer.from(mac(key, channel, owner, body));
  if (got.length !== want.length || !timingSafeEqual(got, want)) return null;
  return { owner, id, version: Number(v), revoked: flag === 'revoked' };
}
