import { STATUS_CODES } from 'node:http';
import { Readable } from 'node:stream';
import { type Admission, isRefusal, type Routed } from '../admission/admission.js';
import { NONE, type Refusal } from '../admission/refusal.js';
import { upstreamPath } from '../admission/routes.js';
import { FRAMING_REFUSED } from '../admission/target.js';
import type { ViaValues } from '../admission/via.js';
import { newTap } from '../capture/detail.js';
import { BodyRefused, KeyGate, refusedBody, scannedBody } from '../capture/key-scan.js';
import type { Exchange, Recorder } from '../capture/recorder.js';
import { errorBody, GatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/index.js';
import { addressBucket } from '../ratelimit/address.js';
import { onRequestTimeout, REQUEST_TIMED_OUT } from '../request-timeout.js';
import { noteClientCert } from '../tls/client-cert.js';
import { isVerifyError } from '../tls/origin-trust.js';
import { type TraceStart, traceparentOf } from '../tracing/context.js';
import { type ClientRequest, type ClientResponse, h2Carries } from './client.js';
import { type DownloadLimits, Downloads } from './downloads.js';
import { connectionTokens, forwardRequestHeaders, forwardResponseHeaders, reflectedRequest } from './headers.js';
import { chunkedWithTrailers, forwardRequestTrailers, responseTrailerPairs } from './trailers.js';
import { countedBody, type Slots, Upstreams } from './upstream.js';

export interface ProxyDeps {
  admission: Admission;
  recorder: Recorder;
  metrics: Metrics;
  log: Logger;
  /** True for a client address listed in server.trusted_proxies. */
  trusted: (ip: string) => boolean;
  /** server.buffer_request_body_bytes, max_streaming_uploads_per_client, upstream_connections. */
  server: { bufferBytes: number; bufferTotal: number; streamsPerClient: number; connections: number };
  /** server.buffer_response_body_bytes, max_buffered_response_bytes, max_streaming_downloads_per_client, send_timeout_ms. */
  downloads: DownloadLimits;
  /** W3C Trace Context: reads the client's traceparent, mints the gateway's span id. */
  trace: TraceStart;
  /** The gateway's `Via` values (admission/via.ts), one added to every forwarded request. */
  via?: ViaValues;
}

/** Placeholder of a request's origin headers until it is admitted. */
const NONE_MUTABLE: string[] = [];
/** Retry-After: 1 on a 503 that is over as soon as something else ends. */
const RETRY_SHORTLY: readonly string[] = ['retry-after', '1'];
const STREAMS_FULL = new GatewayError(
  'service_unavailable',
  "bodies streaming at their client's pace hold their whole share of this origin's connections (three quarters of server.upstream_connections); retry shortly",
);
const BUFFER_FULL = new GatewayError(
  'service_unavailable',
  'the gateway holds its most request body bytes awaiting forwarding (server.max_buffered_request_bytes); retry shortly',
);
const KEY_IN_TRAILER_MESSAGE =
  'a gateway key was sent in a trailer field; the origin must never see it: send it in the Authorization header only, and revoke this one';
const KEY_IN_TRAILER = new GatewayError('invalid_request', KEY_IN_TRAILER_MESSAGE, 'trailers');
const UNREADABLE = new GatewayError('internal_error', 'the body could not be read');
const UPSTREAM_TIMEOUT = new GatewayError('upstream_timeout');
const HEADER_REFUSED = new GatewayError(
  'invalid_request',
  'the request carries a header the origin connection refuses',
);

/** Proxies plain HTTP requests: admission (src/admission), then a streamed forward on undici. */
export class ProxyHandler {
  private readonly upstreams: Upstreams;
  private readonly overhead = new Map<string, { observe(v: number): void }>();
  /** Bodies streaming (past the buffer) per client address. */
  private readonly streaming = new Map<string, number>();
  /** Request body bytes read and held before forwarding, all requests together. */
  private buffered = 0;
  /** Answers held for slow clients, and those streaming at their pace, per address. */
  readonly downloads: Downloads;

  constructor(private readonly d: ProxyDeps) {
    this.upstreams = new Upstreams(d.server.connections);
    this.downloads = new Downloads(d.downloads);
  }

  /** A new request's exchange (its wake to be). */
  begin(): Exchange {
    return this.d.recorder.begin();
  }

  /**
   * Answers with the gateway's own error body (its own reason phrase), and the refusal's
   * headers. Once the origin's answer has been begun (a writeHead ran, even one that threw
   * midway: its status, reason, framing may be set) nothing more is answered on the
   * connection: it is cut, and the client knows the answer is not whole.
   */
  fail(fw: Forwarding, e: GatewayError, headers: readonly string[] = NONE): void {
    const { req, res, x } = fw;
    const body = JSON.stringify(errorBody(e.type, x.id, e.message, e.param, e.retryAfter));
    x.status = e.status;
    x.errorType = e.type;
    if (!res.headersSent && !fw.headed) {
      // A body of unknown length was never read: what follows it on the connection is not a request.
      if (e === FRAMING_REFUSED) res.shouldKeepAlive = false;
      const h = ['content-type', 'application/json; charset=utf-8', 'content-length', String(Buffer.byteLength(body))];
      h.push('x-wake-id', x.id, 'cache-control', 'no-store');
      for (const v of headers) h.push(v);
      res.writeHead(e.status, STATUS_CODES[e.status] ?? '', h);
      res.end(body);
      x.resBytes += body.length;
    } else {
      res.destroy();
    }
    // Drain what the client still sends, so the connection stays usable.
    if (!req.complete) req.resume();
    this.d.recorder.finish(req, x);
  }

  /**
   * Handles one proxied request end to end. `expectsContinue`: the client sent
   * Expect: 100-continue, answered only once admission has passed.
   */
  handle(req: ClientRequest, res: ClientResponse, expectsContinue = false): void {
    const fw = new Forwarding(this, req, res);
    res.on('close', fw.onClose); // 'close' comes once: no once() wrapper
    // Before admission: an auth: mtls route's key is the certificate's.
    noteClientCert(req.socket, fw.x);
    fw.x.secure = (req.socket as { encrypted?: boolean }).encrypted === true;
    this.d.trace.begin(fw.x, req.headers.traceparent, req.socket, req.headers.tracestate);
    const v = this.d.admission.request(req, fw.x);
    if (v instanceof Promise) {
      // A fleet's bucket decision that waits on Redis (bounded by coordination.timeout_ms):
      // server.request_timeout_ms may run out meanwhile, and the 408 is this wake's.
      if (hasBody(req)) onRequestTimeout(fw.res, () => this.timedOut(fw));
      v.then(
        (r) => this.decided(fw, r, expectsContinue),
        (e: Error) => this.fail(fw, new GatewayError('internal_error', e.message, null, 0)),
      );
      return;
    }
    this.decided(fw, v, expectsContinue);
  }

  private decided(fw: Forwarding, v: Routed | Refusal, expectsContinue: boolean): void {
    // Answered while the decision waited on Redis (request_timeout_ms): its wake is recorded.
    if (fw.x.done) return;
    if (isRefusal(v)) {
      // The body was never invited: do not wait for it on this connection.
      if (expectsContinue) fw.res.shouldKeepAlive = false;
      return this.fail(fw, v.error, v.headers);
    }
    // The client went away while the decision waited on Redis: nothing to forward.
    if (fw.gone) return;
    if (expectsContinue) fw.res.writeContinue();
    this.forward(fw, v);
  }

  /** An admitted request: its headers for the origin, then its body read (or streamed) and sent. */
  private forward(fw: Forwarding, a: Routed): void {
    const { req, x } = fw;
    fw.a = a;
    if (a.route.detail !== null) x.tap = newTap(a.route.detail, a.ask.query, req.rawHeaders);
    // The connection's address (a trusted proxy's, when one is in front: its chain is appended to).
    const ip = req.socket.remoteAddress ?? '';
    const key = a.key;
    fw.headers = forwardRequestHeaders(req.rawHeaders, {
      dropAuthorization: key !== null,
      clientIp: ip,
      clientTrusted: this.d.trusted(ip),
      proto: x.secure ? 'https' : 'http',
      originHost: a.origin.host,
      identity: key ? [key.id, key.consumer, key.environment] : null,
      traceparent: traceparentOf(x),
      keepTracestate: x.parentSpanId !== '',
      via: this.d.via?.of(req.httpVersionMajor, req.httpVersionMinor),
    });
    let h = this.overhead.get(x.route);
    if (h === undefined) {
      h = this.d.metrics.overhead.labels(x.route);
      this.overhead.set(x.route, h);
    }
    x.tAdmit = performance.now();
    h.observe((x.tAdmit - x.t0) / 1000);
    // RFC 9110 §7.6.2: an OPTIONS or TRACE's Max-Forwards is checked and counted down here.
    const m = req.method;
    if ((m === 'OPTIONS' || m === 'TRACE') && req.headers['max-forwards'] !== undefined && this.lastHop(fw)) return;
    if (!hasBody(req)) return this.dispatch(fw, null);
    // server.request_timeout_ms may cut this body (HTTP/1.1's connection check, HTTP/2's timer per
    // stream): the 408 is this wake's (timedOut is once per exchange, if also taken while the decision waited).
    onRequestTimeout(fw.res, () => this.timedOut(fw));
    if (Number(req.headers['content-length']) > this.d.server.bufferBytes) return this.stream(fw, []);
    this.buffer(fw);
  }

  /**
   * An admitted OPTIONS or TRACE with Max-Forwards (RFC 9110 §7.6.2): at 0 the gateway is
   * its final recipient and answers it (true); above it the value forwarded is one less
   * (at most MAX_FORWARDS), in one field. A value that is no number passes as it came.
   */
  private lastHop(fw: Forwarding): boolean {
    const v = fw.req.headers['max-forwards'];
    if (typeof v !== 'string' || !DIGITS.test(v)) return false;
    const n = v.length > 10 ? Number.POSITIVE_INFINITY : Number(v);
    if (n === 0) {
      this.answerHere(fw);
      return true;
    }
    const next = String(Math.min(n - 1, MAX_FORWARDS));
    const hs = fw.headers;
    let first = true;
    for (let i = 0; i < hs.length; i += 2) {
      const name = hs[i] as string;
      if (name.length !== 12 || name.toLowerCase() !== 'max-forwards') continue;
      if (first) {
        hs[i + 1] = next;
        first = false;
      } else {
        hs.splice(i, 2);
        i -= 2;
      }
    }
    return false;
  }

  /**
   * The gateway's own answer as the final recipient of an admitted OPTIONS or TRACE
   * (Max-Forwards: 0): OPTIONS, a 200 whose Allow lists the methods the proxy forwards, no
   * body; TRACE, a 200 reflecting the request as received (message/http), less its
   * credentials (RFC 9110 §9.3.8). Its headers are a relayed answer's (the wake's id, the
   * rate-limit fields), and its wake is recorded as any other.
   */
  private answerHere(fw: Forwarding): void {
    const { req, res, x } = fw;
    let body = EMPTY;
    let h: string[];
    if (req.method === 'TRACE') {
      const version = req.httpVersionMajor === 2 ? 'HTTP/2' : `HTTP/1.${req.httpVersionMinor}`;
      body = Buffer.from(reflectedRequest(`TRACE ${req.url ?? '/'} ${version}`, req.rawHeaders), 'latin1');
      h = ['content-type', 'message/http', 'content-length', String(body.length)];
    } else h = ['allow', ALLOW, 'content-length', '0'];
    h.push('x-wake-id', x.id);
    const limitHeaders = fw.a.limitHeaders;
    if (limitHeaders !== null) for (const l of limitHeaders) h.push(l);
    x.status = 200;
    // The reflection is not kept as the wake's answer body: it would hold, unredacted, request
    // fields the route's capture redacts.
    if (x.tap !== null) x.tap.resHeaders = h;
    fw.headed = true;
    res.writeHead(200, 'OK', h);
    if (body.length > 0) res.write(body);
    res.end();
    x.resBytes += body.length;
    // The request's body (there should be none) is not wanted: drained, the connection stays usable.
    if (!req.complete) req.resume();
    this.d.recorder.finish(req, x);
  }

  /**
   * The body is read first: only then does the request take a connection to the origin,
   * so a client that sends its headers and then stalls holds nothing others need.
   */
  private buffer(fw: Forwarding): void {
    const { req, res, x } = fw;
    const limit = this.d.server.bufferBytes;
    const chunks: Buffer[] = [];
    let n = 0;
    // What this request holds of the gateway-wide budget, given back once.
    const release = () => {
      this.buffered -= n;
      n = 0;
    };
    const stop = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      res.off('close', release);
    };
    const onData = (c: Buffer) => {
      x.reqBytes += c.length;
      x.tap?.req?.add(c);
      chunks.push(c);
      n += c.length;
      this.buffered += c.length;
      if (n > limit) {
        stop();
        release();
        req.pause();
        this.stream(fw, chunks);
      } else if (this.buffered > this.d.server.bufferTotal) {
        // Many clients each holding part of a body: memory stays bounded, and this one is told to retry.
        stop();
        release();
        fw.gone = true;
        this.fail(fw, BUFFER_FULL, RETRY_SHORTLY);
      }
    };
    const onEnd = () => {
      stop();
      const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, n);
      release();
      // A gateway key never reaches an origin, in a body either, in any spelling (key-scan.ts; a cheap look first).
      const refused = refusedBody(body, req.headers['content-type'], req.headers['content-encoding']);
      if (refused !== null) {
        fw.gone = true;
        return this.fail(fw, new GatewayError(refused.type, refused.message, refused.param));
      }
      // Trailer fields after the body: filtered as headers are, then passed on (a path of
      // their own, undici cannot send them); one holding a gateway key refuses the request.
      if (req.rawTrailers.length > 0) {
        const trailers = forwardRequestTrailers(req.rawTrailers, connectionTokens(req.rawHeaders));
        if (trailers === null) {
          fw.gone = true;
          return this.fail(fw, KEY_IN_TRAILER);
        }
        if (trailers.length > 0) return this.dispatch(fw, body, trailers);
      }
      this.dispatch(fw, body);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    // A client gone mid-body gives its share back ('close' comes once: no once() wrapper).
    res.on('close', release);
  }

  /**
   * A body past the buffer streams to the origin as it comes (what was read already
   * first), at most `max_streaming_uploads_per_client` at once from one address.
   */
  private stream(fw: Forwarding, read: Buffer[]): void {
    const { req, res, x } = fw;
    // Counted per client as buckets are: an IPv6 client's /64 (ratelimit/address.ts).
    const ip = addressBucket(fw.a.ask.ip);
    const open = this.streaming.get(ip) ?? 0;
    if (open >= this.d.server.streamsPerClient) {
      const msg = `this address already streams ${open} request bodies larger than server.buffer_request_body_bytes (server.max_streaming_uploads_per_client); retry when one has ended`;
      return this.fail(fw, new GatewayError('service_unavailable', msg), RETRY_SHORTLY);
    }
    let gate: KeyGate;
    try {
      gate = new KeyGate(req.headers['content-type'], req.headers['content-encoding']);
    } catch (e) {
      // Anything else is ours, never a reason to end the process: the client gets a 500.
      if (!(e instanceof BodyRefused)) return this.fail(fw, UNREADABLE);
      return this.fail(fw, new GatewayError(e.type, e.message, e.param));
    }
    // However many addresses stream, they leave a share of the origin's connections to the others.
    const slots = this.upstreams.slotsOf(fw.a.origin);
    if (!slots.takeStream()) return this.fail(fw, STREAMS_FULL, RETRY_SHORTLY);
    this.streaming.set(ip, open + 1);
    res.on('close', () => {
      slots.giveStream();
      const left = (this.streaming.get(ip) ?? 1) - 1;
      if (left <= 0) this.streaming.delete(ip);
      else this.streaming.set(ip, left);
    });
    // Searched for gateway keys as it streams: a key found stops it before the origin has it (key-scan.ts).
    // Its trailer fields, once it has ended, are filtered as a buffered body's are: a key in
    // one stops it the same way (the scan still holds its last bytes); the others follow a
    // chunked request's last chunk (origin-client.ts; a body of a declared length has no place for them).
    let trailers: readonly string[] = NONE;
    const counted = countedBody(
      req,
      read,
      (c) => {
        x.reqBytes += c.length;
        x.tap?.req?.add(c);
      },
      () => {
        if (req.rawTrailers.length === 0) return;
        const t = forwardRequestTrailers(req.rawTrailers, connectionTokens(req.rawHeaders));
        if (t === null) throw new BodyRefused('invalid_request', KEY_IN_TRAILER_MESSAGE, 'trailers');
        trailers = t;
      },
    );
    fw.trailersAfter = () => trailers;
    const body = Readable.from(scannedBody(counted, gate), { objectMode: false });
    this.dispatch(fw, body);
  }

  /** Takes a connection slot of the origin (waiting at most the route's queue_timeout_ms), then forwards. */
  private dispatch(fw: Forwarding, body: Buffer | Readable | null, trailers?: string[]): void {
    if (fw.gone) return;
    const slots = this.upstreams.slotsOf(fw.a.origin);
    if (slots.tryTake()) return this.send(fw, slots, body, trailers);
    fw.cancelWait = slots.take(fw.a.route.cfg.queue_timeout_ms, (ok) => {
      fw.cancelWait = null;
      if (!ok) return fw.queueTimedOut();
      if (fw.gone) return slots.give();
      this.send(fw, slots, body, trailers);
    });
  }

  /** Forwards to the origin, holding `slots`' slot until the exchange ends. */
  private send(fw: Forwarding, slots: Slots, body: Buffer | Readable | null, trailers?: string[]): void {
    const a = fw.a;
    fw.slot = slots;
    fw.x.tUp = performance.now();
    // The path as sent upstream, made only now, from the path and query admission split once.
    const path = upstreamPath(a.route, a.origin, a.ask.path, a.ask.query);
    fw.x.upstreamPath = path;
    let headers = fw.headers;
    let after = fw.trailersAfter;
    if (trailers !== undefined) {
      // A buffered body the client sent trailer fields after: chunked to the origin, the
      // fields (announced in `Trailer`) after its last chunk, as a streamed body's are.
      headers = chunkedWithTrailers(headers, trailers);
      body = Readable.from([body as Buffer], { objectMode: false });
      after = () => trailers;
    }
    try {
      this.upstreams.client(a.origin, a.route.cfg.max_response_header_bytes).dispatch(
        {
          path,
          method: fw.req.method ?? 'GET',
          headers,
          body,
          headersTimeout: a.route.cfg.timeout_ms,
          trailers: after,
        },
        fw,
      );
    } catch (e) {
      fw.onError(e as Error & { code?: string });
    }
  }

  /** The response's connection closed: a client gone before the response ended is nginx's 499. */
  closed(fw: Forwarding): void {
    const x = fw.x;
    if (x.done) return;
    if (!fw.res.writableFinished) {
      x.status = 499;
      // What the client was sent of the answer is not all of it.
      if (x.tap?.res) x.tap.res.short = true;
    }
    this.d.recorder.finish(fw.req, x);
  }

  /**
   * server.request_timeout_ms ran out while the body was still arriving (http-server.ts, or
   * h2/edge.ts's timer per stream): over HTTP/1.1 answered 408 with this wake's id, or, its
   * answer begun, cut off; over HTTP/2 the edge resets the stream. The wake says 408.
   */
  private timedOut(fw: Forwarding): void {
    const { req, res, x } = fw;
    if (x.done || req.complete || res.destroyed) return;
    // Not forwarded now (a body still being read, a wait for a connection); one in flight ends with the connection.
    fw.gone = true;
    // HTTP/2 answers no 408: the edge resets the stream (CANCEL) once this returns (h2/edge.ts).
    if (!res.headersSent && req.httpVersionMajor === 1) {
      res.shouldKeepAlive = false;
      return this.fail(fw, REQUEST_TIMED_OUT);
    }
    x.status = REQUEST_TIMED_OUT.status;
    x.errorType = REQUEST_TIMED_OUT.type;
    if (x.tap?.res) x.tap.res.short = true;
    this.d.recorder.finish(req, x);
    if (req.httpVersionMajor === 1) res.destroy();
  }

  /** The origin could not be asked or broke off: the exchange ends here. */
  upstreamFailed(fw: Forwarding, err: Error & { code?: string }): void {
    const { req, res, x } = fw;
    if (res.headersSent) {
      // The origin broke off mid-response: record it as such, then cut the client off.
      if (!res.writableFinished) {
        x.status = 502;
        if (x.tap?.res) x.tap.res.short = true;
        this.d.recorder.finish(req, x);
        res.destroy();
      }
      return;
    }
    if (res.destroyed) return;
    // The streamed body held a gateway key (or could not be read for one): the origin's request was cut off.
    if (err instanceof BodyRefused) return this.fail(fw, new GatewayError(err.type, err.message, err.param));
    if (err.code === 'UND_ERR_HEADERS_TIMEOUT') return this.fail(fw, UPSTREAM_TIMEOUT);
    if (err.code === 'UND_ERR_HEADERS_OVERFLOW') {
      const max = fw.a.route.cfg.max_response_header_bytes;
      const msg = `the origin's response headers are larger than routes[].max_response_header_bytes (${max} bytes); raise it for route ${x.route}`;
      return this.fail(fw, new GatewayError('upstream_unavailable', msg));
    }
    if (err.code === 'UND_ERR_INVALID_ARG') return this.fail(fw, HEADER_REFUSED);
    if (isVerifyError(err.code)) {
      const msg = `the origin's certificate did not verify (${err.code}); check routes[].tls (ca, servername) of route ${x.route}`;
      return this.fail(fw, new GatewayError('upstream_unavailable', msg));
    }
    if (err.code === 'UND_ERR_CONNECT_TIMEOUT') {
      const msg = `the origin did not accept a connection within routes[].connect_timeout_ms (${fw.a.route.cfg.connect_timeout_ms} ms) of route ${x.route}`;
      return this.fail(fw, new GatewayError('upstream_unavailable', msg));
    }
    this.d.log.debug('upstream error', { route: x.route, code: err.code });
    this.fail(fw, new GatewayError('upstream_unavailable', `the origin could not be reached (${err.code ?? 'error'})`));
  }

  /**
   * The client is not keeping up with the answer (its socket's buffer is full): keep
   * reading the origin (true) while the answer's backlog is within the response buffer
   * (so a small answer frees its origin connection at the origin's speed); past it the
   * answer streams at the client's pace (false: the origin is paused), one of a bounded
   * number per address and per origin; past those the client is cut off. A client that
   * reads nothing for send_timeout_ms is cut off too.
   */
  behind(fw: Forwarding, n: number): boolean {
    const dl = this.downloads;
    if (!fw.timed) {
      // Only a client that falls behind costs these (a timer, a drain listener, two closures).
      fw.timed = true;
      fw.res.setTimeout(dl.limits.sendTimeoutMs, () => fw.res.destroy());
      fw.res.on('drain', () => fw.drained());
    }
    if (fw.streams !== null) return false;
    const queued = fw.res.writableLength;
    if (dl.mayHold(fw.held, queued, n)) {
      fw.held = queued;
      return true;
    }
    const slots = fw.slot;
    if (slots === null) return false;
    if (!dl.take(addressBucket(fw.a.ask.ip))) {
      this.d.log.debug('answer cut: too many streaming to one address', { route: fw.x.route });
      fw.res.destroy();
      return false;
    }
    if (!slots.takeStream()) {
      dl.give(addressBucket(fw.a.ask.ip));
      fw.res.destroy();
      return false;
    }
    fw.streams = slots;
    return false;
  }

  close(): Promise<void> {
    return this.upstreams.close();
  }
}

