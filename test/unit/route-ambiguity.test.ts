import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Admission, isRefusal } from '../../src/admission/admission.js';
import { lenientPath, RouteTable, unsafePath } from '../../src/admission/routes.js';
import type { KeyRecord } from '../../src/auth/key.js';
import { KeyRing } from '../../src/auth/keyring.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';

const envs = { production: { class: 'live' as const, wake_retention_days: 1 } };
const r = (name: string, prefix: string, strip_prefix = false) => ({
  name,
  prefix,
  strip_prefix,
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
const table = (...routes: [string, string, boolean?][]) =>
  new RouteTable(
    routes.map(([n, p, s]) => r(n, p, s)),
    envs,
  );

/** The route the path matches as sent, and the one ambiguity says an origin may read it as (or null: none). */
const readAs = (t: RouteTable, path: string): string | null => {
  const route = t.match(path);
  if (route === null) throw new Error(`no route for ${path}`);
  const why = t.ambiguity(path, route);
  if (why === null) return null;
  return /read it as (?:route ([^\s,]+)|(a path outside every route))/.exec(why)?.slice(1).find(Boolean) ?? why;
};

describe('lenientPath', () => {
  it('decodes unreserved characters only, drops ;params, merges slashes', () => {
    const cases: [string, string][] = [
      ['/v2/payments/p_1', '/v2/payments/p_1'],
      ['/v2/%70ayments', '/v2/payments'],
      ['/%76%32/pay%6Dents', '/v2/payments'],
      ['/a/%41%5a%61%7a%30%39%2D%2e%5F%7E', '/a/AZaz09-._~'],
      ['/a/%E2%82%AC', '/a/%E2%82%AC'],
      ['/a/%20%3B%3b%2F%25', '/a/%20%3B%3b%2F%25'],
      ['/a/%2570', '/a/p'],
      ['/a/%25%70', '/a/%25p'],
      ['/a/%2', '/a/%2'],
      ['/a/%', '/a/%'],
      ['/a/%zz%7', '/a/%zz%7'],
      ['/v2/payments;x/p_1', '/v2/payments/p_1'],
      ['/v2;a=1;b=2/payments;', '/v2/payments'],
      ['/a/;x/b', '/a/b'],
      ['/;x', '/'],
      ['//v2//payments///p_1', '/v2/payments/p_1'],
      ['/a/', '/a/'],
      ['/', '/'],
      ['/V2/PAYMENTS', '/V2/PAYMENTS'],
    ];
    for (const [raw, read] of cases) expect(lenientPath(raw), raw).toBe(read);
  });
});

describe('RouteTable.ambiguity', () => {
  const t = table(
    ['public', '/'],
    ['payments', '/v2/payments'],
    ['api', '/api', true],
    ['admin', '/api/admin', true],
    ['slash', '/files/'],
  );

  it('leaves ordinary paths, and encodings, ;params and case within one route, alone', () => {
    for (const p of [
      '/',
      '/v2/payments',
      '/v2/payments/',
      '/v2/payments/p_1',
      '/v2/payments/p_1;v=1',
      '/v2/payments/x;v=1/p_1',
      '/v2/payments/%E2%82%AC',
      '/v2/payments/%70_1',
      '/v2/payments//p_1',
      '/v2/payments/P_ABC',
      '/v2/paymentsx',
      '/v2/pay%6Dentsx',
      '/v2/other;x/y',
      '/V2/OTHER',
      '/docs/%7Euser',
      '//docs',
      '/a%20b',
      '/api',
      '/api/users;v=1',
      '/api/%75sers',
      '/api/administrator',
      '/api/admin/%55sers',
      '/api/admin/x;y',
      '/files/a',
      '/files//a',
      '/FILESX',
    ]) {
      expect(readAs(t, p), p).toBeNull();
    }
  });

  it('names the route a lenient origin may read the path as', () => {
    const cases: [string, string][] = [
      ['/v2/%70ayments/p_1', 'payments'],
      ['/v2/%2570ayments', 'payments'],
      ['/v2/payments;x/p_1', 'payments'],
      ['/v2/payments;v=1/p_1', 'payments'],
      ['/v2/payments;', 'payments'],
      ['/v2;x/payments', 'payments'],
      ['//v2/payments/p_1', 'payments'],
      ['/v2//payments', 'payments'],
      ['/V2/PAYMENTS/p_1', 'payments'],
      ['/v2/Payments', 'payments'],
      ['/v2/%50ayments', 'payments'],
      ['/api/%61dmin/users', 'admin'],
      ['/api/admin;x/users', 'admin'],
      ['/api//admin', 'admin'],
      ['/api/admin;x', 'admin'],
      ['/api/ADMIN', 'admin'],
      ['/API/admin', 'admin'],
      ['/%61pi/x', 'api'],
      ['/Api', 'api'],
      ['/files;x/a', 'slash'],
      ['//files/a', 'slash'],
      ['/FILES/a', 'slash'],
    ];
    for (const [p, route] of cases) expect(readAs(t, p), p).toBe(route);
  });

  it('says what to do, in an invalid_request style sentence', () => {
    const route = t.match('/v2/%70ayments') as NonNullable<ReturnType<RouteTable['match']>>;
    expect(route.name).toBe('public');
    expect(t.ambiguity('/v2/%70ayments', route)).toMatch(
      /^ambiguous path: an origin may read it as route payments, the gateway as route public;/,
    );
  });

  it('without a catch-all: the same, and what matches no route as sent stays a 404', () => {
    const solo = table(['a', '/a'], ['ab', '/a/b']);
    expect(readAs(solo, '/a/%62')).toBe('ab');
    expect(readAs(solo, '/a/b;x')).toBe('ab');
    expect(readAs(solo, '/a/x;y')).toBeNull();
    expect(solo.match('/a;x/b')).toBeNull();
  });

  it('reads prefixes leniently too: one with a capital, an encoding or a parameter', () => {
    const odd = table(['public', '/'], ['legacy', '/Legacy'], ['enc', '/e%41'], ['param', '/p;v=1']);
    expect(readAs(odd, '/Legacy/x')).toBeNull();
    expect(readAs(odd, '/legacy/x')).toBe('legacy');
    expect(readAs(odd, '/LEGACY')).toBe('legacy');
    expect(readAs(odd, '/e%41/x')).toBeNull();
    expect(readAs(odd, '/eA/x')).toBe('enc');
    expect(readAs(odd, '/p;v=1/x')).toBeNull();
    expect(readAs(odd, '/p/x')).toBe('param');
    expect(readAs(odd, '/other')).toBeNull();
  });

  it('prefixes that read the same (differing in case only) are one place: not refused', () => {
    const twins = table(['public', '/'], ['lower', '/v2/payments'], ['upper', '/V2/PAYMENTS']);
    expect(readAs(twins, '/v2/payments/x')).toBeNull();
    expect(readAs(twins, '/V2/PAYMENTS/x')).toBeNull();
    expect(readAs(twins, '/V2/payments/x')).toMatch(/^(lower|upper)$/);
  });

  it('unsafePath still refuses what it did, and now a fragment', () => {
    for (const p of ['/a%2Fb', '/a/../b', '/a/%2e%2e/b', '/a/..;x/b', '/a%252e'])
      expect(unsafePath(p), p).not.toBeNull();
    for (const p of ['/a#', '/a#b', '/#']) expect(unsafePath(p), p).toMatch(/fragment/);
    expect(unsafePath('/a', '?q#x')).toMatch(/fragment/);
    expect(unsafePath('/a', '?q=%23')).toBeNull();
    expect(unsafePath('/a%23b')).toBeNull();
  });
});

/** A reference without the fast scan: regular expressions, every path read leniently. */
const refLenient = (p: string) =>
  p
    .replace(/;[^/]*/g, '')
    .replace(/%(?:25)?([0-9A-Fa-f]{2})/g, (m, h: string) => {
      const c = String.fromCharCode(Number.parseInt(h, 16));
      return /^[A-Za-z0-9\-._~]$/.test(c) ? c : m;
    })
    .replace(/\/{2,}/g, '/');
const refMatch = (prefixes: [string, string][], path: string): string | null => {
  const under = (p: string) => path === p || path.startsWith(p.endsWith('/') ? p : `${p}/`);
  return [...prefixes].sort((a, b) => b[1].length - a[1].length).find(([, p]) => under(p))?.[0] ?? null;
};

describe('RouteTable.ambiguity, property', () => {
  const tables: [string, string][][] = [
    [
      ['public', '/'],
      ['payments', '/v2/payments'],
      ['api', '/api'],
      ['admin', '/api/admin'],
    ],
    [
      ['payments', '/v2/payments'],
      ['v2', '/v2'],
      ['files', '/files/'],
    ],
    // Prefixes a lenient reading changes: every path is read leniently.
    [
      ['public', '/'],
      ['legacy', '/Legacy'],
      ['enc', '/v%32'],
    ],
  ];
  const segment = fc.oneof(
    fc.constantFrom(
      'v2',
      'V2',
      '%76%32',
      'payments',
      'Payments',
      '%70ayments',
      'pay%6Dents',
      '%2570ayments',
      'payments;x',
      'payments;',
      'api',
      'API',
      'admin',
      '%61dmin',
      'admin;v=1',
      'files',
      'legacy',
      'Legacy',
      'p_1',
      '%E2%82%AC',
      '%zz',
      '%2',
      '',
      ';x',
    ),
    fc.string({
      unit: fc.constantFrom('a', 'A', 'p', 'v', '2', '%', '7', '0', '5', ';', '/', 'x', '~'),
      maxLength: 12,
    }),
  );
  const path = fc.array(segment, { minLength: 1, maxLength: 5 }).map((s) => `/${s.join('/')}`);

  it('refuses exactly when the lenient or case-folded reading matches another route (no shortcut misses one)', () => {
    for (const routes of tables) {
      const t = table(...routes);
      const lenient = routes.map(([n, p]): [string, string] => [n, refLenient(p)]);
      const folded = lenient.map(([n, p]): [string, string] => [n, p.toLowerCase()]);
      fc.assert(
        fc.property(path, (p) => {
          const route = t.match(p);
          if (route === null) return;
          const l = refLenient(p);
          const expected = refMatch(lenient, l) !== route.name || refMatch(folded, l.toLowerCase()) !== route.name;
          expect(t.ambiguity(p, route) !== null, p).toBe(expected);
        }),
        { numRuns: 3000 },
      );
    }
  });

  it('lenientPath agrees with the regular expression reference', () => {
    fc.assert(
      fc.property(path, (p) => {
        expect(lenientPath(p), p).toBe(refLenient(p));
      }),
      { numRuns: 3000 },
    );
  });
});

describe('admission of a replay whose path is ambiguous now', () => {
  it('is refused (409, param wake_id), never sent through the route the raw path matches', () => {
    const cfg = loadConfig({
      values: {
        routes: [
          { name: 'public', prefix: '/', auth: 'none', origins: { production: 'http://127.0.0.1:1' } },
          {
            name: 'payments',
            prefix: '/v2/payments',
            scopes: { read: 'payments:read', write: 'payments:write' },
            origins: { production: 'http://127.0.0.1:1' },
          },
        ],
      },
    });
    const admission = new Admission({
      routes: new RouteTable(cfg.routes, cfg.environments),
      ring: new KeyRing(
        null,
        createLogger('error', () => {}),
      ),
      limiter: null,
      metrics: createMetrics({ process: false }),
      clock: new ManualClock(Date.UTC(2026, 0, 1)),
    });
    const caller = { id: 'key_1', environment: 'production', scopes: [] } as unknown as KeyRecord;
    const wake = (path: string) => ({ method: 'GET', path, environment: 'production', key_id: '' });
    for (const path of ['/V2/PAYMENTS/p_1', '/v2/%70ayments/p_1', '/v2/payments;x/p_1', '//v2/payments']) {
      const v = admission.replay(wake(path), caller);
      if (v instanceof Promise || !isRefusal(v)) throw new Error(`${path} admitted`);
      expect(v.error, path).toMatchObject({ type: 'conflict', status: 409, param: 'wake_id' });
      expect(v.error.message, path).toMatch(
        /^ambiguous path: an origin may read it as route payments, .*cannot be replayed$/,
      );
    }
    const ok = admission.replay(wake('/docs/x'), caller);
    expect(!(ok instanceof Promise) && isRefusal(ok)).toBe(false);
  });
});
