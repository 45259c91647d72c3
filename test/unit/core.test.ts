import { describe, expect, it } from 'vitest';
import { RouteTable, unsafePath } from '../../src/admission/routes.js';
import { Cursors, filterFingerprint } from '../../src/api/cursor.js';
import { templateFilter, templateToPattern } from '../../src/api/path-template.js';
import { bearerToken, hashSecret, newKeySecret } from '../../src/auth/secrets.js';
import { ERROR_TYPES, errorBody, GatewayError } from '../../src/errors.js';
import { idTime, newWakeId, randomBase62, sortableId } from '../../src/ids.js';
import { redact } from '../../src/log.js';
import { forwardRequestHeaders, forwardResponseHeaders } from '../../src/proxy/headers.js';

describe('ids', () => {
  it('sort by time and carry it', () => {
    const a = newWakeId(1_700_000_000_000);
    const b = newWakeId(1_700_000_000_001);
    expect(a < b).toBe(true);
    expect(idTime(a)).toBe(1_700_000_000_000);
    expect(sortableId('evt', 5)).toMatch(/^evt_0{8}5[0-9A-Za-z]{14}$/);
    expect(idTime('wk_bad')).toBeNull();
  });
  it('draw uniform base62 with 256-bit secrets', () => {
    const s = newKeySecret('live');
    expect(s).toMatch(/^svc_live_[0-9A-Za-z]{43}$/);
    expect(newKeySecret('test')).toMatch(/^svc_test_/);
    const counts = new Map<string, number>();
    for (const c of randomBase62(62_000)) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(62);
    for (const n of counts.values()) expect(Math.abs(n - 1000)).toBeLessThan(200);
    expect(hashSecret('x')).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('bearer header parsing', () => {
  const k = newKeySecret('live');
  it('accepts the scheme in any case, with one or more spaces', () => {
    expect(bearerToken(`Bearer ${k}`)).toBe(k);
    expect(bearerToken(`bearer ${k}`)).toBe(k);
    expect(bearerToken(`BEARER   ${k}`)).toBe(k);
  });
  it('refuses everything else', () => {
    for (const h of [
      undefined,
      '',
      'Bearer',
      'Bearer ',
      `Basic ${k}`,
      `Bearer${k}`,
      `Bearer ${k}x!`,
      `Bearer ${'a'.repeat(10_000)}`,
      'Bearer svc_live_ünïcode',
      `Bearer ${k} extra`,
    ]) {
      expect(bearerToken(h), String(h).slice(0, 30)).toBeNull();
    }
  });
});

describe('cursor', () => {
  it('round-trips and is bound to its filters', () => {
    const cursors = new Cursors(Buffer.alloc(32, 7));
    const fp = filterFingerprint({ environment: 'production', status: 200 });
    const c = cursors.encode({ t: 123, id: 'wk_abc' }, fp);
    expect(c).toMatch(/^cur_/);
    expect(cursors.decode(c, fp)).toEqual({ t: 123, id: 'wk_abc' });
    expect(() => cursors.decode(c, filterFingerprint({ environment: 'sandbox' }))).toThrow(GatewayError);
    for (const bad of ['cur_', 'cur_!!!', 'abc', `cur_${Buffer.from('[1,2,3]').toString('base64url')}`]) {
      expect(() => cursors.decode(bad, fp)).toThrow(/cursor/);
    }
  });
});

describe('path templates', () => {
  const m = (tpl: string, path: string) => new RegExp(templateToPattern(tpl)).test(path);
  it('matches one segment per {name}, any rest for a trailing *, literals otherwise', () => {
    expect(m('/v2/payments/{id}/refunds', '/v2/payments/p_1/refunds')).toBe(true);
    expect(m('/v2/payments/{id}/refunds', '/v2/payments/a/b/refunds')).toBe(false);
    expect(m('/v2/payments/{id}', '/v2/payments/')).toBe(false);
    expect(m('/v2/*', '/v2/anything/at/all')).toBe(true);
    expect(m('/a.b', '/aXb')).toBe(false);
    expect(m('/a(b)+', '/a(b)+')).toBe(true);
  });
  it('turns literal templates into equality and keeps the literal prefix of the others', () => {
    expect(templateFilter('/v2/payments/p_42')).toMatchObject({ exact: '/v2/payments/p_42' });
    expect(templateFilter('/v2/payments/{id}/refunds')).toMatchObject({ exact: null, prefix: '/v2/payments/' });
    expect(templateFilter('/v2/*')).toMatchObject({ exact: null, prefix: '/v2/' });
  });
  it('refuses templates that are not templates', () => {
    for (const bad of ['nope', '/a/*/b', '/a/{x', '/a/{1x}'])
      expect(() => templateToPattern(bad)).toThrow(GatewayError);
  });
});

describe('headers', () => {
  it('drops the fields of every Connection header, whatever its case, past a plain keep-alive one', () => {
    const o = {
      dropAuthorization: false,
      clientIp: '1.2.3.4',
      clientTrusted: false,
      proto: 'http',
      originHost: 'o',
      identity: null,
    };
    const raw = [
      'connection',
      'keep-alive',
      'CONNECTION',
      'Keep-Alive , x-A',
      'X-a',
      '1',
      'x-b',
      '2',
      'Keep-Alive',
      't',
    ];
    expect(forwardRequestHeaders(raw, o).slice(0, 2)).toEqual(['x-b', '2']);
    expect(forwardResponseHeaders(raw, ['x-wake-id', 'wk'])).toEqual(['x-b', '2', 'x-wake-id', 'wk']);
  });

  it('drops hop-by-hop fields and those named by Connection, keeps case, order and duplicates', () => {
    const out = forwardRequestHeaders(
      [
        'Host',
        'a',
        'Connection',
        'close, X-Secret',
        'X-Secret',
        '1',
        'TE',
        'trailers',
        'Upgrade',
        'h2c',
        // Hop-by-hop by definition (RFC 7540 §3.2.1), named by Connection or not.
        'HTTP2-Settings',
        'AAMAAABkAAQAoAAAAAIAAAAA',
        'Accept',
        '*/*',
        'accept',
        'x',
        'Authorization',
        'Bearer k',
        'X-Wakegate-Key-Id',
        'spoofed',
      ],
      {
        dropAuthorization: true,
        clientIp: '1.2.3.4',
        clientTrusted: false,
        proto: 'http',
        originHost: 'o:1',
        identity: ['key_1', 'c', 'production'],
      },
    );
    expect(out).toEqual([
      'Accept',
      '*/*',
      'accept',
      'x',
      'Host',
      'o:1',
      'X-Forwarded-For',
      '1.2.3.4',
      'X-Forwarded-Proto',
      'http',
      'X-Forwarded-Host',
      'a',
      'x-wakegate-key-id',
      'key_1',
      'x-wakegate-consumer',
      'c',
      'x-wakegate-environment',
      'production',
    ]);
    expect(
      forwardResponseHeaders(
        [
          'Transfer-Encoding',
          'chunked',
          'Keep-Alive',
          'timeout=5',
          'Set-Cookie',
          'a',
          'Set-Cookie',
          'b',
          'X-Wake-Id',
          'spoof',
        ],
        ['x-wake-id', 'wk_1'],
      ),
    ).toEqual(['Set-Cookie', 'a', 'Set-Cookie', 'b', 'x-wake-id', 'wk_1']);
  });
});

describe('route table', () => {
  const envs = { production: { class: 'live' as const, wake_retention_days: 1 } };
  const r = (name: string, prefix: string) => ({
    name,
    prefix,
    strip_prefix: false,
    auth: 'none' as const,
    scopes: null,
    origins: { production: 'http://o' },
    timeout_ms: 1,
    queue_timeout_ms: 1,
    connect_timeout_ms: 1,
    max_response_header_bytes: 16_384,
    latency_objective_ms: null,
    availability_objective: null,
    rate_limit: 'default',
    upgrades: ['websocket'],
    capture: { detail: {} },
  });
  it('picks the longest prefix on whole segments', () => {
    const t = new RouteTable([r('root', '/'), r('a', '/a'), r('ab', '/a/b')], envs);
    expect(t.match('/a/b/c')?.name).toBe('ab');
    expect(t.match('/a/bc')?.name).toBe('a');
    expect(t.match('/ab')?.name).toBe('root');
    expect(t.match('/a')?.name).toBe('a');
    expect(new RouteTable([r('a', '/a')], envs).match('/b')).toBeNull();
  });
  it('flags paths an origin could route elsewhere', () => {
    for (const p of ['/a/../b', '/a/./b', '/a/%2E%2e/b', '/a%2Fb', '/a\\b', '..', 'http://x/'])
      expect(unsafePath(p), p).not.toBeNull();
    for (const p of ['/a/b', '/a/..b', '/a/b..', '/a%20b']) expect(unsafePath(p), p).toBeNull();
  });
});

describe('error table', () => {
  it('pins every type to its status', () => {
    expect(Object.fromEntries(Object.entries(ERROR_TYPES).map(([k, v]) => [k, v.status]))).toEqual({
      invalid_request: 400,
      authentication_required: 401,
      key_revoked: 401,
      insufficient_scope: 403,
      resource_missing: 404,
      conflict: 409,
      payload_too_large: 413,
      request_header_fields_too_large: 431,
      unprocessable: 422,
      rate_limit_exceeded: 429,
      internal_error: 500,
      upstream_unavailable: 502,
      service_unavailable: 503,
      upstream_timeout: 504,
    });
    expect(errorBody('conflict', 'wk_1', undefined, 'x', 3)).toEqual({
      error: { type: 'conflict', message: ERROR_TYPES.conflict.message, param: 'x', retry_after: 3, wake_id: 'wk_1' },
    });
  });
  it('masks secrets in logs', () => {
    const k = newKeySecret('live');
    expect(redact(`{"a":"${k}","b":"whsec_abc123"}`)).toBe('{"a":"svc_live_[redacted]","b":"whsec_[redacted]"}');
  });
});