const EMPTY = Buffer.alloc(0);
/** Max-Forwards as decimal digits only (RFC 9110 §7.6.2: 1*DIGIT). */
const DIGITS = /^\d+$/;
/** The largest Max-Forwards the gateway passes on (the RFC's "recipient's maximum supported value"). */
const MAX_FORWARDS = 2_147_483_647;
/** The methods the proxy forwards (any but CONNECT; these are those a client may expect), as the Allow of its own OPTIONS answer. */
const ALLOW = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE';
/** The request has a body (RFC 9112 §6.3: Content-Length or Transfer-Encoding). */
const hasBody = (req: ClientRequest): boolean =>
  req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
/**
 * Sends the head of an answer still waiting for its first body bytes (and not ended,
 * nor failed: its slot is held). An empty write, not flushHeaders(): that one writes the
 * head as UTF-8, and an origin's bytes 0x80-0xFF must reach the client as they came.
 */
const flushHead = (fw: Forwarding): void => {
  if (fw.x.resBytes === 0 && fw.slot !== null && !fw.res.destroyed) fw.res.write(EMPTY);
};

/**
 * One proxied request from its arrival to its end: its exchange, what admission
 * admitted it as, undici's dispatch handler, and the response's close listener (one
 * object per request rather than a closure per callback).
 */
