import { createRequire } from 'node:module';
import net from 'node:net';
import type { Readable } from 'node:stream';
import tls from 'node:tls';
import type { Origin } from '../admission/routes.js';
import { connectOptions } from '../tls/origin-trust.js';

/**
 * The proxy's client to its origins: HTTP/1.1 over keep-alive sockets, responses parsed
 * by llhttp (Node's own parser, the one node:http uses), a request head written as one
 * string. It does what the proxy needs of undici's Pool.dispatch and no more, which
 * measured up to 26% less CPU a request for the whole gateway (bench/RESULTS.md). Replays keep
 * undici (upstream.ts); so does a Node whose parser cannot be loaded (`originParser`).
 */

/** What a forwarded request tells its client of the exchange (the proxy's Forwarding). */
export interface OriginHandler {
  /** The request is on a connection: `abort` cuts it off (and calls onError once). */
  onConnect(abort: (err?: Error) => void): void;
  /** The answer's status and raw name/value pairs; `resume` reads on after onData said stop. */
  onHeaders(status: number, raw: string[], resume: () => void, statusText: string): boolean;
  /** A piece of the answer's body; false: the client is behind, stop reading until resume. */
  onData(chunk: Buffer): boolean;
  /** The answer ended; its trailer fields as raw pairs (null: none). */
  onComplete(trailers: string[] | null): void;
  /** The exchange failed, once, with `code` saying how (OriginError's, or the socket's). */
  onError(err: Error & { code?: string }): void;
}

export interface OriginRequest {
  method: string;
  /** The request target as sent (path and query). */
  path: string;
  /** Name, value, ...: Host among them; no hop-by-hop field. */
  headers: string[];
  /** null: no body; a Buffer: its length is sent; a stream: sent as it comes (chunked unless Content-Length is given). */
  body: Buffer | Readable | null;
  /** Longest wait for the answer's header block once the request is written (routes[].timeout_ms). */
  headersTimeout: number;
  /**
   * A streamed body sent chunked: the trailer fields (name, value, ...) to write after its
   * last chunk, asked for once the body has ended (the client's come only then).
   */
  trailers?: () => readonly string[];
}

/** An exchange's failure the proxy tells apart (handler.ts), coded as undici codes them. */
export class OriginError extends Error {
  constructor(
    readonly code:
      | 'UND_ERR_HEADERS_TIMEOUT'
      | 'UND_ERR_HEADERS_OVERFLOW'
      | 'UND_ERR_INVALID_ARG'
      | 'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH'
      | 'UND_ERR_SOCKET',
    message: string,
  ) {
    super(message);
  }
}

interface Parser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenient: number): void;
  execute(data: Buffer): number | Error;
  finish(): number | Error | undefined;
  close(): void;
  [k: number]: unknown;
}
interface ParserClass {
  new (): Parser;
  RESPONSE: number;
  kOnHeaders: number;
  kOnHeadersComplete: number;
  kOnBody: number;
  kOnMessageComplete: number;
  kLenientChunkedLength?: number;
}

/**
 * Node's llhttp binding, as node:http's own client uses it; null where this Node no
 * longer offers it (`node:_http_common` is deprecated in documentation only, DEP0199),
 * and the proxy then forwards on undici.
 */
export const originParser: ParserClass | null = (() => {
  try {
    const p = createRequire(import.meta.url)('_http_common').HTTPParser as ParserClass | undefined;
    if (typeof p !== 'function' || typeof p.kOnHeadersComplete !== 'number') return null;
    new p().initialize(p.RESPONSE, {}, 16_384, 0);
    return p;
  } catch {
    return null;
  }
})();

/**
 * llhttp's one leniency the client takes: a Content-Length field in an answer's trailer
 * section, which RFC 9110 §6.5.1 says is not to be used (the proxy drops it: trailers.ts),
 * fails the whole answer otherwise, llhttp reading it as a Content-Length beside the
 * head's Transfer-Encoding. The flag allows that pair in the head too (its one other use,
 * for requests only, a response parser never meets): onHeadersComplete refuses such a
 * head itself, as llhttp did (framingClash).
 */
const LENIENT = originParser?.kLenientChunkedLength ?? 0;

