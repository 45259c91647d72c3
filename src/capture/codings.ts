import type { Transform } from 'node:stream';
import * as zlib from 'node:zlib';
import {
  brotliCompressSync,
  brotliDecompressSync,
  deflateSync,
  gunzipSync,
  gzipSync,
  inflateSync,
  constants as zlibConstants,
} from 'node:zlib';

/**
 * The content codings (Content-Encoding) a captured body is decoded from, to be
 * redacted or compared, and encoded again with, at the fastest level: brotli's
 * default (quality 11) took 875 ms for 1 MiB of JSON on the main thread, quality 1
 * takes 1.5 ms; gzip 4.7 ms at its default, 1.7 at level 1.
 */
export interface Coding {
  /** The bytes decoded; throws when they are corrupt or decode to more than `max`. */
  decode(b: Buffer, max: number): Buffer;
  encode(b: Buffer): Buffer;
}

const FAST_BROTLI = { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 1 } };
const GZIP: Coding = {
  decode: (b, max) => gunzipSync(b, { maxOutputLength: max }),
  encode: (b) => gzipSync(b, { level: 1 }),
};
const CODINGS: Record<string, Coding> = {
  gzip: GZIP,
  'x-gzip': GZIP,
  deflate: {
    decode: (b, max) => inflateSync(b, { maxOutputLength: max }),
    encode: (b) => deflateSync(b, { level: 1 }),
  },
  br: {
    decode: (b, max) => brotliDecompressSync(b, { maxOutputLength: max }),
    encode: (b) => brotliCompressSync(b, FAST_BROTLI),
  },
};

/** zstd, where this Node has it (22.15 and later). */
const zstd = zlib as unknown as {
  zstdDecompressSync?: (b: Buffer, o: { maxOutputLength: number }) => Buffer;
  zstdCompressSync?: (b: Buffer) => Buffer;
  createZstdDecompress?: () => Transform;
};
if (zstd.zstdDecompressSync !== undefined && zstd.zstdCompressSync !== undefined) {
  const dec = zstd.zstdDecompressSync;
  const enc = zstd.zstdCompressSync;
  CODINGS.zstd = { decode: (b, max) => dec(b, { maxOutputLength: max }), encode: (b) => enc(b) };
}

/** Streaming decoders of the same codings, for a request body scanned as it passes. */
const DECODERS: Record<string, () => Transform> = {
  gzip: () => zlib.createGunzip(),
  'x-gzip': () => zlib.createGunzip(),
  deflate: () => zlib.createInflate(),
  br: () => zlib.createBrotliDecompress(),
};
if (zstd.createZstdDecompress !== undefined) DECODERS.zstd = zstd.createZstdDecompress;

/**
 * A Content-Encoding list as the coding names to undo, first to last (`gzip, br`
 * was gzipped, then brotli'd: br is undone first); [] for none, null when one is not known.
 */
export function codingNames(contentEncoding: string | undefined): string[] | null {
  if (contentEncoding === undefined || contentEncoding === '') return EMPTY;
  const out: string[] = [];
  for (const part of contentEncoding.split(',')) {
    const name = part.trim().toLowerCase();
    if (name === '' || name === 'identity') continue;
    // Own names only: `constructor` or `__proto__` from a client is not a coding.
    if (!Object.hasOwn(CODINGS, name) || !Object.hasOwn(DECODERS, name)) return null;
    out.unshift(name);
  }
  return out;
}
const EMPTY: string[] = [];

/** The coding of a name codingNames gave. */
export const codingNamed = (name: string): Coding => CODINGS[name] as Coding;

/** A streaming decoder of a name codingNames gave. */
export const decoderNamed = (name: string): Transform => (DECODERS[name] as () => Transform)();

/** A Content-Encoding value as a coding: null for none (absent, empty, identity), undefined for one not known. */
export function codingOf(contentEncoding: string | undefined): Coding | null | undefined {
  if (contentEncoding === undefined) return null;
  const name = contentEncoding.trim().toLowerCase();
  if (name === '' || name === 'identity') return null;
  return Object.hasOwn(CODINGS, name) ? CODINGS[name] : undefined;
}
