import { type IncomingMessage, request } from 'node:http';
import zlib from 'node:zlib';
import { startServer, type TestServer } from './origin.js';

/** What a recording origin received of one request (also when the gateway cut it off). */
export interface Received {
  url: string;
  headers: string[];
  body: Buffer;
  /** The body ended before it was whole (the gateway aborted the request). */
  cut: boolean;
}

/** An origin that records every request it receives, whole or cut off, and answers 200 `ok`. */
export async function recordingOrigin(): Promise<{ origin: TestServer; seen: Received[] }> {
  const seen: Received[] = [];
  const origin = await startServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    let done = false;
    const record = (cut: boolean) => {
      if (done) return;
      done = true;
      seen.push({ url: req.url ?? '', headers: req.rawHeaders, body: Buffer.concat(chunks), cut });
    };
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      record(false);
      res.end('ok');
    });
    req.on('close', () => record(!req.complete));
  });
  return { origin, seen };
}

/** Undoes a content coding the way a server does, reading as far as a cut-off stream goes. */
function undo(b: Buffer, coding: string): Buffer {
  const flush = { finishFlush: zlib.constants.Z_SYNC_FLUSH };
  try {
    if (coding === 'gzip') return zlib.gunzipSync(b, flush);
    if (coding === 'deflate') return zlib.inflateSync(b, flush);
    if (coding === 'br') return zlib.brotliDecompressSync(b, { finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH });
  } catch {
    return b;
  }
  return b;
}

const utf32 = (b: Buffer, le: boolean): string => {
  let s = '';
  for (let i = 0; i + 4 <= b.length; i += 4) {
    const c = le ? b.readUInt32LE(i) : b.readUInt32BE(i);
    s += c <= 0x10ffff ? String.fromCodePoint(c) : '\ufffd';
  }
  return s;
};

/** Percent-decoding as decodeURIComponent does, byte by byte, tolerant of stray `%`. */
const unpercent = (s: string): string =>
  s.replace(/%([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
/** JSON's and YAML's escapes as their parsers read them. */
const unescapes = (s: string): string =>
  s.replace(/\\(?:u([0-9A-Fa-f]{4})|x([0-9A-Fa-f]{2})|U([0-9A-Fa-f]{8})|(\\))/g, (_m, u, x, w, bs) =>
    bs !== undefined ? '\\' : String.fromCodePoint(Number.parseInt(u ?? x ?? w, 16)),
  );

/**
 * Every reading of bytes an application could make: the content codings undone,
 * then as UTF-8, UTF-16 and UTF-32 either way round, then with percent-encodings and
 * escapes undone, up to three times over.
 */
export function appReadings(bytes: Buffer, contentEncoding = ''): string[] {
  let b = bytes;
  for (const c of contentEncoding
    .split(',')
    .map((x) => x.trim().toLowerCase())
    .reverse())
    if (c) b = undo(b, c);
  const texts = [
    b.toString('latin1'),
    b.toString('utf8'),
    b.toString('utf16le'),
    b.subarray(1).toString('utf16le'),
    utf32(b, true),
    utf32(b, false),
  ];
  const out: string[] = [];
  for (let t of texts) {
    for (let r = 0; r < 4; r++) {
      out.push(t);
      t = unescapes(unpercent(t));
    }
  }
  return out;
}

/** Whether anything an origin received reveals the secret part of a key, whole or a 12-character piece of it. */
export function reveals(r: Received, secret: string): boolean {
  const piece = secret.slice(secret.length - 43, secret.length - 31);
  const ce = headerOf(r.headers, 'content-encoding') ?? '';
  const texts = [
    ...appReadings(Buffer.from(`${r.url}\n${r.headers.join('\n')}`, 'latin1')),
    ...appReadings(r.body, ce),
  ];
  return texts.some((t) => t.includes(piece));
}

export const headerOf = (raw: string[], name: string): string | undefined => {
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.toLowerCase() === name) return raw[i + 1];
  return undefined;
};

/**
 * Sends a body in the given pieces (chunked, each piece its own write, the next
 * only once the last has gone), and reads the answer: its status, body and wake id.
 */
export function sendInPieces(
  url: string,
  pieces: Buffer[],
  headers: Record<string, string>,
): Promise<{ status: number; body: string; wake: string }> {
  return new Promise((resolve, reject) => {
    // A connection of its own (agent: false): a kept one may be closed by the gateway's
    // keep-alive timeout just as it is reused, a reset no POST survives (a loaded host's late timers).
    const post = { method: 'POST', agent: false, headers: { ...headers, 'transfer-encoding': 'chunked' } };
    const req = request(url, post, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).toString(),
          wake: String(res.headers['x-wake-id'] ?? ''),
        }),
      );
    });
    // The gateway may answer (and stop reading) before the last piece: the answer still comes.
    req.on('error', (e) => reject(e));
    let i = 0;
    const next = () => {
      while (i < pieces.length) {
        const p = pieces[i++] as Buffer;
        if (!req.write(p)) return void req.once('drain', next);
      }
      req.end();
    };
    next();
  });
}