/** A field value Node's own client would refuse: a control character (CR, LF, NUL among them) or past Latin-1. */
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A request target's characters (undici's rule): no control character, space or past Latin-1. */
const BAD_PATH = /[^\u0021-\u00ff]/;
/** Methods that carry no body by their nature (no `Content-Length: 0` is added for them; undici's rule). */
const NO_BODY_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'CONNECT']);
/** Methods whose request may be sent again when a kept connection turns out closed before any answer (RFC 9110 §9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);
/** How often idle connections are looked at, and after how many looks one is closed (3 to 3.5 s idle). */
const SWEEP_MS = 500;
const IDLE_SWEEPS = 7;
/** Keep-alive connections to one origin. Connections are not bounded here: the proxy's Slots bound requests in flight. */
export class OriginPool {
  readonly idle: OriginConnection[] = [];
  destroyed = false;
  readonly host: string;
  readonly port: number;
  readonly secure: boolean;
  readonly tlsOptions: tls.ConnectionOptions | null;
  /** How long a new connection may take to be up (routes[].connect_timeout_ms). */
  readonly connectTimeoutMs: number;
  /** The last TLS session an https origin gave, offered by the next connection (a shorter handshake). */
  tlsSession: Buffer | null = null;
  /** Looks at idle connections taken so far (a connection idle for IDLE_SWEEPS of them is closed). */
  sweeps = 0;
  private readonly sweeper: NodeJS.Timeout;
  private readonly open = new Set<OriginConnection>();

  constructor(
    o: Origin,
    readonly P: ParserClass,
    readonly maxHeaderSize: number,
  ) {
    this.secure = o.protocol === 'https:';
    this.connectTimeoutMs = o.connectTimeoutMs;
    const u = new URL(`${o.protocol}//${o.host}`);
    this.host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
    this.port = Number(u.port || (this.secure ? 443 : 80));
    const trust = connectOptions(o.trust);
    this.tlsOptions = this.secure
      ? {
          host: this.host,
          port: this.port,
          ALPNProtocols: ['http/1.1'],
          ...(net.isIP(this.host) === 0 ? { servername: this.host } : {}),
          ...trust,
        }
      : null;
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS).unref();
  }

  /** Sends `r` on an idle connection (the one used last) or a new one; `h` hears how it goes. */
  dispatch(r: OriginRequest, h: OriginHandler): void {
    if (this.destroyed) return h.onError(new OriginError('UND_ERR_SOCKET', 'the pool is closed'));
    const head = requestHead(r);
    if (head === null)
      return h.onError(new OriginError('UND_ERR_INVALID_ARG', 'a request field the origin connection refuses'));
    const body = r.body;
    // A body of another length than announced would be read by the origin as the start of another request.
    if (declared !== -1 && Buffer.isBuffer(body) && body.length !== declared) return h.onError(MISMATCH());
    this.send(head, r, h, declared, false);
  }

  /**
   * `length`: the Content-Length announced (-1: none); `retried`: this is the one new try
   * of a request a kept connection lost before any answer.
   */
  send(head: string, r: OriginRequest, h: OriginHandler, length: number, retried: boolean): void {
    // The one new try goes on a new connection: another kept one may be as stale.
    let c = retried ? undefined : this.idle.pop();
    if (c === undefined) {
      c = new OriginConnection(this);
      this.open.add(c);
    }
    c.send(head, r, h, length, retried);
  }

  /** A connection ended: it is never used again. */
  gone(c: OriginConnection): void {
    this.open.delete(c);
    const i = this.idle.lastIndexOf(c);
    if (i !== -1) this.idle.splice(i, 1);
  }

  private sweep(): void {
    const n = ++this.sweeps;
    // Those idle too long (by the origin's own word, or 3 to 3.5 s) are closed.
    for (let i = 0; i < this.idle.length; ) {
      const c = this.idle[i] as OriginConnection;
      if (n - c.idleSince >= c.idleLimit)
        c.close(); // leaves the list (gone)
      else i++;
    }
  }

  async destroy(): Promise<void> {
    this.destroyed = true;
    clearInterval(this.sweeper);
    for (const c of [...this.open]) c.shutdown();
    this.open.clear();
    this.idle.length = 0;
  }
}

const NO_FIELDS: readonly string[] = [];

/**
 * A chunked body's end: the last chunk and its trailer section (RFC 9112 §7.1.2). A field
 * that could not be written as it is (as requestHead's) fails the request before the
 * origin has its end.
 */
