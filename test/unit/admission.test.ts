import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { Admission, type Admitted, isRefusal, type Routed, type Verdict } from '../../src/admission/admission.js';
import { apiGate } from '../../src/admission/gate.js';
import { validAuthority } from '../../src/admission/host.js';
import type { Refusal } from '../../src/admission/refusal.js';
import { RouteTable } from '../../src/admission/routes.js';
import type { KeyRecord } from '../../src/auth/key.js';
import { KeyRing } from '../../src/auth/keyring.js';
import { hashSecret } from '../../src/auth/secrets.js';
import { type Exchange, PEER, Recorder } from '../../src/capture/recorder.js';
import type { Wake } from '../../src/capture/wake.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/index.js';
import { newSecret } from '../../src/ids.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';
import { RateLimiter } from '../../src/ratelimit/limiter.js';
import type { LimitDecision, RequestLimiter } from '../../src/ratelimit/types.js';

/**
 * The one admission (DESIGN.md "One admission"), for each of its three entries: a
 * proxied request, a /v2 call, a replay. Real key ring, real buckets, a fake clock,
 * no store, no listener.
 */

const T0 = Date.UTC(2026, 0, 1);
const ROUTES = [
  {
    name: 'api',
    prefix: '/api',
    scopes: { read: 'api:read', write: 'api:write' },
    origins: { production: 'http://127.0.0.1:1/base', sandbox: 'http://127.0.0.1:2' },
  },
  {
    name: 'live-only',
    prefix: '/live',
    scopes: { read: 'api:read', write: 'api:write' },
    origins: { production: 'http://127.0.0.1:3' },
  },
  { name: 'open', prefix: '/open', auth: 'none', origins: { production: 'http://127.0.0.1:4' } },
  {
    name: 'maybe',
    prefix: '/maybe',
    auth: 'optional',
    rate_limit: 'reports',
    origins: { production: 'http://127.0.0.1:5' },
  },
];

interface Setup {
  admission: Admission;
  clock: ManualClock;
  metrics: ReturnType<typeof createMetrics>;
  recorder: Recorder;
  wakes: Wake[];
  ring: KeyRing;
  key: (scopes: string[], more?: Partial<KeyRecord>, cls?: 'live' | 'test') => { record: KeyRecord; secret: string };
}

function setup(opts: { limiter?: 'real' | 'none' | RequestLimiter; values?: Record<string, unknown> } = {}): Setup {
  const cfg = loadConfig({ values: { routes: ROUTES, ...opts.values } });
  const clock = new ManualClock(T0);
  const metrics = createMetrics({ process: false });
  const ring = new KeyRing(
    null,
    createLogger('error', () => {}),
  );
  const wakes: Wake[] = [];
  const recorder = new Recorder({ clock, metrics, region: 'test', capture: (w) => wakes.push(w) });
  const limiter =
    opts.limiter === 'none'
      ? null
      : opts.limiter === undefined || opts.limiter === 'real'
        ? new RateLimiter(cfg)
        : opts.limiter;
  const routes = new RouteTable(cfg.routes, cfg.environments);
  const admission = new Admission({ routes, ring, limiter, metrics, clock });
  let n = 0;
  const key = (scopes: string[], more: Partial<KeyRecord> = {}, cls?: 'live' | 'test') => {
    // The secret's prefix is its environment's class, as the API issues it (or `cls`).
    const env = more.environment ?? 'production';
    const secret = `svc_${cls ?? cfg.environments[env]?.class ?? 'live'}_${newSecret()}`;
    const id = `key_${++n}`;
    const record: KeyRecord = {
      id,
      environment: 'production',
      label: id,
      consumer: `consumer-${n}`,
      scopes,
      rate_limit: null,
      replaces: null,
      secret_hash: hashSecret(secret),
      created_at: T0 - 1000,
      revoke_at: null,
      revoked_at: null,
      updated_at: n,
      ...more,
    };
    ring.apply(record);
    return { record, secret };
  };
  return { admission, clock, metrics, recorder, wakes, ring, key };
}

/** A request as node:http hands it over (the fields admission reads). */
const request = (url: string, o: { method?: string; auth?: string; ip?: string; consumer?: string } = {}) =>
  ({
    url,
    method: o.method ?? 'GET',
    headers: {
      ...(o.auth === undefined ? {} : { authorization: o.auth }),
      ...(o.consumer === undefined ? {} : { 'x-consumer-id': o.consumer }),
    },
    socket: { remoteAddress: o.ip ?? '10.0.0.1' },
  }) as unknown as IncomingMessage;

