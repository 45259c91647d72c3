import type { IncomingMessage } from 'node:http';
import type { KeyRecord } from '../auth/key.js';
import type { Clock } from '../clock.js';
import { Marks, recordedAgent } from '../delivery-mark.js';
import { newWakeId } from '../ids.js';
import type { HotCounterChild, HotHistogramChild } from '../metrics/hot.js';
import {
  METHOD_COUNT,
  type Metrics,
  methodIndex,
  methodLabel,
  STATUS_CLASS_COUNT,
  statusClass,
  statusClassIndex,
} from '../metrics/index.js';
import { buildDetail, type DetailBudget, type DetailTap, detailSize } from './detail.js';
import type { CapturedDetail } from './detail-types.js';
import type { Redactor } from './redact.js';
import { withoutGatewayKeys } from './text.js';
import type { Wake } from './wake.js';

/** Per-request state, kept on one object so the hot path allocates little. */
export interface Exchange {
  id: string;
  /** Clock time of arrival (ms); the wake's captured_at and its id's time part. */
  start: number;
  /** performance.now() at arrival. */
  t0: number;
  route: string;
  /** The request path without its query, once something has split it ('' until then). */
  path: string;
  /**
   * The whole URL was looked at for a gateway key and holds none (admission did), so
   * the path need not be looked at again when the wake is made.
   */
  pathClean: boolean;
  key: KeyRecord | null;
  consumer: string;
  environment: string;
  reqBytes: number;
  resBytes: number;
  status: number;
  /** performance.now() when admission admitted the request (0 if it never did). */
  tAdmit: number;
  /** performance.now() when the request went upstream (0 if it never did). */
  tUp: number;
  done: boolean;
  /** Counted, not stored: a sampled-out refusal of a flood (see Recorder.finish). */
  sampledOut: boolean;
  /** What is gathered of the exchange as it streams, when the route keeps detail. */
  tap: DetailTap | null;
  /** On a replay: the wake it replays. */
  replayOf: string;
  /** Detail already built (a replay's, with its diff), recorded as it is. */
  prebuilt: CapturedDetail | null;
  /** The client's protocol: 'http/1.1', 'http/1.0' or 'h2'. */
  protocol: string;
  /** The client's connection is TLS (the span's url.scheme https). */
  secure: boolean;
  /** The path and query as sent upstream ('' until it is sent): the CLIENT span's url.full. */
  upstreamPath: string;
  /** The client's address when it is not the connection's (behind a trusted proxy: admission), else ''. */
  clientIp: string;
  /** With a client certificate: its subject and SHA-256 fingerprint (hex, lowercase), else ''. */
  tlsSubject: string;
  tlsFingerprint: string;
  /** W3C Trace Context: the trace the request belongs to and the gateway's span in it (hex, '' when none). */
  traceId: string;
  spanId: string;
  /** The caller's span ('' when the gateway began the trace), the flags sent on, and head sampling's choice. */
  parentSpanId: string;
  traceFlags: string;
  traceSampled: boolean;
  /** The gateway's error type when it answered with its own error body ('' otherwise): the span's error.type. */
  errorType: string;
}

/**
 * The client's address of a request the control thread answers for an edge thread
 * (a /v2 call handed over on loopback): its socket is the edge's.
 */
export const PEER: unique symbol = Symbol('wakegate.peer');
export type WithPeer = { [PEER]?: string };

/** What the recorder reads of a request (a real IncomingMessage, or a replay's stand-in). */
export type RequestInfo = Pick<IncomingMessage, 'method' | 'url' | 'headers'> & {
  socket: { remoteAddress?: string };
  /** False while the request's body has not all come (a client gone mid-body); a replay's has no such. */
  complete?: boolean;
};

/** Detail capture: redaction and the memory budget of detail waiting to be written. */
export interface DetailDeps {
  redactor: Redactor;
  budget: DetailBudget;
  /** A wake kept only its summary: its route's detail rate was spent, or the memory budget. */
  onSkip: (reason: 'rate' | 'memory') => void;
}

const MAX_UA = 512;
const cutAgent = (ua: string): string => (ua.length > MAX_UA ? ua.slice(0, MAX_UA) : ua);
/** A stored wake path is capped (DESIGN.md); the wake says when it was cut. */
export const MAX_PATH = 2048;

/** Turns finished exchanges into wakes (and request metrics) and hands them to capture. */
export class Recorder {
  /** Each route's request counters (by method and status class) and latency histogram, made once. */
  private readonly instruments = new Map<
    string,
    { counters: (HotCounterChild | undefined)[]; upstream: HotHistogramChild | null }
  >();

  private readonly clock: Clock;
  private readonly metrics: Metrics;
  private readonly region: string;
  private readonly capture: (w: Wake) => void;
  private readonly detail: DetailDeps | null;
  private readonly trace: ((x: Exchange, w: Wake, end: number) => void) | null;
  private readonly markKey: Buffer | null;
  /** The gateway's own deliveries' marks taken: each once. */
  private readonly marks = new Marks();

  /**
   * `capture` takes each finished wake; `detail` null: no route keeps detail; `trace`
   * (tracing on) is shown each finished wake of a trace, to hand on its span's inputs.
   */
  constructor(o: {
    clock: Clock;
    metrics: Metrics;
    region: string;
    capture: (w: Wake) => void;
    detail?: DetailDeps | null;
    trace?: ((x: Exchange, w: Wake, end: number) => void) | null;
    /** The key of the gateway's own deliveries' mark (delivery-mark.ts): their wakes say so. */
    markKey?: Buffer | null;
  }) {
    this.clock = o.clock;
    this.metrics = o.metrics;
    this.region = o.region;
    this.capture = o.capture;
    this.detail = o.detail ?? null;
    this.trace = o.trace ?? null;
    this.markKey = o.markKey ?? null;
  }

