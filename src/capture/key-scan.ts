import type { Transform } from 'node:stream';
import { KEY_SCAN_BUDGET } from './budget.js';
import { codingNamed, codingNames, decoderNamed } from './codings.js';
import { keyIn, keyInSpan, lastRead, readingsBudget, spellsStart } from './key-spelling.js';
import { narrowWide, unitOf, type Wide, wideOf } from './wide.js';

/**
 * A request body searched for gateway keys before the origin sees it, as the origin
 * would read it: its content codings undone (nested, within KEY_SCAN_BUDGET), UTF-16
 * and UTF-32 read by mark, declared charset or NUL pattern, and every spelling of
 * key-spelling.ts. A streamed body is read in windows that overlap by HOLD bytes
 * (more where a key's spelling may go on past what has come), and those bytes are
 * held back until the next window has been read: the origin never receives a key,
 * nor any part of one that the scan has not cleared.
 */

/** A request body refused before it reached the origin: the error's type, message and param. */
export class BodyRefused extends Error {
  constructor(
    readonly type: 'invalid_request' | 'payload_too_large',
    message: string,
    readonly param: string,
  ) {
    super(message);
  }
}

const keyInBody = () =>
  new BodyRefused(
    'invalid_request',
    'a gateway key was sent in the request body; the origin must never see it: send it in the Authorization header only, and revoke this one',
    'body',
  );
const overBudget = (why: string) =>
  new BodyRefused('payload_too_large', `the request body ${why}, past what the gateway reads for gateway keys`, 'body');
const unknownCoding = (ce: string) =>
  new BodyRefused(
    'invalid_request',
    `the gateway cannot read content coding "${ce}" to make sure no gateway key is in the body; send it as gzip, deflate or br`,
    'content-encoding',
  );
const corrupt = () =>
  new BodyRefused('invalid_request', 'the request body does not decode by its Content-Encoding', 'content-encoding');

/**
 * Bytes held back at the end of what has been read, at least: a key's spelling in
 * the usual lengths (137 characters, each up to 16 bytes: a percent-encoded escape,
 * nested; four times that in UTF-32) ends within them. Longer ones (references padded
 * with zeros, escapes nested deep) hold back more: from where they may start.
 */
export const HOLD = 16_384;
/** Fresh bytes gathered before a window is read, so a body sent a byte at a time costs no more. */
const MIN_SCAN = 16_384;
/**
 * What a body's scan may read in the other orders of layers (readingsBudget,
 * key-spelling.ts), where decoding through ends in spelled runs longer than a key: a few
 * MiB, and two bytes for each byte of the body. No text but such runs, spelled many ways
 * over, reaches it: past it, the body is refused (413), never forwarded unread.
 */
const READINGS_FREE = 4 << 20;
const READINGS_PER_BYTE = 2;

/**
 * Bytes after a place a spelling could start that are decoded and read at first: a
 * key in the usual spellings (137 characters of up to 16 bytes each, in UTF-32 read as
 * bytes) starting there ends within SPAN, so a read of 2 x SPAN sees any key starting
 * in its first SPAN bytes, and the next look starts SPAN further: each byte is decoded
 * about twice per pass, whatever the body holds (keyAround reads further, and the next
 * look starts further, where the spellings are longer).
 */
const SPAN = 137 * 16 * 4;
/** A key's characters and the one after it, that ends it. */
const KEY_AND_NEXT = 138;

const SVC = Buffer.from('svc');
const SHORT = Buffer.alloc(32);
/** Up to 32 bytes of the 128 from `i` with NULs left out (in one shared buffer). */
function narrowed(b: Buffer, i: number): Buffer {
  let n = 0;
  const end = Math.min(b.length, i + 128);
  for (let j = i; j < end && n < SHORT.length; j++) if (b[j] !== 0) SHORT[n++] = b[j] as number;
  return SHORT.subarray(0, n);
}
/** Where ASCII in UTF-16 or UTF-32 could start a key among other bytes. */
const WIDE_TOKENS = [
  Buffer.from('s\0v\0'),
  Buffer.from('s\0\0\0v'),
  Buffer.from('%\0'),
  Buffer.from('\\\0'),
  Buffer.from('&\0'),
];
/** The bytes that start an escape: `%`, `\\`, `&`. */
const LAYER_BYTES = [0x25, 0x5c, 0x26];

/**
 * The first place at or after `from` where a key's spelling could start: `svc`, or a
 * `%`, `\\` or `&` that may start a spelling of s, v or c (spellsStart, key-spelling.ts;
 * `cut`: the bytes are a short part of the text, what ends in them may go on).
 * Native searches only, a short look at each `%`, `\\` and `&` found (a JavaScript
 * loop over every byte cost ten times more on random bytes).
 */