const bearer = (secret: string) => `Bearer ${secret}`;

/** A decision made at once (the test fails if the admission waited on a promise). */
function now<A extends Admitted>(v: Verdict<A>): A | Refusal {
  if (v instanceof Promise) throw new Error('admission waited on a promise with no limiter to wait on');
  return v;
}
function refused(v: Admitted | Refusal): Refusal {
  if (!isRefusal(v)) throw new Error('admitted, expected a refusal');
  return v;
}
function admitted<A extends Admitted>(v: A | Refusal): A {
  if (isRefusal(v)) throw new Error(`refused: ${v.error.type} ${v.error.message}`);
  return v;
}
const header = (h: readonly string[] | null, name: string): string | undefined => {
  if (h === null) return undefined;
  const i = h.indexOf(name);
  return i === -1 ? undefined : h[i + 1];
};
const RATE_HEADERS = [
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'ratelimit-policy',
  'ratelimit',
];
const metricValue = async (s: Setup, name: string, policy: string): Promise<number> => {
  const m = await s.metrics.registry.getSingleMetric(name)?.get();
  return m?.values.find((v) => v.labels.policy === policy)?.value ?? 0;
};

describe('admission of a proxied request', () => {
  const proxy = (s: Setup, req: IncomingMessage): { v: Routed | Refusal; x: Exchange } => {
    const x = s.recorder.begin();
    return { v: now(s.admission.request(req, x)), x };
  };

  it('refuses an unsafe path (400, param path) and a gateway key in the URL (400, param url) before any route', () => {
    const s = setup();
    const dots = proxy(s, request('/api/../admin'));
    expect(refused(dots.v).error).toMatchObject({ type: 'invalid_request', status: 400, param: 'path' });
    // Drawn from the address's unauthenticated bucket, as a refused key is (no address floods the store).
    expect(header(refused(dots.v).headers, 'ratelimit-policy')).toContain('"unauthenticated"');
    expect(dots.x).toMatchObject({ route: 'none', path: '/api/../admin', environment: 'production', pathClean: false });
    const inUrl = proxy(s, request(`/api/x?token=svc_live_${newSecret()}`));
    expect(refused(inUrl.v).error).toMatchObject({ type: 'invalid_request', param: 'url' });
    expect(refused(inUrl.v).error.message).toMatch(/in the URL/);
    expect(inUrl.x.route).toBe('none');
    expect(inUrl.x.pathClean).toBe(false);
  });

  it('refuses a path no route matches (404 resource_missing)', () => {
    const s = setup();
    const { v, x } = proxy(s, request('/nowhere'));
    expect(refused(v).error).toMatchObject({
      type: 'resource_missing',
      status: 404,
      message: 'no route matches this path',
    });
    expect(header(refused(v).headers, 'x-ratelimit-remaining')).toBe('599');
    expect(x.route).toBe('none');
  });

  it('refuses a missing, malformed, unknown, revoked or expired key with 401 and WWW-Authenticate: Bearer, naming a known key on the wake', () => {
    const s = setup();
    const revoked = s.key(['api:read'], { revoked_at: T0 - 1 });
    const expired = s.key(['api:read'], { revoke_at: T0 });
    const cases: [string | undefined, string, string | RegExp][] = [
      [undefined, 'authentication_required', /Authorization: Bearer/],
      ['Basic abc', 'authentication_required', /must be "Bearer svc_live_/],
      [bearer(`svc_live_${newSecret()}`), 'authentication_required', 'this key is not known'],
      [bearer(revoked.secret), 'key_revoked', /revoked/],
      [bearer(expired.secret), 'key_revoked', /revoked/],
    ];
    for (const [auth, type, message] of cases) {
      const { v, x } = proxy(s, request('/api/x', auth === undefined ? {} : { auth }));
      const r = refused(v);
      expect(r.error.type, String(auth)).toBe(type);
      expect(r.error.status).toBe(401);
      expect(r.error.message).toMatch(message);
      // Its scheme, then the unauthenticated bucket it drew from (limit, remaining, reset).
      expect(r.headers.slice(0, 2)).toEqual(['www-authenticate', 'Bearer']);
      expect(r.headers.filter((_, i) => i % 2 === 0).slice(1, 4)).toEqual([
        'x-ratelimit-limit',
        'x-ratelimit-remaining',
        'x-ratelimit-reset',
      ]);
      expect(x.route).toBe('api');
      expect(x.sampledOut).toBe(false);
    }
    const { x } = proxy(s, request('/api/x', { auth: bearer(revoked.secret) }));
    expect(x.key?.id).toBe(revoked.record.id);
    expect(x.consumer).toBe(revoked.record.consumer);
  });

  it('refuses a key whose environment the config no longer has, or whose class no longer matches its prefix, with 401', () => {
    const s = setup();
    const gone = s.key(['api:read'], { environment: 'staging' }, 'live');
    const promoted = s.key(['api:read'], { environment: 'production' }, 'test');
    const demoted = s.key(['api:read'], { environment: 'sandbox' }, 'live');
    for (const k of [gone, promoted, demoted]) {
      const { v, x } = proxy(s, request('/api/x', { auth: bearer(k.secret) }));
      const r = refused(v);
      expect(r.error.status, k.record.environment).toBe(401);
      expect(r.error.type).toBe('authentication_required');
      expect(r.error.message).toMatch(/no longer configured/);
      expect(x.key?.id).toBe(k.record.id);
      expect(s.admission.identifies(bearer(k.secret))).toBe(false);
    }
    // The same key in a standing environment is admitted.
    const fine = s.key(['api:read'], { environment: 'production' }, 'live');
    admitted(now(proxy(s, request('/api/x', { auth: bearer(fine.secret) })).v));
  });

  it('refuses a key whose environment the route has no origin for (404), the environment choosing the origin', () => {
    const s = setup();
    const sandbox = s.key(['api:read'], { environment: 'sandbox' });
    const { v, x } = proxy(s, request('/live/x', { auth: bearer(sandbox.secret) }));
    expect(refused(v).error).toMatchObject({
      type: 'resource_missing',
      message: 'route live-only has no origin for environment sandbox',
    });
    expect(x.environment).toBe('sandbox');
    const ok = admitted(proxy(s, request('/api/x', { auth: bearer(sandbox.secret) })).v);
    expect(ok.origin.port).toBe(2);
  });

  it('checks the read scope for GET, HEAD and OPTIONS and the write scope otherwise (403 naming it)', () => {
    const s = setup();
    const reader = s.key(['api:read']);
    const writer = s.key(['api:write']);
    for (const method of ['GET', 'HEAD', 'OPTIONS']) {
      expect(isRefusal(proxy(s, request('/api/x', { method, auth: bearer(reader.secret) })).v)).toBe(false);
      const r = refused(proxy(s, request('/api/x', { method, auth: bearer(writer.secret) })).v);
      expect(r.error).toMatchObject({
        type: 'insufficient_scope',
        status: 403,
        message: 'this key lacks the scope api:read',
      });
    }
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      expect(isRefusal(proxy(s, request('/api/x', { method, auth: bearer(writer.secret) })).v)).toBe(false);
      const r = refused(proxy(s, request('/api/x', { method, auth: bearer(reader.secret) })).v);
      expect(r.error.message).toBe('this key lacks the scope api:write');
      // Charged to the key's bucket like any keyed request (a flood of them ends in 429s): its headers say so.
      expect(r.headers).toContain('ratelimit-policy');
      expect(r.headers).not.toContain('www-authenticate');
    }
  });

  it('admits with the route, the origin of the key environment, the split path and query, and every rate-limit header', () => {
    const s = setup();
    const k = s.key(['api:read']);
    const { v, x } = proxy(s, request('/api/orders?limit=5', { auth: bearer(k.secret) }));
    const a = admitted(v);
    expect(a.route.name).toBe('api');
    expect(a.origin).toMatchObject({ port: 1, basePath: '/base' });
    expect(a.key?.id).toBe(k.record.id);
    expect(a.ask).toMatchObject({ path: '/api/orders', query: '?limit=5', ip: '10.0.0.1' });
    expect(a.limitHeaders?.filter((_, i) => i % 2 === 0)).toEqual(RATE_HEADERS);
    expect(header(a.limitHeaders, 'x-ratelimit-limit')).toBe('6000');
    expect(header(a.limitHeaders, 'x-ratelimit-remaining')).toBe('8999');
    expect(header(a.limitHeaders, 'retry-after')).toBeUndefined();
    expect(x).toMatchObject({ route: 'api', environment: 'production', consumer: k.record.consumer, pathClean: true });
    expect(x.key?.id).toBe(k.record.id);
    expect(s.ring.lastUsedInMemory(k.record.id)).toBe(T0);
  });

  it('an unkeyed route takes x-consumer-id (cut at 128) and limits per address; an optional route checks a key only when sent', () => {
    const s = setup();
    const { v, x } = proxy(s, request('/open/x', { consumer: 'c'.repeat(300) }));
    const a = admitted(v);
    expect(a.key).toBeNull();
    expect(x.consumer).toBe('c'.repeat(128));
    expect(a.limitHeaders).not.toBeNull();
    expect(admitted(proxy(s, request('/maybe/x')).v).key).toBeNull();
    const bad = refused(proxy(s, request('/maybe/x', { auth: 'Bearer nope' })).v);
    expect(bad.error.status).toBe(401);
    // The route's own policy is drawn from as well: both buckets in the headers.
    const k = s.key([]);
    const both = admitted(proxy(s, request('/maybe/x', { auth: bearer(k.secret) })).v);
    expect(header(both.limitHeaders, 'ratelimit-policy')).toContain('"reports"');
  });

  it('rate limited: 429 with retry_after, every rate-limit header and Retry-After; counted by policy', async () => {
    const s = setup({ values: { rate_limits: { default: { limit: 2, burst: 2, window: 'minute' } } } });
    const k = s.key(['api:read']);
    const go = () => proxy(s, request('/api/x', { auth: bearer(k.secret) })).v;
    admitted(go());
    admitted(go());
    const r = refused(go());
    expect(r.error).toMatchObject({ type: 'rate_limit_exceeded', status: 429, retryAfter: 30 });
    expect(r.headers.filter((_, i) => i % 2 === 0)).toEqual([...RATE_HEADERS, 'retry-after']);
    expect(header(r.headers, 'retry-after')).toBe('30');
    expect(header(r.headers, 'x-ratelimit-remaining')).toBe('0');
    expect(await metricValue(s, 'wakegate_rate_limited_total', 'default')).toBe(1);
    // The fake clock refills the bucket.
    s.clock.advance(30_000);
    admitted(go());
  });

  it('refused keys past the unauthenticated limit: 429 per address, one refusal in 100 stored; a valid key behind the same address still passes', async () => {
    const s = setup({ values: { rate_limits: { unauthenticated: { limit: 10, burst: 10, window: 'minute' } } } });
    const bad = bearer(`svc_live_${newSecret()}`);
    const statuses: number[] = [];
    const sampled: boolean[] = [];
    for (let i = 0; i < 210; i++) {
      const { v, x } = proxy(s, request('/api/x', { auth: bad, ip: '10.9.9.9' }));
      statuses.push(refused(v).error.status);
      if (refused(v).error.status === 429) {
        sampled.push(!x.sampledOut);
        expect(header(refused(v).headers, 'retry-after')).toBe('6');
        expect(header(refused(v).headers, 'ratelimit-policy')).toContain('"unauthenticated"');
      }
    }
    expect(statuses.filter((c) => c === 401)).toHaveLength(10);
    expect(statuses.filter((c) => c === 429)).toHaveLength(200);
    expect(sampled.filter(Boolean)).toHaveLength(2);
    expect(await metricValue(s, 'wakegate_rate_limited_total', 'unauthenticated')).toBe(200);
    // Another address is untouched; a good key from the flooding address passes.
    expect(refused(proxy(s, request('/api/x', { auth: bad, ip: '10.1.1.1' })).v).error.status).toBe(401);
    const k = s.key(['api:read']);
    admitted(proxy(s, request('/api/x', { auth: bearer(k.secret), ip: '10.9.9.9' })).v);
  });

  it('the coordination server not answering (on_unavailable: closed): 503 with Retry-After: 1, not counted as rate limited', async () => {
    const s = setup({ limiter: unavailable() });
    const k = s.key(['api:read']);
    const x = s.recorder.begin();
    const v = s.admission.request(request('/api/x', { auth: bearer(k.secret) }), x);
    expect(v).toBeInstanceOf(Promise);
    const r = refused(await v);
    expect(r.error).toMatchObject({ type: 'service_unavailable', status: 503, retryAfter: 1 });
    expect(r.error.message).toMatch(/coordination server does not answer/);
    expect(r.headers).toEqual(['retry-after', '1']);
    expect(await metricValue(s, 'wakegate_rate_limited_total', 'unknown')).toBe(0);
  });

  it('a decision that waits on Redis admits through the promise, with its headers', async () => {
    const s = setup({
      limiter: waiting({ allowed: true, headers: ['x-ratelimit-limit', '7'], retryAfter: 0, policy: null }),
    });
    const k = s.key(['api:read']);
    const a = admitted(await s.admission.request(request('/api/x', { auth: bearer(k.secret) }), s.recorder.begin()));
    expect(a.limitHeaders).toEqual(['x-ratelimit-limit', '7']);
  });

  it('without a limiter: admitted with no rate-limit headers', () => {
    const s = setup({ limiter: 'none' });
    const k = s.key(['api:read']);
    expect(admitted(proxy(s, request('/api/x', { auth: bearer(k.secret) })).v).limitHeaders).toBeNull();
  });

  it('the URL is looked at for a key once: the wake of an admitted request keeps its path as split', () => {
    const s = setup();
    const k = s.key(['api:read']);
    const req = request('/api/a%20b?q=1', { auth: bearer(k.secret) });
    const x = s.recorder.begin();
    admitted(now(s.admission.request(req, x)));
    x.status = 200;
    s.recorder.finish(req, x);
    expect(s.wakes[0]?.path).toBe('/api/a%20b');
    // Refused for a key in its URL: the recorder replaces it.
    const withKey = request(`/api/svc_live_${newSecret()}`);
    const y = s.recorder.begin();
    refused(now(s.admission.request(withKey, y)));
    s.recorder.finish(withKey, y);
    expect(s.wakes[1]?.path).toBe('/api/[redacted:gateway-key]');
  });
});

