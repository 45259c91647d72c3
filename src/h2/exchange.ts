import http2, {
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type ServerHttp2Stream,
  type ServerStreamResponseOptions,
} from 'node:http2';
import type { Socket } from 'node:net';
import { errorBody } from '../errors.js';
import { type ClientRequest, type ClientResponse, h2Carries } from '../proxy/client.js';
import { addFields, flatten, originHeaders, trailerFields } from './fields.js';
import type { FlushSweep } from './flush-sweep.js';
import { headerListSize } from './guards.js';
import { stopUpload } from './stop-upload.js';

const { NGHTTP2_INTERNAL_ERROR, NGHTTP2_NO_ERROR: NO_ERROR } = http2.constants;
const NONE: string[] = [];
/** No trailer fields: Node's sendTrailers then ends the stream with an empty DATA frame with END_STREAM. */
const NO_TRAILERS: OutgoingHttpHeaders = Object.freeze({});

/**
 * An HTTP/2 request as the proxy reads requests (proxy/client.ts): its headers are
 * the stream's, `:authority` becoming Host (RFC 9113 §8.3.1) and split Cookie fields
 * joined (§8.2.3) for the HTTP/1.1 origin; its body is the stream's readable side.
 */
export class H2Request implements ClientRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: string[];
  rawTrailers: string[] = NONE;
  readonly httpVersionMajor = 2;
  readonly httpVersionMinor = 0;

  constructor(
    private readonly stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    raw: string[],
    readonly socket: Socket,
    /** server.http2_limits.max_header_list_bytes, which a trailer section is held to as well. */
    maxListBytes: number,
    /** Cuts the request (its trailer section was past maxListBytes). */
    cut: () => void,
  ) {
    this.method = headers[':method'] as string;
    this.url = headers[':path'] as string;
    this.headers = headers;
    this.rawHeaders = originHeaders(raw);
    // Node keeps the first of repeated Content-Encoding fields here; the origin gets them all and
    // decodes by each (`identity` then `gzip` is gzip): joined, as HTTP/1.1's headers object has
    // them, so the key scan reads the body as the origin will.
    if (headers['content-encoding'] !== undefined) headers['content-encoding'] = joined(raw, 'content-encoding');
    if (!stream.endAfterHeaders) {
      // A body with no Content-Length is still a body (HTTP/2 frames it): the proxy
      // reads one when either framing header is there, and only ever forwards rawHeaders.
      if (headers['content-length'] === undefined) headers['transfer-encoding'] = 'chunked';
      // SETTINGS_MAX_HEADER_LIST_SIZE bounds a trailer section too (RFC 9113 §6.5.2, §8.1), and Node
      // holds a client to it only once acknowledged (guards.ts): a section past it is never passed on,
      // and the request is cut rather than forwarded without what the client sent after its body.
      stream.once('trailers', (t: IncomingHttpHeaders, _flags: number, rawT?: string[]) => {
        const fields = flatten(t);
        if (headerListSize(rawT ?? fields) > maxListBytes) return cut();
        this.rawTrailers = fields;
      });
    }
  }

  get complete(): boolean {
    return this.stream.readableEnded;
  }

  on(event: 'data' | 'end', listener: (chunk: Buffer) => void): this {
    this.stream.on(event, listener);
    return this;
  }

  off(event: 'data' | 'end', listener: (chunk: Buffer) => void): this {
    this.stream.off(event, listener);
    return this;
  }

  pause(): this {
    this.stream.pause();
    return this;
  }

  resume(): this {
    this.stream.resume();
    return this;
  }

  iterator(options: { destroyOnReturn: boolean }): AsyncIterableIterator<unknown> {
    return this.stream.iterator(options);
  }
}

/** Every value of the field `name` (lower case, as HTTP/2 names are) in `raw`, joined by commas. */
function joined(raw: readonly string[], name: string): string {
  let all = '';
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i] !== name) continue;
    all = all === '' ? (raw[i + 1] as string) : `${all}, ${raw[i + 1]}`;
  }
  return all;
}