function nextStart(b: Buffer, from: number, svcAt = b.indexOf(SVC, from), cut = false): number {
  let end = svcAt === -1 ? b.length : svcAt;
  for (const c of LAYER_BYTES)
    for (let i = nextByte(b, c, from); i !== -1 && i < end; i = nextByte(b, c, i + 1))
      if (spellsStart(b, i, cut)) {
        end = i;
        break;
      }
  return end === b.length && svcAt === -1 ? -1 : end;
}

/** The next `c` at or after `from`: the next 16 bytes looked at here (dense `%` cost a native call each), then natively. */
function nextByte(b: Buffer, c: number, from: number): number {
  const near = Math.min(b.length, from + 16);
  for (let j = from; j < near; j++) if (b[j] === c) return j;
  return near === b.length ? -1 : b.indexOf(c, near);
}

/** The next place at or after `from` where ASCII of UTF-16/32 text could start a key (`t` one of WIDE_TOKENS). */
function nextWide(b: Buffer, t: Buffer, from: number): number {
  for (let i = b.indexOf(t, from); i !== -1; i = b.indexOf(t, i + 1)) {
    // A short look first: random bytes hold `%\0` now and then, a key's start seldom.
    const n = narrowed(b, i);
    if (nextStart(n, 0, n.indexOf(SVC), true) !== -1) return i;
  }
  return -1;
}

/** Whether narrow bytes (one a character) could hold a key at all (refusedBody's first look). */
const mayHold = (b: Buffer): boolean => nextStart(b, 0) !== -1;

/** Where keyAround's look leaves the next one to start; where its bytes must be read again from (or the end: none). */
let lookNext = 0;
let readAgain = 0;

/**
 * Whether narrow bytes hold a key from the spelling that may start at `i`: W bytes
 * from it read (2 x SPAN at first; decoded only where they hold a `%`, `\\`, `&` or
 * NUL), so that every key starting before their middle is read whole and followed:
 * while the second half decodes to fewer characters than a key and the one after it
 * (spellings longer than the usual: references padded with zeros, escapes nested
 * deep), W doubles. The next look starts at that middle (lookNext). At the end of
 * what has come (`more`), the bytes from this look's start are read again with what
 * follows (readAgain), a key among them perhaps going on past the end. A key whose end
 * the cut may leave half read (an escape cut short: lastRead.undecided) is decided by a
 * read that goes further: W doubles, or the bytes are read again once more has come.
 */
function keyAround(b: Buffer, i: number, more: boolean): boolean {
  const from = Math.max(0, i - 64);
  for (let w = 2 * SPAN; ; w *= 2) {
    const mid = Math.min(b.length, i + w / 2);
    const end = Math.min(b.length, i + w);
    const cut = end < b.length || more;
    const plain = !(
      has(b, 0x25, from, end) ||
      has(b, 0x5c, from, end) ||
      has(b, 0x26, from, end) ||
      has(b, 0, from, end)
    );
    lastRead.undecided = false;
    if (plain ? keyIn(b.toString('latin1', from, end), cut) : keyInSpan(b, from, end, mid, cut)) return true;
    if (lastRead.undecided && end < b.length) continue;
    if (end === b.length) {
      lookNext = b.length;
      readAgain = more ? from : b.length;
      return false;
    }
    if ((plain ? end - mid : lastRead.after) >= KEY_AND_NEXT) {
      lookNext = mid;
      readAgain = b.length;
      return false;
    }
  }
}
const has = (b: Buffer, c: number, from: number, end: number): boolean => b.subarray(from, end).indexOf(c) !== -1;

/**
 * Whether narrow bytes (one a character) hold a key (-1), else from where they must
 * be read again with what follows (their length: nowhere); `more`: the body goes on
 * past them. Read around each place a spelling could start (keyAround), the next
 * look where that one leaves it, not decoded whole: a body of random bytes costs its
 * native searches, and a body of nothing but spellings (`%73%73…`) each byte decoded
 * about twice a pass.
 */