describe('admission of a /v2 call', () => {
  const v2 = (
    s: Setup,
    o: { auth?: string; scope?: string; policy?: string | null; ip?: string; peer?: string } = {},
  ): { v: Admitted | Refusal; x: Exchange } => {
    const req = request('/v2/wakes', o.auth === undefined ? { ip: o.ip } : { auth: o.auth, ip: o.ip });
    if (o.peer !== undefined) (req as unknown as Record<symbol, string>)[PEER] = o.peer;
    const x = s.recorder.begin();
    x.route = 'v2';
    x.environment = 'production';
    return { v: now(s.admission.call(req, apiGate(o.scope ?? 'wakes:read', o.policy ?? null), x)), x };
  };

  it('refuses missing, unknown and revoked keys with 401 and WWW-Authenticate, naming a known key on the wake', () => {
    const s = setup();
    const gone = s.key(['wakes:read'], { revoked_at: T0 - 1 });
    for (const auth of [undefined, 'Bearer x', bearer(`svc_live_${newSecret()}`), bearer(gone.secret)]) {
      const r = refused(v2(s, auth === undefined ? {} : { auth }).v);
      expect(r.error.status).toBe(401);
      // Its scheme, then the unauthenticated bucket it drew from (limit, remaining, reset).
      expect(r.headers.slice(0, 2)).toEqual(['www-authenticate', 'Bearer']);
      expect(r.headers.filter((_, i) => i % 2 === 0).slice(1, 4)).toEqual([
        'x-ratelimit-limit',
        'x-ratelimit-remaining',
        'x-ratelimit-reset',
      ]);
    }
    const { x } = v2(s, { auth: bearer(gone.secret) });
    expect(x.key?.id).toBe(gone.record.id);
    expect(x.route).toBe('v2');
  });

  it('the management scopes: a key without the operation scope is refused (403 naming it); scope "" takes any key', () => {
    const s = setup();
    const reader = s.key(['wakes:read']);
    for (const scope of ['keys:write', 'keys:read', 'webhooks:write', 'wakes:write']) {
      const r = refused(v2(s, { auth: bearer(reader.secret), scope }).v);
      expect(r.error).toMatchObject({ type: 'insufficient_scope', message: `this key lacks the scope ${scope}` });
    }
    const plain = s.key([]);
    const a = admitted(v2(s, { auth: bearer(plain.secret), scope: '' }).v);
    expect(a.key?.id).toBe(plain.record.id);
    expect(a.route).toBeNull();
    expect(a.origin).toBeNull();
  });

  it("admits with every rate-limit header, the operation's policy drawn from too; the wake names the key", () => {
    const s = setup();
    const k = s.key(['webhooks:write'], { environment: 'sandbox' });
    const { v, x } = v2(s, { auth: bearer(k.secret), scope: 'webhooks:write', policy: 'webhook_registration' });
    const a = admitted(v);
    expect(a.limitHeaders?.filter((_, i) => i % 2 === 0)).toEqual(RATE_HEADERS);
    expect(header(a.limitHeaders, 'ratelimit-policy')).toContain('"webhook_registration"');
    expect(x).toMatchObject({ route: 'v2', environment: 'sandbox', consumer: k.record.consumer });
  });

  it('rate limited (429, Retry-After, headers) and the unauthenticated flood (429 per address, from the edge-handed address, sampled)', () => {
    const s = setup({
      values: {
        rate_limits: {
          default: { limit: 1, burst: 1, window: 'minute' },
          unauthenticated: { limit: 1, burst: 1, window: 'minute' },
        },
      },
    });
    const k = s.key(['wakes:read']);
    admitted(v2(s, { auth: bearer(k.secret) }).v);
    const r = refused(v2(s, { auth: bearer(k.secret) }).v);
    expect(r.error).toMatchObject({ status: 429, retryAfter: 60 });
    expect(header(r.headers, 'retry-after')).toBe('60');
    expect(header(r.headers, 'x-ratelimit-limit')).toBe('1');
    // The flood is counted per the address the edge handed over (PEER), not the loopback socket's.
    expect(refused(v2(s, { peer: '10.7.7.7' }).v).error.status).toBe(401);
    const flood = v2(s, { peer: '10.7.7.7' });
    expect(refused(flood.v).error.status).toBe(429);
    expect(flood.x.sampledOut).toBe(true);
    expect(refused(v2(s, { peer: '10.7.7.8' }).v).error.status).toBe(401);
  });

  it('the coordination server not answering: 503, Retry-After: 1', async () => {
    const s = setup({ limiter: unavailable() });
    const k = s.key(['wakes:read']);
    const r = refused(
      await s.admission.call(request('/v2/wakes', { auth: bearer(k.secret) }), apiGate('wakes:read', null), null),
    );
    expect(r.error).toMatchObject({ status: 503, retryAfter: 1 });
    expect(r.headers).toEqual(['retry-after', '1']);
  });
});