function lastChunk(trailers: readonly string[]): string {
  let out = '0\r\n';
  for (let i = 0; i < trailers.length; i += 2) {
    const name = trailers[i] as string;
    const value = trailers[i + 1] as string;
    if (!TOKEN.test(name) || BAD_VALUE.test(value))
      throw new OriginError('UND_ERR_INVALID_ARG', 'a trailer field the origin connection refuses');
    out += `${name}: ${value}\r\n`;
  }
  return `${out}\r\n`;
}

const MISMATCH = () =>
  new OriginError('UND_ERR_REQ_CONTENT_LENGTH_MISMATCH', 'the body is not of the length its Content-Length says');

/** The Content-Length the last requestHead found among the fields (-1: none). */
let declared = -1;

/** The request line and header block, or null when a field could not be sent as it is. */
function requestHead(r: OriginRequest): string | null {
  if (!TOKEN.test(r.method) || BAD_PATH.test(r.path)) return null;
  let head = `${r.method} ${r.path} HTTP/1.1\r\n`;
  const hs = r.headers;
  declared = -1;
  for (let i = 0; i < hs.length; i += 2) {
    const name = hs[i] as string;
    const value = hs[i + 1] as string;
    if (!TOKEN.test(name) || BAD_VALUE.test(value)) return null;
    if (name.length === 14 && name.toLowerCase() === 'content-length') {
      // One length, in digits only (Node's parser took no other from a client; this is a second look).
      if (declared !== -1 || !/^\d{1,15}$/.test(value)) return null;
      declared = Number(value);
    }
    head += `${name}: ${value}\r\n`;
  }
  const body = r.body;
  if (body === null) {
    // No body: one announced as empty stays announced, any other length is refused; a
    // method that carries a body says it is empty (some origins answer 411 otherwise).
    if (declared > 0) return null;
    if (declared === -1 && !NO_BODY_METHODS.has(r.method)) head += 'content-length: 0\r\n';
  } else if (Buffer.isBuffer(body)) {
    if (declared === -1) head += `content-length: ${body.length}\r\n`;
  } else if (declared === -1) head += 'transfer-encoding: chunked\r\n';
  return `${head}connection: keep-alive\r\n\r\n`;
}

enum State {
  /** Connecting, or waiting for a request. */
  Idle,
  /** A request written (or being written), its answer not yet ended. */
  Busy,
  /** Closed: never used again. */
  Closed,
}

/** One keep-alive connection: at most one request at a time (no pipelining). */
class OriginConnection {
  private readonly sock: net.Socket;
  private readonly parser: Parser;
  private state = State.Idle;
  private h: OriginHandler | null = null;
  private r: OriginRequest | null = null;
  private head = '';
  /** The sweep count when this connection last went idle, and how many sweeps it may stay so. */
  idleSince = 0;
  idleLimit = IDLE_SWEEPS;
  /** Answers it has carried: a connection that carried one may have been closed by the origin since. */
  private served = 0;
  private retried = false;
  /** The request's announced Content-Length (-1: none). */
  private length = -1;
  /** Bytes of the current answer seen (none: the request may be sent again elsewhere). */
  private answered = false;
  /** The answer's header block came. */
  private headed = false;
  private skipBody = false;
  private keepAlive = false;
  /** The request's body is not all written (a stream): the connection cannot carry another. */
  private writing = false;
  /** The answer ended within the chunk being parsed: the connection is reusable once that parse returns clean. */
  private ended = false;
  private pending: string[] = [];
  private timer: NodeJS.Timeout | null = null;
  private timerMs = 0;
  private connected = false;

  constructor(private readonly pool: OriginPool) {
    const P = pool.P;
    if (pool.tlsOptions !== null) {
      const t = tls.connect(
        pool.tlsSession === null ? pool.tlsOptions : { ...pool.tlsOptions, session: pool.tlsSession },
      );
      t.on('session', (session: Buffer) => {
        pool.tlsSession = session;
      });
      this.sock = t;
    } else this.sock = net.connect({ host: pool.host, port: pool.port });
    this.sock.setNoDelay(true);
    this.sock.setTimeout(pool.connectTimeoutMs);
    const parser = new P();
    this.parser = parser;
    parser[P.kOnHeaders] = this.onHeaderLines;
    parser[P.kOnHeadersComplete] = this.onHeadersComplete;
    parser[P.kOnBody] = this.onBody;
    parser[P.kOnMessageComplete] = this.onMessageComplete;
    this.sock.once(pool.secure ? 'secureConnect' : 'connect', this.onConnected);
    this.sock.on('timeout', this.onConnectTimeout);
    this.sock.on('data', this.onSocketData);
    this.sock.on('end', this.onEnd);
    this.sock.on('error', this.onSocketError);
    this.sock.on('close', this.onSocketClose);
  }