class Forwarding {
  readonly x: Exchange;
  /** What admission admitted (set once admitted; a refused request never reads it). */
  a!: Routed;
  /** The request headers for the origin (set once admitted). */
  headers: string[] = NONE_MUTABLE;
  private abort: ((err?: Error) => void) | null = null;
  private failed = false;
  /** The client went away before the request was forwarded. */
  gone = false;
  /**
   * An answer's writeHead has run (even one that threw midway, its status and framing
   * perhaps set): the gateway's error answer can no longer be written on the connection.
   */
  headed = false;
  /** The origin's connection slot this request holds, given back once when it ends. */
  slot: Slots | null = null;
  /** Leaves the queue for a slot (while waiting). */
  cancelWait: (() => void) | null = null;
  /** Answer bytes held for the client past its socket's buffer (counted gateway-wide). */
  held = 0;
  /** The send timeout is armed (the client fell behind once). */
  timed = false;
  /** The origin's slots whose streaming place this answer holds (it streams at the client's pace). */
  streams: Slots | null = null;
  private resume: (() => void) | null = null;
  /** The origin's answer fields: the names its `Connection` lists leave its trailers too. */
  private resRaw: string[] = NONE_MUTABLE;
  /** A streamed body's trailer fields for the origin, filtered, known once it has ended (handler's stream). */
  trailersAfter: (() => readonly string[]) | undefined = undefined;

