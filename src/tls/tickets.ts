import { hkdfSync, randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { type Config, ConfigError } from '../config/index.js';
import { readBounded } from './files.js';

/**
 * Session-ticket keys: the same on every edge thread (a ticket made on one resumes
 * on another) and, from `ticket_keys_file`, on every instance of a fleet. Node takes
 * one 48-byte key at a time (tls.Server#setTicketKeys), so the key in force is a
 * function of the UTC day: every thread and instance computes the same one, and
 * they rotate together at midnight with nothing sent between them.
 */
export type TicketSource =
  /** One set per process: a secret made on the control thread; the day's key is derived from it. */
  | { kind: 'process'; secret: Uint8Array }
  /** A fleet's: the file's keys, the day's chosen in turn (day number modulo their count). */
  | { kind: 'file'; keys: Uint8Array[] };

export const TICKET_KEY_BYTES = 48;
const DAY_MS = 86_400_000;

export const dayOf = (ms: number): number => Math.floor(ms / DAY_MS);

export function processTickets(): TicketSource {
  return { kind: 'process', secret: new Uint8Array(randomBytes(32)) };
}

/**
 * A ticket keys file: 48 bytes per key, raw (`openssl rand 144 > tickets.key`) or
 * base64 text of the same bytes (`openssl rand -base64 144`); at least one key.
 */
export function readTicketFile(file: string, path: string): TicketSource {
  // Keys as base64 text with line breaks: well within 64 kB for any number worth rotating.
  const raw = readBounded(file, path, 64 * 1024);
  const text = raw.toString('latin1').replace(/\s+/g, '');
  // Base64 whenever the whole file reads as base64 of whole keys (`base64 -w0` of 144 bytes
  // is 192 characters, a multiple of 48 too); random raw bytes all in base64's alphabet
  // do not happen (a chance of 4^-48 per key).
  const decoded = /^[A-Za-z0-9+/]+=*$/.test(text) ? Buffer.from(text, 'base64') : null;
  const bytes = decoded !== null && decoded.length > 0 && decoded.length % TICKET_KEY_BYTES === 0 ? decoded : raw;
  if (bytes.length === 0 || bytes.length % TICKET_KEY_BYTES !== 0)
    throw new ConfigError(
      path,
      `${file} must hold one or more 48-byte keys (raw, or base64 of them), such as made by: openssl rand 144 > ${file}`,
    );
  const keys: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; i += TICKET_KEY_BYTES)
    keys.push(new Uint8Array(bytes.subarray(i, i + TICKET_KEY_BYTES)));
  return { kind: 'file', keys };
}

/** The 48-byte key in force on `day` (dayOf). */
export function ticketKeyFor(src: TicketSource, day: number): Buffer {
  if (src.kind === 'file') return Buffer.from(src.keys[day % src.keys.length] as Uint8Array);
  return Buffer.from(hkdfSync('sha256', src.secret, 'wakegate session tickets', `day ${day}`, TICKET_KEY_BYTES));
}

/**
 * The files of the config that must be private: each listener's private keys and ticket
 * keys file (`server.tls`, `server.ops_tls`, `management.tls`), each once, by its place.
 */
export function secretTlsFiles(cfg: Pick<Config, 'server' | 'management'>): { at: string; file: string | null }[] {
  const out: { at: string; file: string | null }[] = [];
  const seen = new Set<string>();
  const listeners = [
    ['server.tls', cfg.server.tls],
    ['server.ops_tls', cfg.server.ops_tls],
    ['management.tls', cfg.management.tls],
  ] as const;
  for (const [at, t] of listeners) {
    if (!t) continue;
    const files = [
      ...t.certificates.map((c, i) => ({ at: `${at}.certificates[${i}].key`, file: c.key })),
      { at: `${at}.ticket_keys_file`, file: t.ticket_keys_file },
    ];
    for (const f of files) {
      if (f.file === null || seen.has(f.file)) continue;
      seen.add(f.file);
      out.push(f);
    }
  }
  return out;
}

/**
 * The start's warnings: a ticket keys file (or a private key) that others than its owner may read. With
 * it, anyone can decrypt the tickets the gateway issues, and so the traffic of TLS 1.2
 * sessions resumed from them; it should be private as a certificate's key is (0600).
 */
export function exposedTicketFiles(files: readonly { at: string; file: string | null }[]): string[] {
  const out: string[] = [];
  for (const { at, file } of files) {
    if (file === null) continue;
    let mode: number;
    try {
      mode = statSync(file).mode;
    } catch {
      continue; // Not there: reading it says so, as a config error.
    }
    if ((mode & 0o077) !== 0)
      out.push(
        `${at}: ${file} may be read by others than its owner (mode ${(mode & 0o777).toString(8)}); anyone who reads it can ${at.endsWith('.key') ? 'pose as this listener' : 'decrypt resumed TLS sessions'}: chmod 600 it`,
      );
  }
  return out;
}