  send(head: string, r: OriginRequest, h: OriginHandler, length: number, retried: boolean): void {
    this.state = State.Busy;
    this.length = length;
    this.h = h;
    this.r = r;
    this.head = head;
    this.retried = retried;
    this.answered = false;
    this.headed = false;
    this.ended = false;
    this.skipBody = r.method === 'HEAD';
    this.pending.length = 0;
    this.parser.initialize(this.pool.P.RESPONSE, {}, this.pool.maxHeaderSize, LENIENT);
    // timeout_ms is the origin's time to answer: a new connection's starts once it is connected.
    if (this.connected) this.armHeadersTimer(r.headersTimeout);
    h.onConnect(this.abort);
    // Aborted at once (its client already gone).
    if (this.h !== h) return;
    const body = r.body;
    if (body === null) this.sock.write(head, 'latin1');
    else if (Buffer.isBuffer(body)) {
      this.sock.cork();
      this.sock.write(head, 'latin1');
      if (body.length > 0) this.sock.write(body);
      this.sock.uncork();
    } else {
      this.sock.write(head, 'latin1');
      void this.pump(body, h, length, r.trailers);
    }
  }

  /**
   * A streamed body, at the socket's pace: chunked (then `trailers` after it), or of the
   * `length` announced (else the request fails).
   */
  private async pump(
    body: Readable,
    h: OriginHandler,
    length: number,
    trailers: (() => readonly string[]) | undefined,
  ): Promise<void> {
    this.writing = true;
    const sock = this.sock;
    const chunked = length === -1;
    let sent = 0;
    try {
      for await (const c of body) {
        const chunk = c as Buffer;
        if (this.h !== h || sock.destroyed) break;
        if (chunk.length === 0) continue;
        sent += chunk.length;
        if (!chunked && sent > length) throw MISMATCH();
        let ok: boolean;
        if (chunked) {
          sock.cork();
          sock.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
          sock.write(chunk);
          ok = sock.write('\r\n', 'latin1');
          sock.uncork();
        } else ok = sock.write(chunk);
        if (!ok && !(await drained(sock))) break;
      }
      if (this.h === h && !sock.destroyed) {
        if (chunked) sock.write(lastChunk(trailers?.() ?? NO_FIELDS), 'latin1');
        else if (sent !== length) throw MISMATCH();
        // The wait for the answer counts from here.
        this.timer?.refresh();
      }
      this.writing = false;
    } catch (e) {
      // The body could not be read (a gateway key found in it, the client gone): the request is cut off.
      body.destroy();
      if (this.h === h) this.fail(e as Error);
      else this.close();
    }
  }

  private armHeadersTimer(ms: number): void {
    if (this.timer !== null && this.timerMs === ms) this.timer.refresh();
    else {
      if (this.timer !== null) clearTimeout(this.timer);
      this.timerMs = ms;
      this.timer = setTimeout(this.onHeadersTimeout, ms).unref();
    }
  }

  /**
   * timeout_ms counts from the request's end: while its body still streams at its
   * client's pace (the origin reading it) the wait goes on; an origin that stops
   * reading the body, or answers nothing once it has all of it, times out (undici's rule).
   */
  private readonly onHeadersTimeout = (): void => {
    if (this.state !== State.Busy || this.headed) return;
    if (this.writing && !this.sock.writableNeedDrain) {
      this.timer?.refresh();
      return;
    }
    this.fail(new OriginError('UND_ERR_HEADERS_TIMEOUT', 'the origin sent no answer within routes[].timeout_ms'));
  };

  private readonly onConnected = (): void => {
    this.connected = true;
    this.sock.setTimeout(0);
    const r = this.r;
    if (this.state === State.Busy && r !== null && !this.headed) this.armHeadersTimer(r.headersTimeout);
  };

  private readonly onConnectTimeout = (): void => {
    if (this.connected) return;
    const e = new Error('connect timeout') as Error & { code: string };
    e.code = 'UND_ERR_CONNECT_TIMEOUT';
    this.sock.destroy(e);
  };

