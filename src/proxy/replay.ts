import { type Admission, isRefusal, type Routed } from '../admission/admission.js';
import { pairsOverrideToWrite } from '../admission/override.js';
import { upstreamPath } from '../admission/routes.js';
import type { ViaValues } from '../admission/via.js';
import type { KeyRecord } from '../auth/key.js';
import { buildDetail, DetailRate, type DetailSalts, detailSettings, newTap } from '../capture/detail.js';
import { storedBody, type WakeDetail } from '../capture/detail-types.js';
import type { Exchange, Recorder, RequestInfo } from '../capture/recorder.js';
import type { Redactor } from '../capture/redact.js';
import type { Wake } from '../capture/wake.js';
import { GatewayError, missing, unprocessable } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import { idTime } from '../ids.js';
import type { Logger } from '../log.js';
import { type Answer, diffAnswers } from '../replay/diff.js';
import { type Filled, type FillRefusal, fillRedacted } from '../replay/fill.js';
import { replaySalts } from '../replay/salts.js';
import type { WakeQuerier } from '../store/wakes.js';
import { TraceStart, traceparentOf } from '../tracing/context.js';
import { headerValue, passedValue } from './header-value.js';
import { forwardRequestHeaders } from './headers.js';
import { Upstreams } from './upstream.js';

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);
/** What a replay keeps when its route no longer keeps detail (its own detail is never rate limited). */
const REPLAY_DETAIL = detailSettings({
  headers: true,
  bodies: true,
  maxBodyBytes: 32_768,
  rate: new DetailRate(0),
  keepOpaque: false,
});

export interface ReplayDeps {
  wakes: WakeQuerier;
  /**
   * The one admission: the wake's request through the route matching its path now,
   * sent as the wake's key, its caller needing that route's scope and charged for it
   * (its bucket and the route's policy), as a request it sent.
   */
  admission: Admission;
  recorder: Recorder;
  redactor: Redactor;
  events: EventBus;
  log: Logger;
  /** A replay is a request of its own: a new trace when tracing is on (the captured traceparent is not sent). */
  trace?: TraceStart;
  /** The gateway's `Via` values: a replay says it passed here, as a proxied request does. */
  via?: ViaValues;
  /** How many replays may run at once: in the process, and for one caller key (REPLAY_LIMITS by default). */
  limits?: ReplayLimits;
}

export interface ReplayLimits {
  running: number;
  perKey: number;
}

/**
 * Replays running at once (checked, being sent, or waiting for the origin's answer):
 * a bucket with a big burst would otherwise let one `wakes:write` key hold hundreds of
 * origin requests open. `running` bounds each environment's callers apart (a sandbox's
 * keys, which may issue more of themselves, never take production's places), `perKey`
 * one caller key. Past either bound a replay is refused with 429, as a limit is.
 */
export const REPLAY_LIMITS: ReplayLimits = { running: 64, perKey: 8 };
/** Retry-After of a replay refused for the bound: a place frees when a running replay's answer is in. */
const REPLAY_RETRY_AFTER_S = 1;
/**
 * A replay's whole answer arrives within this (or the route's timeout_ms when longer), else
 * its wake says 504: an origin streaming for ever (server-sent events) or sending 1xx
 * answers for ever (each re-arms undici's head timer) would hold its place, and a stop, for good.
 */
const REPLAY_ANSWER_MS = 60_000;
/** At a stop, replays still running (the edges drained already) get this long, then are cut and recorded. */
const REPLAY_CLOSE_MS = 2_000;
/** Replays of replays followed back to the first wake, at most. */
const MAX_CHAIN = 32;

const NO_TRACE = new TraceStart({ enabled: false, sampleRatio: 0 });

/** One place fewer under `k` (the entry goes at none). */
const less = (m: Map<string, number>, k: string): void => {
  const n = (m.get(k) ?? 1) - 1;
  if (n > 0) m.set(k, n);
  else m.delete(k);
};

export interface ReplayOptions {
  allowUnsafe: boolean;
  ignore: string[];
  /** Values for redacted query parameters, form fields, JSON values (`$.card.cvc`) or headers; scalars only. */
  set?: Record<string, unknown>;
  /** Told the rate-limit headers of the replay's admission (its one charge), admitted or refused. */
  limitHeaders?: (headers: readonly string[]) => void;
}

/**
 * POST /v2/wakes/{id}/replay: re-sends a captured request through the route that
 * matches its path now, to that route's origin of its environment, as a wake of its
 * own (`replay_of`), and
 * when the answer is in, records how it differs from the original answer (`diff`)
 * and raises `replay.finished`. Checks run before anything is sent; the sending
 * itself runs after the 202.
 */
