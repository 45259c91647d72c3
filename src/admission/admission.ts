import type { IncomingMessage } from 'node:http';
import { authenticate, byCertificate, type ClassOf, hasScope, isRevoked, stands } from '../auth/authorize.js';
import type { KeyRecord } from '../auth/key.js';
import type { KeyRing } from '../auth/keyring.js';
import { type Exchange, PEER, type RequestInfo, type WithPeer } from '../capture/recorder.js';
import { holdsGatewayKey } from '../capture/text.js';
import type { Wake } from '../capture/wake.js';
import type { Clock } from '../clock.js';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics/index.js';
import { addressBucket } from '../ratelimit/address.js';
import type { LimitDecision, RequestLimiter } from '../ratelimit/types.js';
import { clientAddress } from './client-address.js';
import type { Ask, Gate } from './gate.js';
import { type HostFields, hostProblem } from './host.js';
import { objectOverridesToWrite, pairsOverrideToWrite, rawOverridesToWrite } from './override.js';
import {
  KEY_IN_URL,
  keyRefusal,
  lacksScope,
  noOrigin,
  noRoute,
  type Refusal,
  refusal,
  senderLacksScope,
  senderMissing,
  senderRevoked,
  UNAVAILABLE,
} from './refusal.js';
import { type Origin, type Route, type RouteTable, unsafePath } from './routes.js';
import { codingProblem } from './target.js';
import { LOOP_REFUSED, type ViaValues } from './via.js';

export interface AdmissionDeps {
  /** The route table in force now. */
  routes: RouteTable;
  ring: KeyRing;
  limiter: RequestLimiter | null;
  metrics: Metrics;
  /** The time of a /v2 call or a replay (a proxied request's is its exchange's start). */
  clock: Clock;
  /**
   * `server.trusted_proxies`: a request (proxied, or a /v2 call on any listener) from one
   * is the client's that its X-Forwarded-For names (client-address.ts), for the
   * per-address limits and the wake.
   */
  trusted?: (ip: string) => boolean;
  /** The gateway's `Via` name: a proxied request that names it has looped (via.ts). */
  via?: ViaValues;
}

/** An admitted request: where it goes, as whom, and the rate-limit headers of its answer. */
export interface Admitted {
  readonly ask: Ask;
  /** The route it matched (null: a /v2 call, matched by the API's router). */
  readonly route: Route | null;
  readonly origin: Origin | null;
  /** The key it is sent as (a replay's: the wake's key), or null. */
  readonly key: KeyRecord | null;
  /** Rate-limit headers for the answer (null when nothing is limited). */
  limitHeaders: readonly string[] | null;
}

/** An admitted proxied request or replay: it matched a route, and has an origin. */
export interface Routed extends Admitted {
  readonly route: Route;
  readonly origin: Origin;
}

export type Verdict<A extends Admitted = Admitted> = A | Refusal | Promise<A | Refusal>;

export const isRefusal = (v: Admitted | Refusal): v is Refusal => 'error' in v;

/** A path refusal's words as a replay's reason ("the path must not ..." is the wake's, not the caller's). */
const unsent = (why: string): string => `its ${why.replace(/^the /, '')}`;

/** Of the refusals past the unauthenticated limit, one in this many is stored as a wake (all are counted). */
const FLOOD_SAMPLE = 100;
const READ = new Set(['GET', 'HEAD', 'OPTIONS']);
const MAX_CONSUMER = 128;

/**
 * The one admission every request passes, whichever way it entered (DESIGN.md, "One
 * admission"): route match against the route table in force now, then the key, its
 * environment choosing the origin, the scope, the buckets, and the decision with its
 * headers and error. The entry points (the proxy and its upgrades, the /v2 API, a
 * replay) differ only in what they do with an admitted request.
 *
 * The exchange, when there is one, is filled in as the steps learn (route, key,
 * consumer, environment), so a refused request is recorded with all it is known to
 * be. The synchronous path allocates no closure: a promise only when the limiter
 * waits on Redis.
 */