describe('admission of a replay', () => {
  const wake = (path: string, o: Partial<Pick<Wake, 'method' | 'environment' | 'key_id'>> = {}) => ({
    method: o.method ?? 'GET',
    path,
    environment: o.environment ?? 'production',
    key_id: o.key_id ?? '',
  });
  const replay = (s: Setup, w: ReturnType<typeof wake>, caller: KeyRecord) => now(s.admission.replay(w, caller));

  it('refuses (409, param wake_id) a path no route matches now, and an environment the route has no origin for', () => {
    const s = setup();
    const caller = s.key(['api:read']).record;
    const none = refused(replay(s, wake('/gone/x'), caller));
    expect(none.error).toMatchObject({ type: 'conflict', status: 409, param: 'wake_id' });
    expect(none.error.message).toBe(
      'no route of the current configuration matches "/gone/x", so it cannot be replayed',
    );
    const env = refused(replay(s, wake('/live/x', { environment: 'sandbox' }), caller));
    expect(env.error).toMatchObject({ type: 'conflict', param: 'wake_id' });
    expect(env.error.message).toBe('route "live-only", which matches this path now, has no origin for sandbox');
  });

  it('refuses (409) a wake whose key is revoked, expired or unknown: it is sent as that key', () => {
    const s = setup();
    const caller = s.key(['api:read']).record;
    const revoked = s.key(['api:read'], { revoked_at: T0 - 1 }).record;
    const expired = s.key(['api:read'], { revoke_at: T0 }).record;
    for (const id of [revoked.id, expired.id, 'key_unknown']) {
      const r = refused(replay(s, wake('/api/x', { key_id: id }), caller));
      expect(r.error).toMatchObject({ type: 'conflict', param: 'wake_id' });
      expect(r.error.message).toBe(
        `the key that sent this wake (${id}) has been revoked, so it cannot be replayed as that key`,
      );
    }
  });

  it("the caller needs the route's scope, read or write by the wake's method (403 naming the method and route)", () => {
    const s = setup();
    const reader = s.key(['api:read']).record;
    const r = refused(replay(s, wake('/api/x', { method: 'POST' }), reader));
    expect(r.error).toMatchObject({ type: 'insufficient_scope', status: 403 });
    expect(r.error.message).toBe('this key lacks the scope api:write, which the replayed POST on route api needs');
    expect(isRefusal(replay(s, wake('/api/x', { method: 'HEAD', key_id: reader.id }), reader))).toBe(false);
  });

  it("the wake's key needs that scope today too (409); a keyless wake cannot go to a route that requires a key (409)", () => {
    const s = setup();
    const caller = s.key(['api:read', 'api:write']).record;
    const sender = s.key(['api:read']).record;
    const r = refused(replay(s, wake('/api/x', { method: 'DELETE', key_id: sender.id }), caller));
    expect(r.error).toMatchObject({ type: 'conflict', param: 'wake_id' });
    expect(r.error.message).toContain(`(${sender.id}) lacks the scope api:write`);
    const anon = refused(replay(s, wake('/api/x'), caller));
    expect(anon.error.message).toMatch(/sent without a key, and route api/);
    // An optional or open route takes it, sent as no key.
    expect(admitted(replay(s, wake('/maybe/x'), caller)).key).toBeNull();
    expect(admitted(replay(s, wake('/open/x'), caller)).key).toBeNull();
  });

  it("admits to the origin of the wake's environment, as the wake's key, charging the caller (rate-limit headers, the route policy)", () => {
    const s = setup();
    const caller = s.key(['api:read']).record;
    const sender = s.key(['api:read'], { environment: 'sandbox' }).record;
    const a = admitted(replay(s, wake('/api/x', { environment: 'production', key_id: sender.id }), caller));
    expect(a.key?.id).toBe(sender.id);
    expect(a.origin.port).toBe(1);
    expect(a.route.name).toBe('api');
    expect(a.limitHeaders?.filter((_, i) => i % 2 === 0)).toEqual(RATE_HEADERS);
    expect(header(a.limitHeaders, 'x-ratelimit-remaining')).toBe('8999');
    const m = admitted(replay(s, wake('/maybe/x'), caller));
    expect(header(m.limitHeaders, 'ratelimit-policy')).toContain('"reports"');
  });

  it("rate limited on the caller's bucket: 429 with retry_after and its headers", async () => {
    const s = setup({ values: { rate_limits: { default: { limit: 1, burst: 1, window: 'minute' } } } });
    const caller = s.key(['api:read']).record;
    admitted(replay(s, wake('/open/x'), caller));
    const r = refused(replay(s, wake('/open/y'), caller));
    expect(r.error).toMatchObject({ type: 'rate_limit_exceeded', retryAfter: 60 });
    expect(header(r.headers, 'retry-after')).toBe('60');
    expect(await metricValue(s, 'wakegate_rate_limited_total', 'default')).toBe(1);
  });

  it('the coordination server not answering: 503, Retry-After: 1', async () => {
    const s = setup({ limiter: unavailable() });
    const caller = s.key(['api:read']).record;
    const r = refused(await s.admission.replay(wake('/open/x'), caller));
    expect(r.error).toMatchObject({ type: 'service_unavailable', retryAfter: 1 });
    expect(r.headers).toEqual(['retry-after', '1']);
  });
});