export class Replayer {
  private readonly upstreams = new Upstreams();
  private readonly running = new Set<Promise<void>>();
  /** Each running replay's cut: its origin request aborted, its wake recorded as not answered. */
  private readonly cuts = new Set<(why: 'stop') => void>();
  /** Places taken, from the first check to the answer recorded: per caller's environment and per caller key. */
  private readonly takenIn = new Map<string, number>();
  private readonly takenBy = new Map<string, number>();
  private readonly limits: ReplayLimits;

  constructor(private readonly d: ReplayDeps) {
    this.limits = d.limits ?? REPLAY_LIMITS;
  }

  /** Takes a running place for `caller`, or refuses (429) when its environment or the key has none left. */
  private take(caller: KeyRecord): void {
    const mine = this.takenBy.get(caller.id) ?? 0;
    const env = this.takenIn.get(caller.environment) ?? 0;
    const full =
      mine >= this.limits.perKey
        ? `this key already has ${this.limits.perKey} replays running; wait for one to finish`
        : env >= this.limits.running
          ? `the keys of ${caller.environment} already have ${this.limits.running} replays running on this gateway; wait for one to finish`
          : null;
    if (full !== null) throw new GatewayError('rate_limit_exceeded', full, null, REPLAY_RETRY_AFTER_S);
    this.takenIn.set(caller.environment, env + 1);
    this.takenBy.set(caller.id, mine + 1);
  }

  private give(caller: KeyRecord): void {
    less(this.takenIn, caller.environment);
    less(this.takenBy, caller.id);
  }

  /**
   * Checks, then starts, a replay by `caller`. The wake must be one that can be sent
   * again (its path whole, its body captured whole, a safe method or allow_unsafe);
   * then it passes the admission every request passes: the caller must be able to
   * send the request itself (the scope the route matching the path today needs) and
   * is charged to its own bucket; a wake whose key has since been revoked, or could
   * not send it today, is refused (409): the origin would get a request nobody may send.
   * Before any of it, the bound on running replays (REPLAY_LIMITS): past it, 429 and
   * nothing is charged.
   */
  async start(
    env: string,
    wakeId: string,
    o: ReplayOptions,
    caller: KeyRecord,
  ): Promise<{ wake: Wake; replayWakeId: string }> {
    // Taken before the first await, so concurrent calls cannot all pass the check.
    this.take(caller);
    let started = false;
    const charge = { taken: false };
    try {
      const r = await this.check(env, wakeId, o, caller, charge);
      started = true;
      return r;
    } catch (e) {
      // Refused before its admission charged it (an unknown wake, one that cannot be sent
      // again, a scope): one token of the caller's bucket, past it the 429.
      if (!(e instanceof GatewayError) || charge.taken) throw e;
      const r = await this.d.admission.replayRefused(caller, e);
      if (r.headers.length > 0) o.limitHeaders?.(r.headers);
      throw r.error;
    } finally {
      if (!started) this.give(caller);
    }
  }