/**
 * An HTTP/2 response as the proxy writes responses: writeHead becomes one HEADERS
 * frame (connection-specific fields dropped), the body DATA frames under the
 * stream's flow control (write returns false when the client's window is spent and
 * Node holds the rest: the proxy then paces the origin exactly as for a slow
 * HTTP/1.1 reader). Trailer fields follow any answer that may carry them (see writeHead).
 */
export class H2Response implements ClientResponse {
  sendDate = true;
  /** HTTP/1.1's; a draining HTTP/2 session says GOAWAY instead. */
  shouldKeepAlive = true;
  chunkedEncoding = false;
  /** The gateway cut the stream itself (not a client reset). */
  cut = false;
  private trailers: OutgoingHttpHeaders | null = null;
  private extra: string[] | null = null;
  /**
   * The proxy's close listeners, called by the edge's one listener on the stream
   * (closed()) rather than each added to the stream: a listener added to a Node stream
   * costs a 'newListener' event, and a second one an array, on every request.
   */
  private onClose: (() => void) | null = null;
  private moreOnClose: (() => void)[] | null = null;
  /** Body bytes the answer's Content-Length still announces (-1: not known, or trailers follow). */
  private left = -1;
  /** The answer was ended (end(), or write with the last bytes Content-Length announced) on a stream that could still carry it. */
  private ended = false;

  /** The proxy's own send timer is on the stream (an answer streamed to a client falling behind): the sweep need not look. */
  private timed = false;
  /**
   * The origin's answer had a status HTTP/2 cannot carry and the gateway answered 502 in its
   * place: the origin's body and trailers are read (its connection freed) and dropped.
   */
  private refused = false;

  constructor(
    readonly stream: ServerHttp2Stream,
    private readonly head: boolean,
    /** Ended answers whose bytes the client's flow control holds back are cut by it (null: none). */
    private readonly sweep: FlushSweep | null = null,
  ) {}

  get headersSent(): boolean {
    return this.stream.headersSent;
  }

  get destroyed(): boolean {
    return this.stream.destroyed;
  }

  /**
   * As HTTP/1.1's: the answer was ended (end(), or write with its last bytes) and all of
   * it handed on. The stream's own says true too when a client reset closed it unanswered
   * (Node ends its writable side then), which recorded the wake as done (not 499) and
   * left the origin's request running.
   */
  get writableFinished(): boolean {
    if (!this.ended) return false;
    const s = this.stream;
    // Node closes (and destroys) a stream once both sides' END_STREAM went, which can come
    // before its 'finish' (a request with a body): ended and closed without an error is
    // whole. Not also "nothing left buffered": on Node 20 an answer past the stream's
    // window still counts bytes the client has had (134,631 of a 200,000-byte answer
    // read whole), and every such POST was recorded 499. A client's reset with NO_ERROR
    // after the answer ended thus reads as whole on every Node, as it did on later ones;
    // any other reset code (CANCEL, what clients send) is a 499.
    return s.writableFinished || (s.closed && s.rstCode === NO_ERROR);
  }

  /** The gateway ended the answer while the stream could carry it (whatever the client did after). */
  get answered(): boolean {
    return this.ended;
  }

  get writableLength(): number {
    return this.stream.writableLength;
  }

  /** A field added to whatever the answer is (tests' x-wakegate-thread). */
  setHeader(name: string, value: string): void {
    this.extra ??= [];
    this.extra.push(name, value);
  }