  constructor(
    private readonly p: ProxyHandler,
    readonly req: ClientRequest,
    readonly res: ClientResponse,
  ) {
    this.x = p.begin();
    if (req.httpVersionMajor === 2) this.x.protocol = 'h2';
    else if (req.httpVersionMinor === 0) this.x.protocol = 'http/1.0';
  }

  readonly onClose = (): void => {
    // Recorded first (a client gone mid-response is a 499, not the 502 of the abort).
    this.p.closed(this);
    if (this.held !== 0 || this.streams !== null) this.letGo();
    if (this.slot === null) {
      this.gone = true;
      this.cancelWait?.();
      return;
    }
    // The client went away mid-exchange, or request_timeout_ms cut its body (gone, answered 408):
    // stop asking the origin (as soon as undici says how, when the request was handed over
    // and not yet given a connection).
    if (this.failed || (this.res.writableFinished && !this.gone)) return;
    if (this.abort !== null) this.abort(new Error('client closed'));
    else this.gone = true;
  };

  /** The client read what was held for it: the budget is given back, the origin read again. */
  drained(): void {
    if (this.held !== 0) {
      this.p.downloads.release(this.held);
      this.held = 0;
    }
    this.resume?.();
  }

  /** The answer ended (or its client went): what it held of the budgets goes back. */
  private letGo(): void {
    this.p.downloads.release(this.held);
    this.held = 0;
    if (this.streams !== null) {
      this.streams.giveStream();
      this.streams = null;
      this.p.downloads.give(addressBucket(this.a.ask.ip));
    }
  }