  /** start's checks, then the send (which gives the place back once its wake is recorded). */
  private async check(
    env: string,
    wakeId: string,
    o: ReplayOptions,
    caller: KeyRecord,
    charge: { taken: boolean },
  ): Promise<{ wake: Wake; replayWakeId: string }> {
    const t = wakeId.startsWith('wk_') ? idTime(wakeId) : null;
    const w = t === null ? null : await this.d.wakes.get(env, wakeId, t);
    if (!w || t === null) throw missing('wake', 'wake_id');
    if (w.path_truncated) {
      throw new GatewayError(
        'conflict',
        "this wake's path was cut at 2,048 characters, so it cannot be replayed",
        'wake_id',
      );
    }
    if (!SAFE.has(w.method) && !o.allowUnsafe) {
      throw unprocessable(
        'allow_unsafe',
        `${w.method} is not a safe method: replaying it may change data at the origin; send allow_unsafe: true to replay it anyway`,
      );
    }
    const detail = await this.d.wakes.detail(env, wakeId, t);
    if (!detail) {
      throw new GatewayError(
        'conflict',
        'this wake kept no detail (its route captures none, its route was over capture.detail.max_per_second or max_bytes_per_second that second, or detail was over its memory budget), so it cannot be replayed',
      );
    }
    // A safe method whose captured headers tell the origin to run another (X-HTTP-Method-Override: DELETE) is not safe.
    if (!o.allowUnsafe && pairsOverrideToWrite(detail.request_headers)) {
      throw unprocessable(
        'allow_unsafe',
        `this ${w.method} carries a method override header naming a method that is not safe: replaying it may change data at the origin; send allow_unsafe: true to replay it anyway`,
      );
    }
    if (
      w.request_bytes > 0 &&
      (!detail.request_body || detail.request_body.truncated || detail.request_body.encoding === 'omitted')
    ) {
      throw new GatewayError(
        'conflict',
        'the request body was not captured whole (over capture.detail.max_body_bytes, bodies are not kept, or it was kept only as size and SHA-256: over its reading budget, or a format opaque_bodies: keep would keep), so it cannot be replayed faithfully',
      );
    }
    // Admitted as any request is (src/admission), against the routes in force now.
    const v = await this.d.admission.replay(w, caller, detail.request_headers);
    // Admitted, it was charged; refused by the buckets, it was told so: nothing more is drawn.
    charge.taken = !isRefusal(v) || v.error.type === 'rate_limit_exceeded' || v.error.status === 503;
    const limited = isRefusal(v) ? v.headers : v.limitHeaders;
    if (limited !== null) o.limitHeaders?.(limited);
    if (isRefusal(v)) throw v.error;
    const { route, key: original } = v;
    // Only a caller that may send the request learns what set must give.
    const fill = fillRedacted(detail, o.set ?? {}, (n) => this.d.redactor.isRedactedHeader(n));
    if (!fill.ok) throw refusalError(fill.refusal);
    const { filled, values } = fill;
    // Marked as the wake it replays is: a replay's own markers carry the first wake's salt.
    const first = await this.firstOf(env, w);
    const x = this.d.recorder.begin();
    x.route = route.name;
    x.environment = w.environment;
    x.consumer = w.consumer;
    x.key = original;
    x.path = w.path;
    x.replayOf = w.id;
    (this.d.trace ?? NO_TRACE).begin(x, undefined);
    // set's values in every spelling the request holds them in: a header's as its encoder passes it too.
    const salts = replaySalts(
      first,
      x.id,
      values.flatMap((v) => [v, passedValue(v)]),
    );
    const p = this.send({ w, detail, filled, x, admitted: v, o: { ...o, by: caller.id, salts } })
      .catch((e: Error) => this.d.log.error('replay failed', { wake_id: w.id, err: e }))
      .finally(() => {
        this.running.delete(p);
        this.give(caller);
      });
    this.running.add(p);
    return { wake: w, replayWakeId: x.id };
  }

  /**
   * The id of the wake a chain of replays began with (`w` itself when it is no replay):
   * the salt of every marker along it, so a replay of a replay diffs equal values as
   * equal. A chain longer than MAX_CHAIN, or one whose first wake is gone, is salted
   * with the earliest wake still found.
   */
  private async firstOf(env: string, w: Wake): Promise<string> {
    let id = w.id;
    let of = w.replay_of;
    for (let n = 0; of && n < MAX_CHAIN; n++) {
      const t = of.startsWith('wk_') ? idTime(of) : null;
      const before = t === null ? null : await this.d.wakes.get(env, of, t);
      if (!before) break;
      id = before.id;
      of = before.replay_of;
    }
    return id;
  }