export class Admission {
  private floodSeq = 0;

  /** The class of an environment in the config in force now (a key's standing: stands()). */
  private readonly classOf: ClassOf = (environment) => this.d.routes.classOf(environment);

  constructor(private readonly d: AdmissionDeps) {}

  /** A proxied request, plain or an upgrade (HTTP/1.1 or an HTTP/2 stream). */
  request(req: RequestInfo & HostFields, x: Exchange): Verdict<Routed> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const c = req.headers['x-consumer-id'];
    const raw = req.rawHeaders;
    const peer = req.socket.remoteAddress ?? '';
    const ip =
      this.d.trusted === undefined ? peer : clientAddress(peer, req.headers['x-forwarded-for'], this.d.trusted);
    if (ip !== peer) x.clientIp = ip;
    const ask: Ask = {
      kind: 'proxy',
      method: req.method ?? '',
      overridesToWrite: raw !== undefined ? rawOverridesToWrite(raw) : objectOverridesToWrite(req.headers),
      url,
      path: q === -1 ? url : url.slice(0, q),
      query: q === -1 ? '' : url.slice(q),
      authorization: req.headers.authorization,
      fingerprint: x.tlsFingerprint,
      consumer: typeof c === 'string' ? c : undefined,
      ip,
      now: x.start,
      gate: null,
      keyId: '',
      caller: null,
      environment: '',
      looped: this.d.via?.passed(req.headers.via) === true,
    };
    // Host: one line of it, required over HTTP/1.1 (RFC 9112 §3.2), uri-host and port only
    // (RFC 9110 §7.2); HTTP/2's :authority alike (host.ts). Anything else would reach the
    // origin as X-Forwarded-Host, which origins build absolute URLs from.
    const bad = hostProblem(req) ?? codingProblem(req.headers['transfer-encoding']);
    if (bad !== null) {
      x.path = ask.path;
      x.environment = this.d.routes.fallbackEnvironment;
      x.route = 'none';
      return this.addressCharged(ask, x, bad);
    }
    return this.admit(ask, x) as Verdict<Routed>;
  }

  /**
   * Whether `authorization` names a known, live key: admission's key step alone, nothing
   * drawn, touched or recorded. What `Expect: 100-continue` on /v2 asks before the body
   * is invited; the call itself then passes admission whole (call()).
   */
  identifies(authorization: string | undefined): boolean {
    return authenticate(this.d.ring, authorization, this.d.clock.now(), this.classOf).error === null;
  }

  /**
   * A /v2 call its router matched to an operation asking `gate`; `x` is its exchange,
   * when it is recorded. Its client is worked out as a proxied request's is (clientOf).
   */
  call(req: IncomingMessage, gate: Gate, x: Exchange | null): Verdict {
    const ip = this.clientOf(req, x);
    const ask: Ask = {
      kind: 'api',
      method: req.method ?? '',
      overridesToWrite: false,
      url: '',
      path: '',
      query: '',
      authorization: req.headers.authorization,
      fingerprint: '',
      consumer: undefined,
      ip,
      now: this.d.clock.now(),
      gate,
      keyId: '',
      caller: null,
      environment: '',
      looped: false,
    };
    // The Host rule of a proxied request (request()), on whichever listener the call came.
    const bad = hostProblem(req);
    if (bad !== null) return this.addressCharged(ask, x, bad);
    return this.admit(ask, x);
  }

  /**
   * The client's address of a /v2 call, read as a proxied request's is (client-address.ts),
   * on whichever listener it came: its connection's peer (for a call an edge thread handed
   * over, the peer that edge's connection has, PEER), or, when that is a trusted proxy, the
   * address X-Forwarded-For names. The per-address buckets draw from it; `x`, when given,
   * keeps it as the wake's client_ip when it is not the peer.
   */
  clientOf(req: Pick<IncomingMessage, 'headers' | 'socket'>, x: Exchange | null): string {
    const peer = (req as WithPeer)[PEER] ?? req.socket.remoteAddress ?? '';
    if (this.d.trusted === undefined) return peer;
    const ip = clientAddress(peer, req.headers['x-forwarded-for'], this.d.trusted);
    if (ip !== peer && x !== null) x.clientIp = ip;
    return ip;
  }

  /**
   * A replay of `wake` asked for by `caller`: the wake's request, sent as the wake's
   * key to the origin of its environment, through the route that matches its path now;
   * `caller` needs that route's scope and is charged for it. `headers` are the captured
   * request headers the replay sends (a method override among them makes it a write).
   * Nothing is recorded here: a refused replay is told in its /v2 call's answer.
   */
  replay(
    wake: Pick<Wake, 'method' | 'path' | 'environment' | 'key_id'>,
    caller: KeyRecord,
    headers: readonly (readonly [string, string])[] | null = null,
  ): Verdict<Routed> {
    const ask: Ask = {
      kind: 'replay',
      method: wake.method,
      overridesToWrite: pairsOverrideToWrite(headers),
      url: '',
      path: wake.path,
      query: '',
      authorization: undefined,
      fingerprint: '',
      consumer: undefined,
      ip: '',
      now: this.d.clock.now(),
      gate: null,
      keyId: wake.key_id,
      caller,
      environment: wake.environment,
      looped: false,
    };
    return this.admit(ask, null) as Verdict<Routed>;
  }

  /**
   * A replay refused by its checks (an unknown wake, one that cannot be sent again) or by
   * its admission (a scope, a route): one token from the caller's own bucket, as a keyed
   * request refused is charged (keyCharged), so that no key looks wakes up in storage
   * without limit; past it, the 429 instead of the refusal.
   */
  replayRefused(caller: KeyRecord, error: GatewayError): Refusal | Promise<Refusal> {
    const limiter = this.d.limiter;
    if (limiter === null) return refusal(error);
    const dec = limiter.check(caller, '', null, this.d.clock.now());
    if (dec instanceof Promise) return dec.then((d) => this.refusedWith(d, error));
    return this.refusedWith(dec, error);
  }

  /** The steps, in order. A /v2 call and a replay have no exchange of their own to fill here (null). */
  private admit(a: Ask, x: Exchange | null): Verdict {
    // Route match: a /v2 call's router has matched it; anything else against the table in force now.
    let route: Route | null = null;
    let gate = a.gate;
    if (gate === null) {
      if (a.kind === 'proxy') {
        const bad = this.target(a, x as Exchange);
        if (bad !== null) return this.addressCharged(a, x, bad);
      } else {
        // A replay's path is its wake's: one kept by an earlier version may be what the proxy refuses now.
        const bad = unsafePath(a.path);
        if (bad !== null) {
          return refusal(new GatewayError('conflict', `${unsent(bad)}; this wake cannot be replayed`, 'wake_id'));
        }
      }
      route = this.d.routes.match(a.path);
      if (route === null) {
        if (x !== null) x.route = 'none';
        return a.kind === 'proxy' ? this.addressCharged(a, x, noRoute(a)) : refusal(noRoute(a));
      }
      // A path a lenient origin reads as another route: refused, never rewritten.
      const ambiguous = this.d.routes.ambiguity(a.path, route);
      if (ambiguous !== null) {
        if (x !== null) x.route = 'none';
        return a.kind === 'replay'
          ? refusal(new GatewayError('conflict', `${ambiguous}; this wake cannot be replayed`, 'wake_id'))
          : this.addressCharged(a, x, new GatewayError('invalid_request', ambiguous, 'path'));
      }
      gate = route;
    }
    if (x !== null) {
      x.route = gate.name;
      if (gate.defaultEnvironment !== null) x.environment = gate.defaultEnvironment;
    }
    // Come round (via.ts): refused with its route named, always a 508. In a loop the client is
    // the gateway itself, whose allowance a 429 would hide the loop behind; but the Via can be
    // forged (every origin sees it), so it draws from the address's allowance for refusals, and
    // past it is sampled as those are: not a stored wake for each.
    if (a.looped) return this.loopCharged(a, x);
    // The key: a header read against the ring, or a replay's wake's key by its id.
    let key: KeyRecord | null = null;
    if (a.kind === 'replay') {
      if (a.keyId !== '') {
        key = this.d.ring.get(a.keyId) ?? null;
        if (key === null || isRevoked(key, a.now) || !stands(key, this.classOf, null))
          return refusal(senderRevoked(a.keyId));
      }
    } else if (
      gate.auth === 'required' ||
      gate.auth === 'mtls' ||
      (gate.auth === 'optional' && a.authorization !== undefined)
    ) {
      // mtls: the key the client certificate names (keys' tls_fingerprint), never a header.
      const found =
        gate.auth === 'mtls'
          ? byCertificate(this.d.ring, a.fingerprint, a.now, this.classOf)
          : authenticate(this.d.ring, a.authorization, a.now, this.classOf);
      if (found.key !== null && x !== null) {
        // Known even when refused (revoked, missing scope): the wake names the key.
        x.key = found.key;
        x.consumer = found.key.consumer;
        x.environment = found.key.environment;
      }
      if (found.error !== null) return this.addressCharged(a, x, found.error);
      key = found.key;
      this.d.ring.touch(key.id, a.now);
    } else if (x !== null && a.consumer !== undefined && a.consumer !== '') {
      x.consumer = a.consumer.length > MAX_CONSUMER ? a.consumer.slice(0, MAX_CONSUMER) : a.consumer;
    }
    // The environment chooses the origin: a replay's is its wake's, else the key's, else the route's.
    let origin: Origin | null = null;
    if (route !== null) {
      const env = a.kind === 'replay' ? a.environment : (key?.environment ?? route.defaultEnvironment);
      origin = route.origins.get(env) ?? null;
      if (origin === null) return this.keyCharged(a, key, gate, noOrigin(a, route.name, env));
    }
    // The scope: the caller's (a replay's caller, or the key), then a replay's sender's.
    const caller = a.kind === 'replay' ? a.caller : key;
    if (gate.scopes !== null) {
      // A read only when the origin cannot be told to run another method (override.ts).
      const scope = READ.has(a.method) && !a.overridesToWrite ? gate.scopes.read : gate.scopes.write;
      if (caller !== null && !hasScope(caller, scope))
        return this.keyCharged(a, caller, gate, lacksScope(a, scope, gate.name));
      if (a.kind === 'replay' && key !== null && !hasScope(key, scope)) {
        return refusal(senderLacksScope(a.keyId, scope, gate.name));
      }
    }
    if (a.kind === 'replay' && key === null && (gate.auth === 'required' || gate.auth === 'mtls'))
      return refusal(senderMissing(gate.name));
    // The buckets: the caller's, and the route's or operation's own policy.
    const admitted: Admitted = { ask: a, route, origin, key, limitHeaders: null };
    const limiter = this.d.limiter;
    if (limiter === null || gate.uncharged === true) return admitted;
    // A request with no key draws from its address's bucket, an IPv6 client's /64's (ratelimit/address.ts);
    // a keyed one never reads the address, so it is not worked out for it.
    const decision = limiter.check(caller, caller === null ? addressBucket(a.ip) : a.ip, gate.policy, a.now);
    // A closure only when the decision waits on Redis: the usual path allocates none.
    if (decision instanceof Promise) return decision.then((dec) => this.settle(dec, admitted));
    return this.settle(decision, admitted);
  }

  /**
   * A proxied request's target: a safe path, and no gateway key in the URL. A key in
   * a URL ends up in every log and history on its way: refused, never forwarded (the
   * wake keeps the path with the key replaced, see the recorder). The URL is looked at
   * for a key here once: the exchange says its path holds none.
   */
  private target(a: Ask, x: Exchange): GatewayError | null {
    x.path = a.path;
    x.environment = this.d.routes.fallbackEnvironment;
    const bad = unsafePath(a.path, a.query);
    if (bad !== null) {
      x.route = 'none';
      return new GatewayError('invalid_request', bad, 'path');
    }
    if (holdsGatewayKey(a.url)) {
      x.route = 'none';
      return KEY_IN_URL;
    }
    x.pathClean = true;
    return null;
  }

  /**
   * The answer of a request refused with no key admitted: a refused key's 401, or what
   * was refused before any key was read (no route, an unsafe path or Host, a key in the
   * URL). Each draws from its address's `unauthenticated` bucket; past it a 429, of which
   * only a sample is stored as wakes, so no address floods the store with refusals. The
   * key lookup itself is one in-memory hash, so it runs first: a valid key on a route is
   * never refused because others behind the same address (a NAT) send bad requests.
   */
  private addressCharged(a: Ask, x: Exchange | null, error: GatewayError): Refusal | Promise<Refusal> {
    const over = this.d.limiter?.refused(addressBucket(a.ip), a.now) ?? null;
    if (over instanceof Promise) return over.then((o) => this.flood(x, error, o));
    return this.flood(x, error, over);
  }

  /**
   * A keyed request refused once its key was read (no origin for its environment, a scope
   * it lacks) takes a token from its key's bucket as every keyed request does: past the
   * limit it is a 429, not a 403 or 404 for ever, each a wake. A replay's refusal is told
   * in its /v2 call's answer, and charged there (replayRefused).
   */
  private keyCharged(a: Ask, caller: KeyRecord | null, gate: Gate, error: GatewayError): Refusal | Promise<Refusal> {
    const limiter = this.d.limiter;
    if (limiter === null || gate.uncharged === true || caller === null || a.kind === 'replay') return refusal(error);
    const dec = limiter.check(caller, a.ip, gate.policy, a.now);
    if (dec instanceof Promise) return dec.then((d) => this.refusedWith(d, error));
    return this.refusedWith(dec, error);
  }

  private refusedWith(dec: LimitDecision, error: GatewayError): Refusal {
    return dec.allowed ? refusal(error, dec.headers) : this.limited(dec);
  }

  private loopCharged(a: Ask, x: Exchange | null): Refusal | Promise<Refusal> {
    const over = this.d.limiter?.refused(addressBucket(a.ip), a.now) ?? null;
    if (over instanceof Promise) return over.then((o) => this.looped(x, o));
    return this.looped(x, over);
  }

  private looped(x: Exchange | null, over: LimitDecision | null): Refusal {
    if (over !== null && !over.allowed && x !== null) x.sampledOut = ++this.floodSeq % FLOOD_SAMPLE !== 0;
    return keyRefusal(LOOP_REFUSED);
  }

  private flood(x: Exchange | null, error: GatewayError, over: LimitDecision | null): Refusal {
    if (over === null) return keyRefusal(error);
    if (over.allowed) return keyRefusal(error, over.headers);
    if (x !== null) x.sampledOut = ++this.floodSeq % FLOOD_SAMPLE !== 0;
    return this.limited(over);
  }

  /** Refused by the buckets, or admitted with the headers of its decision. */
  private settle(dec: LimitDecision, admitted: Admitted): Admitted | Refusal {
    if (!dec.allowed) return this.limited(dec);
    admitted.limitHeaders = dec.headers;
    return admitted;
  }

  private limited(dec: LimitDecision): Refusal {
    if (dec.unavailable) return refusal(UNAVAILABLE, dec.headers);
    this.d.metrics.rateLimited.labels(dec.policy ?? 'unknown').inc();
    return refusal(new GatewayError('rate_limit_exceeded', undefined, null, dec.retryAfter), dec.headers);
  }
}
