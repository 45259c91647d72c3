/** The shapes of a wake's detail, as stored and shown (the capture layer fills them). */

/** A body as it is stored: text when it is UTF-8, else base64. */
export interface StoredBody {
  body: string;
  /** Bytes of the whole body, kept or not. */
  bytes: number;
  truncated: boolean;
  encoding: 'utf8' | 'base64';
}

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
