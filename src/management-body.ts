import { type IncomingHttpHeaders, IncomingMessage, type ServerResponse } from 'node:http';
import { errorBody } from './errors.js';

/** How much of a /v2 body the edge reads, and for how long, before it is handed on. */
export interface BodyLimits {
  /** server.api_body_limit_bytes: past it 413 payload_too_large. */
  maxBytes: number;
  /** server.api_body_timeout_ms: a body not whole by then gets 408. */
  timeoutMs: number;
}

/**
 * Reads a /v2 call's body whole on the edge, then calls `done` with it (null when the
 * request has none). Only a whole body is handed to the control thread (or, with one
 * thread, to the API), so a client sending slowly holds nothing an operator's call
 * needs. Past the size or the time the edge answers itself and closes the connection.
 */
export function readWhole(
  req: IncomingMessage,
  res: ServerResponse,
  limits: BodyLimits,
  done: (body: Buffer | null) => void,
  record: RecordRefusal | null = null,
): void {
  const length = req.headers['content-length'];
  if (length === undefined && req.headers['transfer-encoding'] === undefined) return done(null);
  const refuse = (status: 408 | 413, message: string) => answer(req, res, status, message, record);
  if (Number(length) > limits.maxBytes) return refuse(413, tooLarge(limits.maxBytes));
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
    refuse(413, tooLarge(limits.maxBytes));
  };
  const onEnd = () => {
    stop();
    done(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, n));
  };
  const timer = setTimeout(() => {
    stop();
    const msg = `the request body did not arrive within server.api_body_timeout_ms (${limits.timeoutMs} ms)`;
    refuse(408, msg);
  }, limits.timeoutMs);
  req.on('data', onData);
  req.on('end', onEnd);
  res.on('close', stop);
}

const tooLarge = (max: number) => `the request body is larger than server.api_body_limit_bytes (${max} bytes)`;

/**
 * Begins the wake of a /v2 call the edge refuses itself (route v2, as the API records
 * the calls it answers) and returns its id; the wake is finished, with its status and
 * error type, when the answer's connection closes.
 */
export type RecordRefusal = (req: IncomingMessage, res: ServerResponse, status: number, errorType: string) => string;

/** Answers with the gateway's error body and lets the connection go (the rest of the body is not read). */
function answer(
  req: IncomingMessage,
  res: ServerResponse,
  status: 408 | 413,
  message: string,
  record: RecordRefusal | null,
): void {
  if (res.headersSent || res.destroyed) return void res.destroy();
  // 408 has no type of its own: it is the invalid_request of a body that never came (as for Node's own 408).
  const type = status === 413 ? 'payload_too_large' : 'invalid_request';
  const wakeId = record === null ? null : record(req, res, status, type);
  const body = JSON.stringify(errorBody(type, wakeId, message, 'body'));
  res.shouldKeepAlive = false;
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    connection: 'close',
    ...(wakeId === null ? {} : { 'x-wake-id': wakeId }),
  });
  res.end(body, () => req.socket.destroy());
}

/**
 * The request as the API reads it, with its body already read: the same method, URL,
 * headers and socket, and a stream that yields `body` and ends.
 */
export function withBody(req: IncomingMessage, body: Buffer | null): IncomingMessage {
  const r = new IncomingMessage(req.socket);
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
