import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { KeyRing } from '../auth/keyring.js';
import { newTap } from '../capture/detail.js';
import type { Exchange, Recorder } from '../capture/recorder.js';
import { type ErrorType, errorBody, GatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/index.js';
import type { RequestLimiter } from '../ratelimit/types.js';
import { admit, clientIp } from './admit.js';
import { forwardRequestHeaders, forwardResponseHeaders, rawHeaderStrings } from './headers.js';
import type { RouteTable } from './routes.js';
import { countedBody, Upstreams } from './upstream.js';

export interface ProxyDeps {
  routes: RouteTable;
  ring: KeyRing;
  limiter: RequestLimiter | null;
  recorder: Recorder;
  metrics: Metrics;
  log: Logger;
  /** True for a client address listed in server.trusted_proxies. */
  trusted: (ip: string) => boolean;
}

/** Proxies plain HTTP requests: admission (admit.ts), then a streamed forward on undici. */
export class ProxyHandler {
  private readonly upstreams = new Upstreams();
  private readonly overhead = new Map<string, { observe(v: number): void }>();

  constructor(private readonly d: ProxyDeps) {}

  /** Answers with the gateway's own error body. */
  fail(
    req: IncomingMessage,
    res: ServerResponse,
    x: Exchange,
    type: ErrorType,
    message?: string,
    extra: string[] = [],
    retryAfter: number | null = null,
    param: string | null = null,
  ): void {
    const err = new GatewayError(type, message);
    const body = JSON.stringify(errorBody(type, x.id, err.message, param, retryAfter));
    x.status = err.status;
    if (!res.headersSent) {
      const h = ['content-type', 'application/json; charset=utf-8', 'content-length', String(Buffer.byteLength(body))];
      h.push('x-wake-id', x.id, 'cache-control', 'no-store');
      if (err.status === 401) h.push('www-authenticate', 'Bearer');
      for (const e of extra) h.push(e);
      res.writeHead(err.status, h);
      res.end(body);
    } else {
      res.destroy();
    }
    x.resBytes += body.length;
    // Drain what the client still sends, so the connection stays usable.
    if (!req.complete) req.resume();
    this.d.recorder.finish(req, x);
  }

  /**
   * Handles one proxied request end to end. `expectsContinue`: the client sent
   * Expect: 100-continue, answered only once admission has passed.
   */
  handle(req: IncomingMessage, res: ServerResponse, expectsContinue = false): void {
    const x = this.d.recorder.begin();
    const a = admit(this.d, req, x);
    if ('error' in a) {
      res.on('close', () => this.closed(req, res, x));
      const e = a.error;
      // The body was never invited: do not wait for it on this connection.
      if (expectsContinue) res.shouldKeepAlive = false;
      return this.fail(req, res, x, e.type, e.message, a.headers, e.retryAfter, e.param);
    }
    if (expectsContinue) res.writeContinue();
    if (a.route.detail !== null) {
      const url = req.url ?? '';
      const q = url.indexOf('?');
      x.tap = newTap(a.route.detail, q === -1 ? '' : url.slice(q), req.rawHeaders);
    }
    const ip = clientIp(req);
    const key = a.key;
    const headers = forwardRequestHeaders(req.rawHeaders, {
      dropAuthorization: key !== null,
      clientIp: ip,
      clientTrusted: this.d.trusted(ip),
      proto: 'http',
      originHost: a.origin.host,
      identity: key ? [key.id, key.consumer, key.environment] : null,
    });
    x.tUp = performance.now();
    let h = this.overhead.get(x.route);
    if (h === undefined) {
      h = this.d.metrics.overhead.labels(x.route);
      this.overhead.set(x.route, h);
    }
    h.observe((x.tUp - x.t0) / 1000);
    const fw = new Forwarding(this, req, res, x, a.limitHeaders);
    res.on('close', fw.onClose); // 'close' comes once: no once() wrapper
    // No body (RFC 9112 §6.3: neither Content-Length nor Transfer-Encoding).
    const bodyless = req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined;
    try {
      this.upstreams.pool(a.origin).dispatch(
        {
          path: a.path,
          method: req.method as 'GET',
          headers,
          body: bodyless
            ? null
            : Readable.from(
                countedBody(req, (c) => {
                  x.reqBytes += c.length;
                  x.tap?.req?.add(c);
                }),
                { objectMode: false },
              ),
          headersTimeout: a.route.cfg.timeout_ms,
          bodyTimeout: 0,
        },
        fw,
      );
    } catch (e) {
      fw.onError(e as Error & { code?: string });
    }
  }

  /** The response's connection closed: a client gone before the response ended is nginx's 499. */
  closed(req: IncomingMessage, res: ServerResponse, x: Exchange): void {
    if (x.done) return;
    if (!res.writableFinished) x.status = 499;
    this.d.recorder.finish(req, x);
  }

  /** The origin could not be asked or broke off: the exchange ends here. */
  upstreamFailed(req: IncomingMessage, res: ServerResponse, x: Exchange, err: Error & { code?: string }): void {
    if (res.headersSent) {
      // The origin broke off mid-response: record it as such, then cut the client off.
      if (!res.writableFinished) {
        x.status = 502;
        this.d.recorder.finish(req, x);
        res.destroy();
      }
      return;
    }
    if (res.destroyed) return;
    if (err.code === 'UND_ERR_HEADERS_TIMEOUT') return this.fail(req, res, x, 'upstream_timeout');
    if (err.code === 'UND_ERR_INVALID_ARG') {
      return this.fail(req, res, x, 'invalid_request', 'the request carries a header the origin connection refuses');
    }
    this.d.log.debug('upstream error', { route: x.route, code: err.code });
    this.fail(req, res, x, 'upstream_unavailable', `the origin could not be reached (${err.code ?? 'error'})`);
  }

  close(): Promise<void> {
    return this.upstreams.close();
  }
}

/**
 * One request's forward: undici's dispatch handler, and the response's close
 * listener (one object per request rather than a closure per callback).
 */
class Forwarding {
  private abort: ((err?: Error) => void) | null = null;
  private failed = false;

  constructor(
    private readonly p: ProxyHandler,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly x: Exchange,
    private readonly limitHeaders: string[] | null,
  ) {}

  readonly onClose = (): void => {
    // Recorded first (a client gone mid-response is a 499, not the 502 of the abort).
    this.p.closed(this.req, this.res, this.x);
    // The client went away mid-exchange: stop asking the origin.
    if (!this.failed && !this.res.writableFinished && this.abort) this.abort(new Error('client closed'));
  };

  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort;
  }

  onHeaders(status: number, raw: Buffer[], resume: () => void, statusText: string): boolean {
    const x = this.x;
    x.status = status;
    const extra = ['x-wake-id', x.id];
    if (this.limitHeaders) for (const l of this.limitHeaders) extra.push(l);
    const res = this.res;
    res.sendDate = false;
    const strings = rawHeaderStrings(raw);
    if (x.tap !== null) x.tap.resHeaders = strings;
    res.writeHead(status, statusText, forwardResponseHeaders(strings, extra));
    res.on('drain', resume);
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.x.resBytes += chunk.length;
    this.x.tap?.res?.add(chunk);
    return this.res.write(chunk);
  }

  onComplete(): void {
    this.res.end();
  }

  onError(err: Error & { code?: string }): void {
    this.failed = true;
    this.p.upstreamFailed(this.req, this.res, this.x, err);
  }
}