  /** Exchanges begun and not yet finished (requests in flight, tunnels open): a drain waits for them. */
  open = 0;

  begin(): Exchange {
    this.open++;
    const start = this.clock.now();
    return {
      id: newWakeId(start),
      start,
      t0: performance.now(),
      route: '',
      path: '',
      pathClean: false,
      key: null,
      consumer: 'anonymous',
      environment: '',
      reqBytes: 0,
      resBytes: 0,
      status: 0,
      tAdmit: 0,
      tUp: 0,
      done: false,
      sampledOut: false,
      tap: null,
      replayOf: '',
      prebuilt: null,
      protocol: 'http/1.1',
      secure: false,
      upstreamPath: '',
      clientIp: '',
      tlsSubject: '',
      tlsFingerprint: '',
      traceId: '',
      spanId: '',
      parentSpanId: '',
      traceFlags: '00',
      traceSampled: false,
      errorType: '',
    };
  }

  /** Records the exchange as a wake, once. */
  finish(req: RequestInfo, x: Exchange): void {
    if (x.done) return;
    x.done = true;
    this.open--;
    const end = performance.now();
    const route = x.route || 'none';
    let ins = this.instruments.get(route);
    if (ins === undefined) {
      ins = { counters: new Array(METHOD_COUNT * STATUS_CLASS_COUNT), upstream: null };
      this.instruments.set(route, ins);
    }
    const m = methodIndex(req.method);
    const k = m * STATUS_CLASS_COUNT + statusClassIndex(x.status);
    let c = ins.counters[k];
    if (c === undefined) {
      c = this.metrics.requests.labels(route, methodLabel(req.method), statusClass(x.status));
      ins.counters[k] = c;
    }
    c.inc();
    if (x.tUp > 0) {
      ins.upstream ??= this.metrics.upstreamLatency.labels(route);
      ins.upstream.observe((end - x.tUp) / 1000);
    }
    if (x.sampledOut) {
      this.metrics.wakesSampledOut.inc();
      return;
    }
    const ua = req.headers['user-agent'];
    let path = x.path;
    if (path === '') {
      const url = req.url ?? '';
      const q = url.indexOf('?');
      path = q === -1 ? url : url.slice(0, q);
    }
    // A gateway key is never stored, nor printed by the access log, wherever a client put it.
    if (!x.pathClean) path = withoutGatewayKeys(path);
    const cut = path.length > MAX_PATH;
    let detail: CapturedDetail | undefined;
    if ((x.tap !== null || x.prebuilt !== null) && this.detail !== null) {
      // A replay's detail (prebuilt) is always kept; an exchange's, while its route's rate allows.
      let d = x.prebuilt;
      if (d === null) {
        const tap = x.tap as DetailTap;
        // A body its client stopped sending before its end is kept as cut.
        if (tap.req !== null && req.complete === false) tap.req.short = true;
        const kept = (tap.req?.kept ?? 0) + (tap.res?.kept ?? 0);
        if (tap.settings.rate.take(this.clock.now(), x.status, kept)) d = buildDetail(tap, this.detail.redactor, x.id);
        else this.detail.onSkip('rate');
      }
      x.tap = null;
      x.prebuilt = null;
      if (d !== null) {
        if (this.detail.budget.take(detailSize(d))) detail = d;
        else this.detail.onSkip('memory');
      }
    }
    const w: Wake = {
      id: x.id,
      method: req.method ?? '',
      path: cut ? path.slice(0, MAX_PATH) : path,
      path_truncated: cut,
      refused: x.tUp === 0,
      route: x.route,
      status: x.status,
      latency_ms: Math.round(end - x.t0),
      consumer: withoutGatewayKeys(x.consumer),
      key_id: x.key?.id ?? '',
      environment: x.environment,
      region: this.region,
      captured_at: x.start,
      request_bytes: x.reqBytes,
      response_bytes: x.resBytes,
      client_ip: x.clientIp || ((req as WithPeer)[PEER] ?? req.socket.remoteAddress ?? ''),
      user_agent:
        ua === undefined
          ? ''
          : recordedAgent(
              // Keys out first, then cut: a key cut at MAX_UA would no longer read as one.
              cutAgent(withoutGatewayKeys(ua)),
              this.markKey,
              req,
              x.start,
              this.marks,
            ),
    };
    if (x.replayOf) w.replay_of = x.replayOf;
    if (x.protocol !== 'http/1.1') w.protocol = x.protocol;
    if (x.tlsFingerprint) {
      w.tls_subject = x.tlsSubject;
      w.tls_fingerprint = x.tlsFingerprint;
    }
    if (x.traceId) {
      w.trace_id = x.traceId;
      w.span_id = x.spanId;
    }
    if (detail) w.detail = detail;
    if (this.trace !== null && x.traceId !== '') this.trace(x, w, end);
    this.capture(w);
  }
}

/** Where the exchange of a /v2 call is kept on its request. */
export const EXCHANGE: unique symbol = Symbol('wakegate.exchange');
export type WithExchange = IncomingMessage & { [EXCHANGE]?: Exchange };
