import http2, {
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type ServerHttp2Stream,
  type ServerStreamResponseOptions,
} from 'node:http2';
import type { Socket } from 'node:net';
import type { ClientRequest, ClientResponse } from '../proxy/client.js';
import { addFields, CONNECTION_SPECIFIC, flatten, originHeaders } from './fields.js';

const { NGHTTP2_INTERNAL_ERROR } = http2.constants;
const NONE: string[] = [];

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

  constructor(
    private readonly stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    raw: string[],
    readonly socket: Socket,
  ) {
    this.method = headers[':method'] as string;
    this.url = headers[':path'] as string;
    this.headers = headers;
    this.rawHeaders = originHeaders(raw);
    if (!stream.endAfterHeaders) {
      // A body with no Content-Length is still a body (HTTP/2 frames it): the proxy
      // reads one when either framing header is there, and only ever forwards rawHeaders.
      if (headers['content-length'] === undefined) headers['transfer-encoding'] = 'chunked';
      stream.once('trailers', (t: IncomingHttpHeaders) => {
        this.rawTrailers = flatten(t);
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

/**
 * An HTTP/2 response as the proxy writes responses: writeHead becomes one HEADERS
 * frame (connection-specific fields dropped), the body DATA frames under the
 * stream's flow control (write returns false when the client's window is spent and
 * Node holds the rest: the proxy then paces the origin exactly as for a slow
 * HTTP/1.1 reader). Trailers are sent when the answer announced them (Trailer).
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
  private ended = false;

  constructor(
    readonly stream: ServerHttp2Stream,
    private readonly head: boolean,
  ) {}

  get headersSent(): boolean {
    return this.stream.headersSent;
  }

  get destroyed(): boolean {
    return this.stream.destroyed;
  }

  /**
   * The answer was ended whole. Node ends the writable side of a stream the client reset
   * too, so the stream's own writableFinished alone would call a cut answer finished (the
   * origin not aborted, its slot held, the wake not a 499).
   */
  get writableFinished(): boolean {
    return this.ended && this.stream.writableFinished;
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
    const h: OutgoingHttpHeaders = { ':status': status };
    let announced = addFields(h, raw);
    if (this.extra !== null) announced = addFields(h, this.extra) || announced;
    // Trailers can follow only if the stream waits for them; only an answer that says so pays for that.
    this.chunkedEncoding = announced && !this.head;
    // sendDate: Node's (not in its types): the origin's Date passes as it is, the gateway's own answers get one.
    const o: ServerStreamResponseOptions & { sendDate: boolean } = {
      sendDate: this.sendDate,
      waitForTrailers: this.chunkedEncoding,
    };
    this.stream.respond(h, o);
    if (this.chunkedEncoding) this.stream.once('wantTrailers', () => this.stream.sendTrailers(this.trailers ?? {}));
    return this;
  }

  writeContinue(): void {
    if (this.stream.destroyed || this.stream.closed || this.stream.headersSent) return;
    this.stream.additionalHeaders({ ':status': 100 });
  }

  write(chunk: Buffer): boolean {
    // HEAD: Node has ended the stream with its HEADERS; the body is not sent (RFC 9110 §9.3.2).
    if (this.head) return true;
    return this.stream.write(chunk);
  }

  end(body?: string): this {
    this.ended = true;
    if (body === undefined || this.head) this.stream.end();
    else this.stream.end(body);
    return this;
  }

  /** Cuts the stream (RST_STREAM INTERNAL_ERROR): the client knows the answer is not whole. */
  destroy(): this {
    if (!this.stream.destroyed) {
      this.cut = true;
      this.stream.close(NGHTTP2_INTERNAL_ERROR);
    }
    return this;
  }

  addTrailers(pairs: [string, string][]): void {
    const t: OutgoingHttpHeaders = {};
    for (const [name, value] of pairs) {
      const lower = name.toLowerCase();
      if (!CONNECTION_SPECIFIC.has(lower)) t[lower] = value;
    }
    this.trailers = t;
  }

  setTimeout(ms: number, onTimeout: () => void): this {
    this.stream.setTimeout(ms, onTimeout);
    return this;
  }

  on(event: 'close' | 'drain', listener: () => void): this {
    this.stream.on(event, listener);
    return this;
  }

  once(event: 'close', listener: () => void): this {
    this.stream.once(event, listener);
    return this;
  }

  off(event: 'close', listener: () => void): this {
    this.stream.off(event, listener);
    return this;
  }
}
