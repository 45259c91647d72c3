/** The shapes of a wake's detail, as stored and shown (the capture layer fills them). */

/** A body as it is stored: text when it is UTF-8, else base64. */
export interface StoredBody {
  body: string;
  /** Bytes of the whole body, kept or not. */
  bytes: number;
  truncated: boolean;
  /** `omitted`: only the size and SHA-256 were kept (body is `{"sha256", "reason"}`). */
  encoding: BodyEncoding;
}

/** How a body is kept: UTF-8 text, base64 of bytes, or omitted (size and SHA-256 only). */
export type BodyEncoding = 'utf8' | 'base64' | 'omitted';

export interface DiffEntry {
  before: unknown;
  after: unknown;
}

/** How a replay's answer differs from the original's (see replay/diff.ts). */
export interface WakeDiff {
  identical: boolean;
  status: DiffEntry | null;
  headers: ({ name: string } & DiffEntry)[];
  body: ({ path: string } & DiffEntry)[];
  ignored: string[];
}

/** The exchange a wake keeps beyond its summary, redacted. */
export interface WakeDetail {
  query: string;
  request_headers: [string, string][] | null;
  response_headers: [string, string][] | null;
  request_body: StoredBody | null;
  response_body: StoredBody | null;
  /** On a replay's wake: how its answer differs from the original's. */
  diff: WakeDiff | null;
}

/** A body as captured, on its way to the log: its bytes (UTF-8 text, or base64 text), never made a JS string. */
export interface CapturedBody {
  data: Buffer;
  /** Bytes of the whole body, kept or not. */
  bytes: number;
  truncated: boolean;
  encoding: BodyEncoding;
}

/** The exchange as the capture layer holds it until it is written (bodies as bytes). */
export type CapturedDetail = Omit<WakeDetail, 'request_body' | 'response_body'> & {
  request_body: CapturedBody | null;
  response_body: CapturedBody | null;
};

/** A captured body as it will read back from storage. */
export const storedBody = (b: CapturedBody | null): StoredBody | null =>
  b === null
    ? null
    : {
        body: b.data.toString(b.encoding === 'base64' ? 'latin1' : 'utf8'),
        bytes: b.bytes,
        truncated: b.truncated,
        encoding: b.encoding,
      };

/** A body from its four stored columns: text, bytes, state (-1 none kept, 0 whole, 1 cut), encoding. */
export const bodyFrom = (
  body: string,
  bytes: number | string,
  state: number | string,
  encoding: string,
): StoredBody | null =>
  Number(state) < 0
    ? null
    : {
        body,
        bytes: Number(bytes),
        truncated: Number(state) === 1,
        encoding: encoding === 'base64' || encoding === 'omitted' ? encoding : 'utf8',
      };
