/**
 * UTF-16 and UTF-32 bodies, told by a byte-order mark, a declared charset or the
 * pattern of NUL bytes that ASCII text leaves in them, so that what an application
 * decodes from them is read too (a key scanned for, a named field redacted).
 */
export type Wide = 'utf16le' | 'utf16be' | 'utf32le' | 'utf32be';

/** Bytes of one code unit. */
export const unitOf = (w: Wide): number => (w === 'utf16le' || w === 'utf16be' ? 2 : 4);

/**
 * The wide encoding of a body, or null for a narrow one (UTF-8, Latin-1, binary).
 * `sniff`: a byte-order mark and the NUL pattern count whatever the type says (as a
 * key scan must); else only for text, JSON, YAML, forms and untyped bodies (bytes
 * of an image may start with FF FE by chance).
 */
export function wideOf(b: Buffer, ct: string, sniff = false): Wide | null {
  const declared = DECLARED.exec(ct);
  if (declared !== null) {
    const bom = bomOf(b);
    const bits = declared[1] === '32' ? 'utf32' : 'utf16';
    if (bom?.startsWith(bits)) return bom;
    const order = declared[2]?.toLowerCase();
    if (order === 'le' || order === 'be') return `${bits}${order}` as Wide;
    return patternOf(b) ?? (`${bits}be` as Wide);
  }
  if (!sniff && !textual(ct)) return null;
  return bomOf(b) ?? patternOf(b);
}
const DECLARED = /charset\s*=\s*"?(?:utf-?(16|32)|ucs-?(?:2|4))(le|be)?/i;

/** Types read as text: the NUL pattern and a byte-order mark count for them. */
export const textual = (ct: string): boolean =>
  ct === '' || ct.startsWith('text/') || /json|yaml|toml|x-www-form-urlencoded|properties|env/.test(ct);

function bomOf(b: Buffer): Wide | null {
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xfe && b[2] === 0 && b[3] === 0) return 'utf32le';
  if (b.length >= 4 && b[0] === 0 && b[1] === 0 && b[2] === 0xfe && b[3] === 0xff) return 'utf32be';
  if (b.length >= 2 && b[0] === 0xff && b[1] === 0xfe) return 'utf16le';
  if (b.length >= 2 && b[0] === 0xfe && b[1] === 0xff) return 'utf16be';
  return null;
}

/** Length of the byte-order mark a wide body starts with (0 for none). */
export function bomLength(b: Buffer, w: Wide): number {
  const bom = bomOf(b);
  return bom === w ? unitOf(w) : 0;
}

/**
 * The encoding ASCII-heavy wide text shows by its NULs in its first 256 bytes: in
 * UTF-32 three of each four bytes, in UTF-16 one of each two, always on the same side.
 */
function patternOf(b: Buffer): Wide | null {
  const n = Math.min(b.length, 256) & ~3;
  if (n < 4) return null;
  const zeros = [0, 0, 0, 0];
  for (let i = 0; i < n; i++) if (b[i] === 0) (zeros[i & 3] as number)++;
  const q = n / 4;
  const [z0, z1, z2, z3] = zeros as [number, number, number, number];
  const most = (z: number) => z >= q * 0.75;
  const few = (z: number) => z <= q * 0.1;
  if (z3 === q && most(z2) && most(z1) && few(z0)) return 'utf32le';
  if (z0 === q && most(z1) && most(z2) && few(z3)) return 'utf32be';
  if (most(z1) && most(z3) && few(z0) && few(z2)) return 'utf16le';
  if (most(z0) && most(z2) && few(z1) && few(z3)) return 'utf16be';
  return null;
}

/** Wide bytes (whole units; a byte-order mark included) as a JS string. */
export function decodeWide(b: Buffer, w: Wide): string {
  const unit = unitOf(w);
  const whole = b.subarray(0, b.length - (b.length % unit));
  if (w === 'utf16le') return whole.toString('utf16le');
  if (w === 'utf16be') return Buffer.from(whole).swap16().toString('utf16le');
  const codes: number[] = [];
  let out = '';
  for (let i = 0; i < whole.length; i += 4) {
    const c = w === 'utf32le' ? whole.readUInt32LE(i) : whole.readUInt32BE(i);
    codes.push(c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff) ? 0xfffd : c);
    if (codes.length === 4096) out += String.fromCodePoint(...codes.splice(0));
  }
  return out + String.fromCodePoint(...codes);
}

/** A JS string in a wide encoding (the inverse of decodeWide). */
export function encodeWide(s: string, w: Wide): Buffer {
  if (w === 'utf16le') return Buffer.from(s, 'utf16le');
  if (w === 'utf16be') return Buffer.from(s, 'utf16le').swap16();
  const out = Buffer.alloc(s.length * 4);
  let n = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0) as number;
    if (w === 'utf32le') out.writeUInt32LE(c, n);
    else out.writeUInt32BE(c, n);
    n += 4;
  }
  return out.subarray(0, n);
}

/**
 * Wide bytes narrowed to one byte a character, for the key scan: a character past
 * Latin-1 becomes 0xFF (which ends a key, as the character itself would).
 */
export function narrowWide(b: Buffer, w: Wide): Buffer {
  const unit = unitOf(w);
  const n = Math.floor(b.length / unit);
  const out = Buffer.allocUnsafe(n);
  for (let i = 0, j = 0; i < n; i++, j += unit) {
    let c: number;
    if (w === 'utf16le') c = (b[j] as number) | ((b[j + 1] as number) << 8);
    else if (w === 'utf16be') c = ((b[j] as number) << 8) | (b[j + 1] as number);
    else if (w === 'utf32le') c = b.readUInt32LE(j);
    else c = b.readUInt32BE(j);
    out[i] = Math.min(c, 0xff);
  }
  return out;
}