  writeHead(status: number, a: string | string[], b?: string[]): this {
    // Reset by the client meanwhile: nothing to answer (Node would throw, where HTTP/1.1 writes into the void).
    if (this.stream.destroyed || this.stream.closed) return this;
    const raw = typeof a === 'string' ? (b ?? NONE) : a;
    // HTTP/1.1 lets an origin say 600-999 (or a final 1xx); HTTP/2 only 200-599 (Node throws
    // ERR_HTTP2_STATUS_INVALID, out of an event listener on some paths): a gateway error instead.
    if (!h2Carries(status)) return this.refuse(status, raw);
    const h: OutgoingHttpHeaders = { ':status': status };
    let announced = addFields(h, raw);
    if (this.extra !== null) announced = addFields(h, this.extra) || announced;
    const length = h['content-length'];
    // Trailers can follow only if the stream waits for them (waitForTrailers), so only an answer
    // that may carry them pays for that: one of no announced length (the origin's chunked answer,
    // which may send trailer fields it never named in a Trailer field, RFC 9110 §6.5), or one
    // that announced them. Never a HEAD's, a 204's, a 205's or a 304's (no content can follow).
    this.chunkedEncoding = !this.head && (length === undefined || announced) && mayHaveContent(status);
    // sendDate (true unless set otherwise): Node adds its Date only when the fields hold none
    // (RFC 9110 §6.6.1), so an origin's passes as it came and an answer without one gets the gateway's.
    this.stream.respond(h, RESPOND[(this.sendDate ? 1 : 0) + (this.chunkedEncoding ? 2 : 0)]);
    if (this.chunkedEncoding) this.stream.once('wantTrailers', () => this.sendTrailers());
    else if (typeof length === 'string' && !this.head) this.left = Number(length);
    return this;
  }

  /**
   * Answers 502 upstream_unavailable (the gateway's error body, its wake id taken from the
   * fields the proxy passes) in place of an origin answer whose `status` HTTP/2 cannot carry.
   */
  private refuse(status: number, raw: readonly string[]): this {
    let wakeId: string | null = null;
    for (let i = 0; i < raw.length; i += 2) if (raw[i] === 'x-wake-id') wakeId = raw[i + 1] as string;
    const msg = `the origin answered with status ${status}, which HTTP/2 cannot carry (200-599)`;
    const body = JSON.stringify(errorBody('upstream_unavailable', wakeId, msg));
    const h: OutgoingHttpHeaders = {
      ':status': 502,
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
    };
    if (wakeId !== null) h['x-wake-id'] = wakeId;
    if (this.extra !== null) addFields(h, this.extra);
    this.refused = true;
    this.chunkedEncoding = false;
    this.stream.respond(h, RESPOND[1]);
    this.ended = this.delivers();
    this.endUpload();
    if (this.head) this.stream.end();
    else this.stream.end(body);
    this.flushWithin();
    return this;
  }

  writeContinue(): void {
    if (this.stream.destroyed || this.stream.closed || this.stream.headersSent) return;
    this.stream.additionalHeaders({ ':status': 100 });
  }

  write(chunk: Buffer): boolean {
    // HEAD: Node has ended the stream with its HEADERS; the body is not sent (RFC 9110 §9.3.2).
    if (this.head || this.refused) return true;
    if (chunk.length === this.left) {
      // The last bytes Content-Length announced (most answers: the only chunk): written and
      // the stream ended in one call. Always true: an ended stream never emits 'drain', so
      // an origin paused on this answer's last bytes would never be read to its end (its
      // connection slot held for good). What the client has still to read is bounded by
      // the send timeout (one chunk at most, past the answers held in the budget).
      this.left = -1;
      this.ended = this.delivers();
      this.endUpload();
      this.stream.end(chunk);
      this.flushWithin();
      return true;
    }
    if (this.left > 0) this.left -= chunk.length;
    return this.stream.write(chunk);
  }

  end(body?: string): this {
    if (this.ended) return this;
    this.ended = this.delivers();
    this.endUpload();
    if (body === undefined || this.head) this.stream.end();
    else this.stream.end(body);
    this.flushWithin();
    return this;
  }

  /**
   * An answer ended before its request's body has all come (the origin answered early, or
   * the gateway refused mid-body): once the answer is sent, the stream is closed with
   * RST_STREAM NO_ERROR, which asks the client to stop sending without error (RFC 9113
   * §8.1). Otherwise the body is no longer read, the client's window stays shut, and the
   * stream (its wake, its streaming places) waits for request_timeout_ms.
   */
  private endUpload(): void {
    const s = this.stream;
    // An answer that waits for trailers is not sent at 'finish' (Node's comes before its
    // END_STREAM): its upload is stopped once they are (sendTrailers).
    if (!this.ended || this.chunkedEncoding || s.endAfterHeaders || s.readableEnded) return;
    s.once('finish', () => stopUpload(s));
  }