  /** Cuts the exchange off (its client went away): the handler hears it once, the connection is closed. */
  readonly abort = (err?: Error): void => {
    if (this.h === null) return;
    this.fail(err ?? new Error('aborted'));
  };

  private readonly onHeaderLines = (headers: string[]): void => {
    for (const v of headers) this.pending.push(v);
  };

  private readonly onHeadersComplete = (
    _major: number,
    _minor: number,
    headers: string[] | undefined,
    _method: unknown,
    _url: unknown,
    status: number,
    statusText: string,
    upgrade: boolean,
    keepAlive: boolean,
  ): number => {
    const h = this.h;
    // An answer no request asked for (an origin that answers twice): the connection is not to be trusted.
    if (h === null || this.headed) {
      this.close();
      return 1;
    }
    let raw = headers;
    if (raw === undefined) {
      raw = this.pending;
      this.pending = [];
    }
    // Transfer-Encoding and Content-Length in one head: a smuggling shape (RFC 9112 §6.3),
    // refused as llhttp refuses it without LENIENT.
    if (LENIENT !== 0 && framingClash(raw)) {
      this.fail(
        new OriginError('UND_ERR_SOCKET', "the origin's answer could not be parsed (HPE_UNEXPECTED_CONTENT_LENGTH)"),
      );
      return 1;
    }
    if (status < 200) {
      // 1xx information (100 Continue, 103 Early Hints) is not passed on; the answer follows.
      if (status === 101 || upgrade) {
        this.fail(new OriginError('UND_ERR_SOCKET', 'the origin switched protocols unasked'));
        return 1;
      }
      this.pending.length = 0;
      return 1;
    }
    this.headed = true;
    this.keepAlive = keepAlive;
    this.idleLimit = IDLE_SWEEPS;
    if (keepAlive) this.readKeepAlive(raw);
    if (!h.onHeaders(status, raw, this.resume, statusText)) this.sock.pause();
    // A handler that failed the exchange within onHeaders has left it.
    return this.skipBody ? 1 : 0;
  };