  /** Sends the admitted replay and records its wake, with how its answer differs from the original's. */
  private async send(r: {
    w: Wake;
    detail: WakeDetail;
    filled: Filled;
    x: Exchange;
    admitted: Routed;
    o: ReplayOptions & { by: string; salts: DetailSalts };
  }): Promise<void> {
    const { w, detail, filled, x, o } = r;
    const { route, origin } = r.admitted;
    // The path as sent upstream: the wake's, with the query its fill made.
    const path = upstreamPath(route, origin, w.path, filled.query);
    // Its CLIENT span names it (url.full), as a proxied request's does.
    x.upstreamPath = path;
    const settings = route.detail;
    // The captured headers (redacted ones only when set gave them), less Content-Length.
    const raw: string[] = [];
    // Stored values (and set's) pass through the header encoder: none can fail the request.
    for (const [k, v] of filled.headers) if (k.toLowerCase() !== 'content-length') raw.push(k, passedValue(v));
    const body = filled.body !== null && filled.body.length > 0 ? filled.body : null;
    const headers = forwardRequestHeaders(raw, {
      // As the proxy does: Authorization is the gateway's only when it carried the request's key
      // (a keyless route's Authorization is the origin's own, sent from set when it was redacted).
      dropAuthorization: Boolean(x.key),
      clientIp: w.client_ip,
      clientTrusted: false,
      proto: 'http',
      originHost: origin.host,
      identity: x.key ? [x.key.id, x.key.consumer, x.key.environment] : null,
      traceparent: traceparentOf(x),
      keepTracestate: false,
      via: this.d.via?.of(1, 1),
    });
    headers.push('x-wakegate-replay-of', headerValue(w.id), 'x-wakegate-replayed-by', headerValue(o.by));
    if (body) headers.push('content-length', String(body.length));
    const tap = newTap(settings ?? REPLAY_DETAIL, filled.query, raw);
    if (body) tap.req?.add(body);
    x.reqBytes = body?.length ?? 0;
    x.tUp = performance.now();
    let answer: Answer;
    // Bounds of our own, which 1xx answers and a body's parts do not re-arm: the head within
    // timeout_ms, the whole answer within REPLAY_ANSWER_MS; and a stop's cut (close).
    const ac = new AbortController();
    let cutFor: 'late' | 'stop' | null = null;
    const cut = (why: 'late' | 'stop') => {
      if (cutFor !== null) return;
      cutFor = why;
      ac.abort(new Error(why === 'stop' ? 'the gateway stopped' : 'no answer in time'));
    };
    this.cuts.add(cut);
    const headTimer = setTimeout(() => cut('late'), route.cfg.timeout_ms);
    const answerTimer = setTimeout(() => cut('late'), Math.max(REPLAY_ANSWER_MS, route.cfg.timeout_ms));
    try {
      const res = await this.upstreams.pool(origin).request({
        path,
        method: w.method as 'GET',
        headers,
        body,
        signal: ac.signal,
        // The route's timeout_ms, as for the request it replays: for the answer's head, and between its body's parts.
        headersTimeout: route.cfg.timeout_ms,
        bodyTimeout: route.cfg.timeout_ms,
      });
      clearTimeout(headTimer);
      x.status = res.statusCode;
      const flat: string[] = [];
      for (const [k, v] of Object.entries(res.headers))
        for (const one of [v].flat()) if (one !== undefined) flat.push(k, one);
      tap.resHeaders = flat;
      for await (const c of res.body) {
        x.resBytes += (c as Buffer).length;
        tap.res?.add(c as Buffer);
      }
      const built = buildDetail(tap, this.d.redactor, o.salts);
      answer = { status: x.status, headers: built.response_headers, body: storedBody(built.response_body) };
      x.prebuilt = built;
    } catch (e) {
      // No answer within the route's timeout_ms is 504 upstream_timeout, as it is for a proxied request;
      // one cut by a stop is 503 (the gateway's, not the origin's).
      const code = (e as { code?: string }).code;
      const stopped = (cutFor as string | null) === 'stop';
      const late = cutFor === 'late' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
      x.status = stopped ? 503 : late ? 504 : 502;
      x.errorType = stopped ? 'service_unavailable' : late ? 'upstream_timeout' : 'upstream_unavailable';
      answer = { status: x.status, headers: null, body: null };
      x.prebuilt = { ...buildDetail(tap, this.d.redactor, o.salts), response_headers: null, response_body: null };
      this.d.log.warn('replay could not reach the origin', { wake_id: w.id, err: e as Error });
    } finally {
      clearTimeout(headTimer);
      clearTimeout(answerTimer);
      this.cuts.delete(cut);
    }
    const before: Answer = { status: w.status, headers: detail.response_headers, body: detail.response_body };
    const diff = diffAnswers(before, answer, o.ignore);
    x.prebuilt.diff = diff;
    const info: RequestInfo = {
      method: w.method,
      url: `${w.path}${detail.query}`,
      headers: { 'user-agent': 'wakegate-replay' },
      socket: { remoteAddress: '' },
    };
    this.d.recorder.finish(info, x);
    const data: Record<string, unknown> = { wake_id: w.id, replay_wake_id: x.id, diff };
    // The replay's own trace, when it has one: its deliveries' spans link to the replay's span.
    if (x.traceId !== '') data.trace = { trace_id: x.traceId, span_id: x.spanId };
    this.d.events.emit('replay.finished', w.environment, data);
  }

  /**
   * Waits for running replays (REPLAY_CLOSE_MS at most: then they are cut, and recorded as
   * cut by the stop), then closes the pools.
   */
  async close(): Promise<void> {
    const timer = setTimeout(() => {
      for (const cut of [...this.cuts]) cut('stop');
    }, REPLAY_CLOSE_MS);
    await Promise.allSettled([...this.running]);
    clearTimeout(timer);
    await this.upstreams.close();
  }
}

/** The error a refused fill answers with: 400 naming `set.<name>`, or 409. */
function refusalError(r: FillRefusal): GatewayError {
  if (r.kind === 'set') return new GatewayError('invalid_request', r.message, `set.${r.name}`);
  if (r.kind === 'missing') {
    return new GatewayError(
      'conflict',
      `the request holds redacted values at ${r.names.join(', ')}; a redaction marker is never sent as if it were the value: supply them in set, e.g. {"set": {${JSON.stringify(r.names[0])}: "..."}}`,
      'set',
    );
  }
  return new GatewayError(
    'conflict',
    `the request holds redacted values where set cannot name them (${r.where.join('; ')}); a redaction marker is never sent as if it were the value, so it cannot be replayed`,
  );
}