  private release(): void {
    const s = this.slot;
    if (s === null) return;
    this.slot = null;
    s.give();
  }

  /** No connection to the origin came free within the route's queue_timeout_ms. */
  queueTimedOut(): void {
    if (this.gone || this.res.destroyed) return;
    const msg = `no connection to the origin came free within routes[].queue_timeout_ms (${this.a.route.cfg.queue_timeout_ms} ms)`;
    this.p.fail(this, new GatewayError('service_unavailable', msg), RETRY_SHORTLY);
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort;
    // Its client went away while the request waited for a connection of the pool.
    if (this.gone) abort(new Error('client closed'));
  }

  onHeaders(status: number, raw: string[], resume: () => void, statusText: string): boolean {
    const x = this.x;
    // The 502 an h2 answer gives in place of a status HTTP/2 cannot carry (client.ts) is recorded as such.
    if (this.req.httpVersionMajor === 2 && !h2Carries(status)) {
      x.status = 502;
      x.errorType = 'upstream_unavailable';
    } else x.status = status;
    const extra = ['x-wake-id', x.id];
    const limitHeaders = this.a.limitHeaders;
    if (limitHeaders !== null) for (const l of limitHeaders) extra.push(l);
    const req = this.req;
    // A trailer section can follow only an answer sent chunked to an HTTP/1.1 client (or on
    // HTTP/2), never a HEAD's, a 204's or a 304's: elsewhere the origin's Trailer goes.
    const trailers =
      (req.httpVersionMajor === 2 || req.httpVersionMinor !== 0) &&
      status >= 200 &&
      status !== 204 &&
      status !== 304 &&
      req.method !== 'HEAD';
    const res = this.res;
    if (x.tap !== null) x.tap.resHeaders = raw;
    this.resRaw = raw;
    // Node adds its Date (RFC 9110 §6.6.1) only to an answer whose fields hold none: the
    // origin's passes as it came (res.sendDate stays true, on HTTP/2 too: exchange.ts).
    this.headed = true;
    res.writeHead(status, statusText, forwardResponseHeaders(raw, extra, limitHeaders !== null, trailers));
    // An answer of no announced length (a stream: events, long polls) may send its first
    // bytes much later: node:http holds its head until then, so it goes now unless body
    // bytes follow at once (one write). An HTTP/2 answer's head goes at once anyway.
    if (res.chunkedEncoding && this.req.httpVersionMajor !== 2) process.nextTick(flushHead, this);
    this.resume = resume;
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.x.resBytes += chunk.length;
    this.x.tap?.res?.add(chunk);
    // The usual case: the client keeps up. Otherwise the answer is buffered or paced (behind).
    return this.res.write(chunk) || this.p.behind(this, chunk.length);
  }

  /** `trailers`: raw name/value pairs. */
  onComplete(trailers: string[] | null): void {
    this.release();
    // Trailer fields after a chunked answer (gRPC-web's status, checksums) are passed on,
    // less the gateway's own and those no trailer section may hold (trailers.ts).
    if (trailers !== null && trailers.length > 0 && this.res.chunkedEncoding) {
      const pairs = responseTrailerPairs(trailers, this.a.limitHeaders !== null, connectionTokens(this.resRaw));
      try {
        if (pairs.length > 0) this.res.addTrailers(pairs);
      } catch {
        // A field Node refuses as a trailer is dropped, not the answer.
      }
    }
    this.res.end();
  }

  onError(err: Error & { code?: string }): void {
    this.release();
    this.failed = true;
    this.p.upstreamFailed(this, err);
  }
}