function holds(b: Buffer, more: boolean): number {
  // Where each search found its next place, kept while still ahead (a search that
  // found none is not run again): every search goes over the body once in all.
  let svcAt = -2;
  // ASCII of UTF-16/32 text among other bytes: read with its NULs left out, around each place it could start.
  const wideAt = b.indexOf(0) === -1 ? [] : WIDE_TOKENS.map(() => -2);
  for (let from = 0; ; ) {
    if (svcAt !== -1 && svcAt < from) svcAt = b.indexOf(SVC, from);
    let i = nextStart(b, from, svcAt);
    for (let k = 0; k < wideAt.length; k++) {
      let w = wideAt[k] as number;
      if (w !== -1 && w < from) wideAt[k] = w = nextWide(b, WIDE_TOKENS[k] as Buffer, from);
      if (w !== -1 && (i === -1 || w < i)) i = w;
    }
    if (i === -1) return b.length;
    if (keyAround(b, i, more)) return -1;
    if (lookNext >= b.length) return readAgain;
    from = lookNext;
  }
}

/** Plain (decoded) body bytes read as they come, in windows overlapping by HOLD. */
class PlainScan {
  private tail: Buffer = Buffer.alloc(0);
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Plain bytes read through. */
  scanned = 0;
  private wide: Wide | null | undefined = undefined;
  /** Bytes left to read in other orders of layers (readingsBudget). */
  private readingsLeft = READINGS_FREE;

  constructor(private readonly ct: string) {}

  /** Plain bytes read through that no key can still reach: the origin may have them. */
  get cleared(): number {
    return this.scanned - this.tail.length;
  }

  /** Throws BodyRefused when a key is found. */
  push(c: Buffer): void {
    if (c.length === 0) return;
    this.pending.push(c);
    this.pendingBytes += c.length;
    // A long tail (a spelling that may go on) is read again only once as many fresh bytes have come.
    if (this.pendingBytes >= Math.max(MIN_SCAN, this.tail.length)) this.scan(false);
  }

  end(): void {
    this.scan(true);
  }

  private scan(final: boolean): void {
    let fresh =
      this.pending.length === 1 ? (this.pending[0] as Buffer) : Buffer.concat(this.pending, this.pendingBytes);
    if (this.wide === undefined) this.wide = wideOf(fresh, this.ct, true);
    const unit = this.wide === null ? 1 : unitOf(this.wide);
    // A code unit cut by the chunk's end waits for the rest.
    const keep = final ? 0 : fresh.length % unit;
    this.pending = keep === 0 ? [] : [fresh.subarray(fresh.length - keep)];
    this.pendingBytes = keep;
    fresh = fresh.subarray(0, fresh.length - keep);
    const win = this.tail.length === 0 ? fresh : Buffer.concat([this.tail, fresh]);
    this.readingsLeft += READINGS_PER_BYTE * fresh.length;
    readingsBudget.left = this.readingsLeft;
    readingsBudget.over = false;
    let again: number;
    try {
      again = holds(this.wide === null ? win : narrowWide(win, this.wide), !final);
    } finally {
      this.readingsLeft = readingsBudget.left;
      readingsBudget.left = Number.POSITIVE_INFINITY;
    }
    if (again < 0)
      throw readingsBudget.over ? overBudget('spells runs longer than a key in too many ways') : keyInBody();
    this.scanned += fresh.length;
    // A copy: the window itself may be a whole large body. Narrowed, `again` counts units.
    const unitsAgain = this.wide === null ? again : again * unit;
    this.tail = Buffer.from(win.subarray(Math.max(0, Math.min(win.length - HOLD, unitsAgain))));
  }
}

/**
 * Why a whole (buffered) request body must not reach the origin, or null: a key in
 * it, a coding the gateway cannot read, or one that decodes past its budget.
 */