describe('the Host rule (RFC 9112 §3.2, RFC 9110 §7.2), before anything else', () => {
  /** A request as Node hands it over, with its version and raw header list. */
  const wire = (
    url: string,
    raw: string[],
    o: { version?: '1.0' | '1.1' | '2'; headers?: Record<string, string>; ip?: string } = {},
  ) => {
    const v = o.version ?? '1.1';
    const headers: Record<string, string> = { ...o.headers };
    for (let i = 0; i < raw.length; i += 2) {
      const n = (raw[i] as string).toLowerCase();
      if (headers[n] === undefined) headers[n] = raw[i + 1] as string;
    }
    return {
      url,
      method: 'GET',
      headers,
      rawHeaders: raw,
      httpVersionMajor: Number(v[0]),
      httpVersionMinor: v === '1.0' ? 0 : v === '1.1' ? 1 : 0,
      socket: { remoteAddress: o.ip ?? '10.0.0.1' },
    } as unknown as IncomingMessage;
  };
  const proxy = (s: Setup, req: IncomingMessage) => {
    const x = s.recorder.begin();
    return { v: now(s.admission.request(req, x)), x };
  };

  it('uri-host [":" port]: a reg-name, an IPv4 address, an IPv6 or IPvFuture literal; digits after the colon', () => {
    for (const ok of [
      'example.com',
      'EXAMPLE.com:8443',
      'localhost:',
      '127.0.0.1',
      '[::1]',
      '[::1]:8080',
      '[2001:db8::7]:443',
      '[v1.fe80::a+en1]',
      'a%41b.example',
      "a-._~!$&'()*+,;=b",
      'svc_live_x',
    ])
      expect(validAuthority(ok), ok).toBe(true);
    for (const bad of [
      '',
      ':80',
      'good.example/evil',
      'a b',
      'good.example:80:80',
      'a:b',
      'x:8a',
      'a%4',
      'a%zz',
      'a\\b',
      'a#b',
      'a?b',
      'caf\u00e9.example',
      'user@host',
      '[::1',
      '[::1]x',
      '[]',
      '[fe80::1%25eth0]',
      '[v1.]',
      '[vz.x]',
      '[1.2.3.4]',
    ])
      expect(validAuthority(bad), bad).toBe(false);
  });

  it('an HTTP/1.1 request without Host: 400 param host, recorded, drawn from the unauthenticated bucket, before the route', () => {
    const s = setup();
    const { v, x } = proxy(s, wire('/open/x', ['Connection', 'close']));
    const r = refused(v);
    expect(r.error).toMatchObject({ type: 'invalid_request', status: 400, param: 'host' });
    expect(r.error.message).toMatch(/must send Host/);
    expect(header(r.headers, 'ratelimit-policy')).toContain('"unauthenticated"');
    expect(header(r.headers, 'x-ratelimit-remaining')).toBe('599');
    expect(x).toMatchObject({ route: 'none', path: '/open/x', environment: 'production' });
    // HTTP/1.0 may send none; a Host it sends is held to the rule.
    admitted(proxy(s, wire('/open/x', [], { version: '1.0' })).v);
    expect(refused(proxy(s, wire('/open/x', ['Host', 'a/b'], { version: '1.0' })).v).error.param).toBe('host');
  });

  it('a Host that is no uri-host[:port], or empty, or sent twice, or with userinfo: 400 param host, each its own words', () => {
    const s = setup();
    for (const host of ['good.example/evil', 'a b', 'good.example:80:80', '']) {
      const r = refused(proxy(s, wire('/open/x', ['hOsT', host])).v);
      expect(r.error, host).toMatchObject({ status: 400, param: 'host' });
      expect(r.error.message, host).toMatch(/a host and an optional port/);
    }
    expect(refused(proxy(s, wire('/open/x', ['Host', 'a', 'HOST', 'a'])).v).error.message).toMatch(/sent once/);
    expect(refused(proxy(s, wire('/open/x', ['Host', 'u:p@a'])).v).error.message).toMatch(/userinfo/);
    for (const host of ['a', 'a.example:8080', '[::1]:1']) admitted(proxy(s, wire('/open/x', ['Host', host])).v);
  });

  it('HTTP/2: :authority (Host to the origin, h2/fields.ts) held to the same rule, the refusal naming :authority', () => {
    const s = setup();
    const h2 = (authority: string | null, scheme = 'http') =>
      wire('/open/x', authority === null ? [] : ['host', authority], {
        version: '2',
        headers: { ':scheme': scheme, ...(authority === null ? {} : { ':authority': authority }) },
      });
    const r = refused(proxy(s, h2('good.example:80:80')).v);
    expect(r.error).toMatchObject({ status: 400, param: ':authority' });
    admitted(proxy(s, h2('good.example:443')).v);
    // Neither :authority nor Host: malformed for an http(s) target only (RFC 9113 §8.3.1).
    expect(refused(proxy(s, h2(null)).v).error).toMatchObject({ param: ':authority' });
    expect(refused(proxy(s, h2(null, 'HTTPS')).v).error).toMatchObject({ param: ':authority' });
    admitted(proxy(s, h2(null, 'urn')).v);
    // Through the compatibility layer (the console's listeners), :authority stays in the raw list.
    const compat = wire('/open/x', [':authority', 'a b', ':scheme', 'https'], { version: '2' });
    expect(refused(proxy(s, compat).v).error.param).toBe(':authority');
  });

  it('a /v2 call: the same rule, drawn from the unauthenticated bucket before the key is read', () => {
    const s = setup();
    const k = s.key(['wakes:read']);
    const call = (raw: string[]) => {
      const x = s.recorder.begin();
      x.route = 'v2';
      return now(s.admission.call(wire('/v2/wakes', raw), apiGate('wakes:read', null), x));
    };
    for (const raw of [[], ['Host', 'a b'], ['Host', 'a', 'Host', 'a']]) {
      const r = refused(call([...raw, 'Authorization', bearer(k.secret)]));
      expect(r.error, JSON.stringify(raw)).toMatchObject({ status: 400, param: 'host' });
      expect(header(r.headers, 'ratelimit-policy')).toContain('"unauthenticated"');
    }
    expect(s.ring.lastUsedInMemory(k.record.id)).toBeUndefined();
    admitted(call(['Host', 'gw.example', 'Authorization', bearer(k.secret)]));
  });
});

/** A fleet limiter whose Redis does not answer, under coordination.on_unavailable: closed. */
function unavailable(): RequestLimiter {
  const d: LimitDecision = {
    allowed: false,
    headers: ['retry-after', '1'],
    retryAfter: 1,
    policy: null,
    unavailable: true,
  };
  return { check: () => Promise.resolve(d), refused: () => Promise.resolve(d) };
}

/** A fleet limiter that decides after asking Redis. */
function waiting(d: LimitDecision): RequestLimiter {
  const within: LimitDecision = { allowed: true, headers: [], retryAfter: 0, policy: null };
  return { check: () => Promise.resolve(d), refused: () => Promise.resolve(within) };
}