  /**
   * An origin's `Keep-Alive: timeout=N` (seconds): the connection is closed here a second
   * before the origin would close it (undici's rule), or not kept when that leaves no time.
   */
  private readKeepAlive(raw: string[]): void {
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i] as string;
      if (name.length !== 10 || name.toLowerCase() !== 'keep-alive') continue;
      const m = /(?:^|[,;\s])timeout\s*=\s*(\d+)/i.exec(raw[i + 1] as string);
      if (m === null) return;
      const sweeps = Math.floor((Number(m[1]) * 1000 - 1000) / SWEEP_MS);
      if (sweeps < 1) this.keepAlive = false;
      else this.idleLimit = Math.min(IDLE_SWEEPS, sweeps);
      return;
    }
  }

  private readonly onBody = (chunk: Buffer): void => {
    const h = this.h;
    if (h !== null && !h.onData(chunk)) this.sock.pause();
  };

  private readonly onMessageComplete = (): void => {
    const h = this.h;
    // A 1xx's end: its answer is still to come.
    if (!this.headed) return;
    if (h === null) return;
    const trailers = this.pending.length > 0 ? this.pending : null;
    this.pending = [];
    this.h = null;
    this.r = null;
    this.head = '';
    this.ended = true;
    this.served++;
    h.onComplete(trailers);
  };

  private readonly resume = (): void => {
    if (this.state === State.Busy) this.sock.resume();
  };

  private readonly onSocketData = (d: Buffer): void => {
    if (this.state !== State.Busy) {
      // Bytes nobody asked for: the connection is not to be trusted.
      this.close();
      return;
    }
    this.answered = true;
    let r: number | Error;
    try {
      r = this.parser.execute(d);
    } catch (e) {
      // Thrown by the handler within a callback (the client's answer could not be written): this exchange fails, not the process.
      return this.fail(e as Error);
    }
    if (r instanceof Error) return this.parseFailed(r as Error & { code?: string });
    if (this.ended && this.state === State.Busy) this.afterAnswer();
  };

  /** The answer ended cleanly: the connection carries the next request, or closes. */
  private afterAnswer(): void {
    this.ended = false;
    if (!this.keepAlive || this.pool.destroyed) return this.close();
    // The body is still streaming to an origin that answered early: close once it ends.
    if (this.writing) {
      this.close();
      return;
    }
    this.release();
  }

  private release(): void {
    this.state = State.Idle;
    this.idleSince = this.pool.sweeps;
    this.sock.resume();
    this.pool.idle.push(this);
  }

  private parseFailed(e: Error & { code?: string }): void {
    if (this.h === null) return this.close();
    // A Content-Length llhttp will not take once the head is in can only be in the trailer
    // section (the head's own are checked before it completes, and framingClash refuses one
    // beside Transfer-Encoding): a list (`5, 5`), repeated, or no number. The body has all
    // come (trailers follow the last chunk), and RFC 9110 §6.5.1 says not to use the field:
    // the answer ends here, its trailer section let go (the parser stopped inside it), and
    // the connection is not used again.
    if (this.headed && (e.code === 'HPE_UNEXPECTED_CONTENT_LENGTH' || e.code === 'HPE_INVALID_CONTENT_LENGTH')) {
      this.keepAlive = false;
      this.pending = [];
      this.onMessageComplete();
      if (this.ended && this.state === State.Busy) this.afterAnswer();
      return;
    }
    if (e.code === 'HPE_HEADER_OVERFLOW')
      return this.fail(new OriginError('UND_ERR_HEADERS_OVERFLOW', 'the answer header block is too large'));
    const err = new OriginError('UND_ERR_SOCKET', `the origin's answer could not be parsed (${e.code ?? 'error'})`);
    this.fail(err);
  }

  private readonly onEnd = (): void => {
    // An answer delimited by the connection's end ends now.
    if (this.state === State.Busy && this.h !== null) {
      let r: number | Error | undefined;
      try {
        r = this.parser.finish();
      } catch (e) {
        return this.fail(e as Error);
      }
      if (r instanceof Error) return this.parseFailed(r as Error & { code?: string });
    }
    if (this.h !== null) this.lost(new OriginError('UND_ERR_SOCKET', 'other side closed'));
    else this.close();
  };

  private readonly onSocketError = (e: Error): void => {
    this.lost(e);
  };

  private readonly onSocketClose = (): void => {
    this.lost(new OriginError('UND_ERR_SOCKET', 'other side closed'));
  };

  /**
   * The connection went away. A request sent on a kept connection that the origin had
   * closed, before any answer, is sent once more on a new connection when that is safe
   * (an idempotent method, a body still held); else the exchange fails.
   */
  private lost(e: Error): void {
    const h = this.h;
    const r = this.r;
    if (h !== null && r !== null && this.served > 0 && !this.answered && !this.retried && replayable(r)) {
      this.h = null;
      this.r = null;
      this.close();
      this.pool.send(this.head, r, h, this.length, true);
      return;
    }
    this.fail(e);
  }

  private fail(e: Error): void {
    const h = this.h;
    this.h = null;
    this.r = null;
    this.close();
    h?.onError(e);
  }

  /** The pool closes: an exchange in flight fails, an idle connection closes. */
  shutdown(): void {
    if (this.h !== null)
      this.fail(new OriginError('UND_ERR_SOCKET', 'the gateway is closing its connections to the origin'));
    else this.close();
  }

  /**
   * Never used again. The parser is closed on the next turn (it may be mid-parse here), as
   * node:http closes its own: a parser not closed is never collected, nor what it reaches.
   */
  close(): void {
    if (this.state === State.Closed) return;
    this.state = State.Closed;
    if (this.timer !== null) clearTimeout(this.timer);
    this.pool.gone(this);
    this.sock.destroy();
    setImmediate(closeParser, this.parser);
  }
}

const closeParser = (p: Parser): void => p.close();

/** A head holding both a Transfer-Encoding and a Content-Length field (names as llhttp matches them: any case). */
function framingClash(raw: readonly string[]): boolean {
  let te = false;
  let cl = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length === 17 && name.toLowerCase() === 'transfer-encoding') te = true;
    else if (name.length === 14 && name.toLowerCase() === 'content-length') cl = true;
  }
  return te && cl;
}

const replayable = (r: OriginRequest): boolean =>
  IDEMPOTENT.has(r.method) && (r.body === null || Buffer.isBuffer(r.body));

/** Resolves true once the socket drains, false if it closes first. */
function drained(sock: net.Socket): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (ok: boolean) => () => {
      sock.off('drain', onDrain);
      sock.off('close', onClose);
      resolve(ok);
    };
    const onDrain = done(true);
    const onClose = done(false);
    sock.once('drain', onDrain);
    sock.once('close', onClose);
  });
}
