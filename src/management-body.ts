import { type IncomingHttpHeaders, IncomingMessage, type ServerResponse } from 'node:http';
import { errorBody } from './errors.js';

/** How much of a /v2 body the edge reads, and for how long, before it is handed on. */
export interface BodyLimits {
  /** server.api_body_limit_bytes: past it 413 payload_too_large. */
  maxBytes: number;
  /** server.api_body_timeout_ms: a body not whole by then gets 408. */
  timeoutMs: number;
}

/** The limits of a /v2 body on the main listener: server.api_body_limit_bytes and server.api_body_timeout_ms. */
export const apiBodyLimits = (s: {
  readonly api_body_limit_bytes: number;
  readonly api_body_timeout_ms: number;
}): BodyLimits => ({ maxBytes: s.api_body_limit_bytes, timeoutMs: s.api_body_timeout_ms });

/**
 * Why the edge did not read a /v2 call's body: past `maxBytes` (announced or sent), or
 * not whole within `timeoutMs`. Told to the API with the call, which answers it (413,
 * 408) once the call has passed admission, as the management listener answers a body
 * past its limit: a refused key is 401 (or 429, past its address's `unauthenticated`
 * bucket) whatever the size of its body, and an admitted call is charged before its
 * body is refused.
 */
export type BodyRefusalKind = 'too-large' | 'too-slow';

/** The answer to a body the edge refused (errorBody's type, message and param `body`). */
export interface BodyRefusal {
  readonly status: 408 | 413;
  readonly type: 'payload_too_large' | 'invalid_request';
  readonly message: string;
}

/** Where a /v2 call the edge refused the body of carries why (withBody; the internal listener). */
export const BODY_REFUSED: unique symbol = Symbol('wakegate.body-refused');
export type WithBodyRefused = { [BODY_REFUSED]?: BodyRefusal };

/** The answer to a body refused for `kind` under `limits`. */
export function bodyRefusal(kind: BodyRefusalKind, limits: BodyLimits): BodyRefusal {
  return kind === 'too-large'
    ? { status: 413, type: 'payload_too_large', message: tooLarge(limits.maxBytes) }
    : // 408 has no type of its own: it is the invalid_request of a body that never came (as for Node's own 408).
      {
        status: 408,
        type: 'invalid_request',
        message: `the request body did not arrive within server.api_body_timeout_ms (${limits.timeoutMs} ms)`,
      };
}

/** A refusal kind as it crosses the handover (a header's value), or null for anything else. */
export const refusalKind = (v: unknown): BodyRefusalKind | null => (v === 'too-large' || v === 'too-slow' ? v : null);

export interface ReadWholeOptions {
  /**
   * Past the size or the time: the body is not read on, and `refused` says why (the
   * caller hands the call on without it, to be answered after admission). Absent, the
   * edge answers 413 or 408 itself.
   */
  refused?: (kind: BodyRefusalKind) => void;
  /** Called once, just before the body is read (Expect: 100-continue's invitation), never for a body refused by its length. */
  invite?: () => void;
}

/**
 * Reads a /v2 call's body whole on the edge, then calls `done` with it (null when the
 * request has none). Only a whole body is handed to the control thread (or, with one
 * thread, to the API), so a client sending slowly holds nothing an operator's call
 * needs. Past the size or the time the body is not read on: `o.refused` is told, or
 * without it the edge answers itself and closes the connection.
 */
export function readWhole(
  req: IncomingMessage,
  res: ServerResponse,
  limits: BodyLimits,
  done: (body: Buffer | null) => void,
  o: ReadWholeOptions = {},
): void {
  const length = req.headers['content-length'];
  if (length === undefined && req.headers['transfer-encoding'] === undefined) return done(null);
  const refuse = (kind: BodyRefusalKind) => (o.refused ? o.refused(kind) : answer(req, res, bodyRefusal(kind, limits)));
  if (Number(length) > limits.maxBytes) return refuse('too-large');
  o.invite?.();
  const chunks: Buffer[] = [];
  let n = 0;
  const stop = () => {
    clearTimeout(timer);
    req.off('data', onData);
    req.off('end', onEnd);
    res.off('close', stop);
  };
  const onData = (c: Buffer) => {
    n += c.length;
    if (n <= limits.maxBytes) return void chunks.push(c);
    stop();
    refuse('too-large');
  };
  const onEnd = () => {
    stop();
    done(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, n));
  };
  const timer = setTimeout(() => {
    stop();
    refuse('too-slow');
  }, limits.timeoutMs);
  req.on('data', onData);
  req.on('end', onEnd);
  res.on('close', stop);
}

const tooLarge = (max: number) => `the request body is larger than server.api_body_limit_bytes (${max} bytes)`;

/** Answers with the gateway's error body (no wake) and lets the connection go (the rest of the body is not read). */
function answer(req: IncomingMessage, res: ServerResponse, r: BodyRefusal): void {
  if (res.headersSent || res.destroyed) return void res.destroy();
  const body = JSON.stringify(errorBody(r.type, null, r.message, 'body'));
  res.shouldKeepAlive = false;
  res.writeHead(r.status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    connection: 'close',
  });
  res.end(body, () => req.socket.destroy());
}

/**
 * The request as the API reads it, with its body already read: the same method, URL,
 * headers and socket, and a stream that yields `body` and ends; or, when the edge
 * refused the body, none and why (`refused`: the API answers it after admission).
 */
export function withBody(
  req: IncomingMessage,
  body: Buffer | null,
  refused: BodyRefusal | null = null,
): IncomingMessage {
  const r = new IncomingMessage(req.socket);
  if (refused !== null) (r as WithBodyRefused)[BODY_REFUSED] = refused;
  r.method = req.method;
  r.url = req.url;
  // The length is what was read (a chunked body included); the rest of the headers as sent.
  const headers: IncomingHttpHeaders = { ...req.headers };
  delete headers['transfer-encoding'];
  if (body !== null || headers['content-length'] !== undefined) headers['content-length'] = String(body?.length ?? 0);
  r.headers = headers;
  r.rawHeaders = req.rawHeaders;
  r.httpVersion = req.httpVersion;
  r.httpVersionMajor = req.httpVersionMajor;
  r.httpVersionMinor = req.httpVersionMinor;
  // Nothing more comes from the socket for this request.
  r._read = NOOP;
  if (body !== null) r.push(body);
  r.push(null);
  r.complete = true;
  return r;
}

const NOOP = (): void => {};
