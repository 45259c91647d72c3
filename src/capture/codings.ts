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

/** A Content-Encoding value as a coding: null for none (absent, empty, identity), undefined for one not known. */
export function codingOf(contentEncoding: string | undefined): Coding | null | undefined {
  if (contentEncoding === undefined) return null;
  const name = contentEncoding.trim().toLowerCase();
  return name === '' || name === 'identity' ? null : CODINGS[name];
}