  /**
   * 'wantTrailers' (the answer's last DATA is out): its trailer fields, or none, which Node
   * sends as an empty DATA frame with END_STREAM (not close(): that would be RST_STREAM in
   * place of END_STREAM). A request body still coming is then stopped (endUpload), on the
   * turn after the one on which Node hands the trailers to nghttp2, so that its RST_STREAM
   * follows their END_STREAM: at 'finish', it went first and the trailers were lost.
   */
  private sendTrailers(): void {
    const s = this.stream;
    s.sendTrailers(this.trailers ?? NO_TRAILERS);
    if (!s.endAfterHeaders && !s.readableEnded) setImmediate(stopUpload, s);
  }

  /** An ended answer not yet sent whole is left to the sweep, unless the send timer watches it already. */
  private flushWithin(): void {
    if (this.ended && !this.timed && this.sweep !== null) this.sweep.watch(this);
  }

  /** Cuts the stream (RST_STREAM INTERNAL_ERROR): the client knows the answer is not whole. */
  destroy(): this {
    if (!this.stream.destroyed) {
      this.cut = true;
      this.stream.close(NGHTTP2_INTERNAL_ERROR);
    }
    return this;
  }

  /** Sent at 'wantTrailers' (the answer waits for them: chunkedEncoding); throws, as node:http's does, on a field it refuses. */
  addTrailers(pairs: [string, string][]): void {
    this.trailers = trailerFields(pairs);
  }

  setTimeout(ms: number, onTimeout: () => void): this {
    this.timed = true;
    this.stream.setTimeout(ms, onTimeout);
    return this;
  }

  /** 'drain', and any other event (the request timeout's, request-timeout.ts, which the edge emits on the stream), are the stream's. */
  on(event: 'close' | 'drain', listener: () => void): this {
    if (event === 'close') this.addClose(listener);
    else this.stream.on(event, listener);
    return this;
  }

  /** 'close' comes once: the same as on(). */
  once(_event: 'close', listener: () => void): this {
    this.addClose(listener);
    return this;
  }

  off(_event: 'close', listener: () => void): this {
    // As an emitter does: the one added last goes.
    const more = this.moreOnClose;
    const i = more === null ? -1 : more.lastIndexOf(listener);
    if (i !== -1) (more as (() => void)[]).splice(i, 1);
    else if (this.onClose === listener) this.onClose = null;
    return this;
  }

  /** The stream has closed (the edge's listener, once): the proxy's close listeners, in the order they came. */
  closed(): void {
    this.sweep?.unwatch(this);
    const first = this.onClose;
    const more = this.moreOnClose;
    this.onClose = null;
    this.moreOnClose = null;
    if (first !== null) first();
    if (more !== null) for (const l of more) l();
  }

  /** The stream can still carry the answer (no reset has closed it): ending it now makes the answer whole. */
  private delivers(): boolean {
    return !this.stream.destroyed && !this.stream.closed;
  }

  private addClose(listener: () => void): void {
    const more = this.moreOnClose;
    if (more !== null) more.push(listener);
    else if (this.onClose === null) this.onClose = listener;
    else this.moreOnClose = [listener];
  }
}

/** A status whose answer can have content (RFC 9110 §15.3.5, §15.3.6, §15.4.5), so trailers after it. */
const mayHaveContent = (status: number): boolean => status !== 204 && status !== 205 && status !== 304;

/** respond()'s options, made once: [sendDate][waitForTrailers] (sendDate is Node's, not in its types). */
const RESPOND: readonly (ServerStreamResponseOptions & { sendDate: boolean })[] = [
  { sendDate: false, waitForTrailers: false },
  { sendDate: true, waitForTrailers: false },
  { sendDate: false, waitForTrailers: true },
  { sendDate: true, waitForTrailers: true },
];