export function refusedBody(body: Buffer, contentType = '', contentEncoding?: string): BodyRefused | null {
  const names = codingNames(contentEncoding);
  if (names === null) return unknownCoding(contentEncoding ?? '');
  let plain = body;
  const b = KEY_SCAN_BUDGET;
  for (const name of names) {
    try {
      plain = codingNamed(name).decode(plain, b.maxDecoded);
    } catch (e) {
      if ((e as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE')
        return overBudget(`decodes to more than ${b.maxDecoded} bytes`);
      return corrupt();
    }
    if (plain.length > b.freeBytes && plain.length > b.maxRatio * body.length)
      return overBudget(`is compressed more than ${b.maxRatio} to 1`);
  }
  // The usual body: text with no spelling's start (binary bodies, with NULs, go to the scan's one pass).
  if (names.length === 0 && body.indexOf(0) === -1 && !mayHold(body)) return null;
  const scan = new PlainScan(contentType.toLowerCase());
  try {
    scan.push(plain);
    scan.end();
  } catch (e) {
    if (e instanceof BodyRefused) return e;
    throw e;
  }
  return null;
}

/** One streaming decoder, fed a chunk at a time and flushed, so what a chunk decodes to is known with it. */
class StreamDecoder {
  private out: Buffer[] = [];
  private failed: Error | null = null;
  private waiting: ((e: Error) => void) | null = null;

  constructor(private readonly z: Transform) {
    z.on('data', (c: Buffer) => this.out.push(c));
    z.on('error', (e: Error) => {
      this.failed = e;
      this.waiting?.(e);
    });
  }

  write(c: Buffer): Promise<Buffer[]> {
    return new Promise((resolve, reject) => {
      if (this.failed !== null) return reject(corrupt());
      this.waiting = () => reject(corrupt());
      this.z.write(c);
      (this.z as unknown as { flush(cb: () => void): void }).flush(() => {
        this.waiting = null;
        if (this.failed !== null) reject(corrupt());
        else resolve(this.out.splice(0));
      });
    });
  }

  end(): Promise<Buffer[]> {
    return new Promise((resolve, reject) => {
      if (this.failed !== null) return reject(corrupt());
      this.waiting = () => reject(corrupt());
      this.z.once('end', () => resolve(this.out.splice(0)));
      this.z.end();
    });
  }

  close(): void {
    this.z.destroy();
  }
}

/**
 * A streamed request body's gate: each chunk from the client goes in, and what may
 * go on to the origin comes out: the chunks whose decoded text lies more than HOLD
 * bytes before the end of what has been read. Throws BodyRefused (a key, a coding
 * the gateway cannot read, a body past its budget).
 */
export class KeyGate {
  private readonly plain: PlainScan;
  private readonly decoders: StreamDecoder[];
  private held: Buffer[] = [];
  /** Plain bytes decoded through the end of each held chunk. */
  private through: number[] = [];
  private heldBytes = 0;
  private wire = 0;
  private decoded = 0;

  constructor(contentType = '', contentEncoding?: string) {
    const names = codingNames(contentEncoding);
    if (names === null) throw unknownCoding(contentEncoding ?? '');
    this.decoders = names.map((n) => new StreamDecoder(decoderNamed(n)));
    this.plain = new PlainScan(contentType.toLowerCase());
  }

  async push(c: Buffer): Promise<Buffer[]> {
    this.wire += c.length;
    this.decode(this.decoders.length === 0 ? [c] : await this.through_(c));
    this.held.push(c);
    this.through.push(this.decoded);
    this.heldBytes += c.length;
    if (this.heldBytes > KEY_SCAN_BUDGET.maxHeld) throw overBudget('holds too many bytes that decode to nothing');
    return this.release(this.plain.cleared);
  }

  async end(): Promise<Buffer[]> {
    let out: Buffer[] = [];
    for (const d of this.decoders) {
      const next: Buffer[] = [];
      for (const c of out) next.push(...(await d.write(c)));
      next.push(...(await d.end()));
      out = next;
    }
    this.decode(out);
    this.plain.end();
    return this.release(Number.POSITIVE_INFINITY);
  }

  close(): void {
    for (const d of this.decoders) d.close();
  }

  /** A wire chunk through every decoder in turn. */
  private async through_(c: Buffer): Promise<Buffer[]> {
    let out = [c];
    for (const d of this.decoders) {
      const next: Buffer[] = [];
      for (const x of out) next.push(...(await d.write(x)));
      out = next;
    }
    return out;
  }

  private decode(out: Buffer[]): void {
    const b = KEY_SCAN_BUDGET;
    for (const o of out) {
      this.decoded += o.length;
      // The budget is a compressed body's: a plain one streams as long as it is.
      if (this.decoders.length > 0) {
        if (this.decoded > b.maxDecoded) throw overBudget(`decodes to more than ${b.maxDecoded} bytes`);
        if (this.decoded > b.freeBytes && this.decoded > b.maxRatio * this.wire)
          throw overBudget(`is compressed more than ${b.maxRatio} to 1`);
      }
      this.plain.push(o);
    }
  }

  private release(upTo: number): Buffer[] {
    let n = 0;
    while (n < this.held.length && (this.through[n] as number) <= upTo) n++;
    if (n === 0) return NONE;
    const out = this.held.splice(0, n);
    this.through.splice(0, n);
    for (const c of out) this.heldBytes -= c.length;
    return out;
  }
}
const NONE: Buffer[] = [];

/** A streamed body as it may go to the origin: each chunk through a KeyGate; throws BodyRefused. */
export async function* scannedBody(src: AsyncIterable<Buffer>, gate: KeyGate): AsyncGenerator<Buffer> {
  try {
    for await (const c of src) for (const o of await gate.push(c)) yield o;
    for (const o of await gate.end()) yield o;
  } finally {
    gate.close();
  }
}
