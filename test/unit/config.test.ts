import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, mergeConfig } from '../../src/config/index.js';

const fail = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('expected a ConfigError');
};

describe('config', () => {
  it('starts from DESIGN.md defaults', () => {
    const c = loadConfig();
    expect(c.server.port).toBe(8080);
    expect(c.server.ops_host).toBe('127.0.0.1');
    expect(c.rate_limits.default).toEqual({ limit: 6000, burst: 9000, window: 'minute', shared: false });
    expect(c.rate_limits.sandbox?.shared).toBe(true);
    expect(c.webhooks.retry_schedule_s).toHaveLength(7);
    expect(c.capture.detail).toEqual({
      headers: true,
      bodies: true,
      max_body_bytes: 32_768,
      max_per_second: 1000,
      max_bytes_per_second: 8_388_608,
      opaque_bodies: 'hash',
    });
    expect(c.routes[0]?.prefix).toBe('/v2/payments');
    expect(Object.isFrozen(c.server)).toBe(true);
  });

  it('merges sections key by key and replaces lists', () => {
    expect(mergeConfig({ a: { x: 1, y: 2 }, l: [1, 2] }, { a: { y: 3 }, l: [9] })).toEqual({
      a: { x: 1, y: 3 },
      l: [9],
    });
    const c = loadConfig({ values: { capture: { batch_rows: 10 }, routes: [] } });
    expect(c.capture.batch_rows).toBe(10);
    expect(c.capture.flush_interval_ms).toBe(500);
    expect(c.routes).toEqual([]);
  });

  it('reads a YAML file and lets environment variables override it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-cfg-'));
    const file = join(dir, 'c.yaml');
    writeFileSync(file, 'server:\n  port: 9000\n  region: eu-1\n');
    const c = loadConfig({ file, env: { PORT: '9100', DATA_DIR: '/tmp/x' } });
    expect(c.server.port).toBe(9100);
    expect(c.server.region).toBe('eu-1');
    expect(c.storage.data_dir).toBe('/tmp/x');
  });

  it('ORIGIN_URL makes one catch-all route with no auth', () => {
    const c = loadConfig({ env: { ORIGIN_URL: 'http://127.0.0.1:3000' } });
    expect(c.routes).toHaveLength(1);
    expect(c.routes[0]).toMatchObject({ prefix: '/', auth: 'none', origins: { production: 'http://127.0.0.1:3000' } });
  });

  it('refuses ORIGIN_URL together with routes named in the config file, and admin keys outside 32 to 128 characters', () => {
    const routes = [
      { name: 'r', prefix: '/x', scopes: { read: 'a:read', write: 'a:write' }, origins: { production: 'http://a' } },
    ];
    expect(fail(() => loadConfig({ values: { routes }, env: { ORIGIN_URL: 'http://127.0.0.1:3000' } }))).toMatch(
      /^config: routes: ORIGIN_URL .* cannot be combined with routes in the config file/,
    );
    // The shipped config/default.yaml names no routes, so drop-in mode works with `npm start`.
    const c = loadConfig({
      file: join(import.meta.dirname, '../../config/default.yaml'),
      env: { ORIGIN_URL: 'http://127.0.0.1:3000' },
    });
    expect(c.routes).toHaveLength(1);
    expect(fail(() => loadConfig({ env: { WAKEGATE_ADMIN_KEY: `svc_live_${'a'.repeat(129)}` } }))).toMatch(/32 to 128/);
    expect(fail(() => loadConfig({ env: { WAKEGATE_ADMIN_KEY: `svc_live_${'a'.repeat(31)}` } }))).toMatch(/32 to 128/);
    expect(loadConfig({ env: { WAKEGATE_ADMIN_KEY: `svc_live_${'a'.repeat(128)}` } }).admin_key).toHaveLength(137);
  });

  it('reports every problem at once, in plain words, each with its line and column in the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-config-'));
    const file = join(dir, 'wakegate.yaml');
    writeFileSync(
      file,
      [
        'server:',
        '  prot: 8080',
        '  threads: many',
        'routes:',
        '  - name: payments',
        '    prefix: /v2/payments',
        '    scopes: { read: payments:read, write: payments:write }',
        '    timeout_ms: -5',
        'capture:',
        '  batch_rows: "lots"',
        '',
      ].join('\n'),
    );
    const lines = fail(() => loadConfig({ file, env: {} })).split('\n');
    expect(lines).toEqual([
      `config: server.prot: is not a known setting (did you mean "port"?) (${file}:2:3)`,
      `config: server.threads: must be "auto" or a whole number, not the text "many" (${file}:3:3)`,
      `config: routes[0].origins: is required (${file}:5:5)`,
      `config: routes[0].timeout_ms: must be greater than 0 (${file}:8:5)`,
      `config: capture.batch_rows: must be a whole number, not the text "lots" (${file}:10:3)`,
    ]);
    // No schema library's phrasing reaches the user.
    for (const l of lines) expect(l).not.toMatch(/Invalid input|expected|received|Unrecognized/);
    rmSync(dir, { recursive: true, force: true });
  });

  it('says one thing once: one line per key path, one per environment variable', () => {
    const routes = [{ name: 'r', prefix: '/x', auth: 'none', origins: { production: 'nope' } }];
    expect(fail(() => loadConfig({ values: { routes } })).split('\n')).toEqual([
      'config: routes[0].origins.production: must be a URL',
    ]);
    const envs = { production: { class: 'live' }, sandbox: { class: 'test' } };
    expect(
      fail(() => loadConfig({ values: { environments: envs }, env: { ORIGIN_URL: 'not-a-url' } })).split('\n'),
    ).toEqual(['config: routes[0].origins.production: must be a URL (set by ORIGIN_URL)']);
  });

  it('checks that span several keys are all reported too', () => {
    const routes = [
      { name: 'a', prefix: '/a', auth: 'required', origins: { production: 'http://a' } },
      { name: 'a', prefix: '/b', auth: 'none', origins: { nowhere: 'http://a' }, rate_limit: 'zzz' },
    ];
    expect(fail(() => loadConfig({ values: { routes } })).split('\n')).toEqual([
      'config: routes[0].scopes: a route with auth: required needs scopes',
      'config: routes[1].name: duplicate route name "a"',
      'config: routes[1].origins.nowhere: unknown environment "nowhere"',
      'config: routes[1].rate_limit: unknown rate limit policy "zzz"',
    ]);
  });

  it("refuses a route rate_limit that names no policy of its own, Object's members included", () => {
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      const routes = [{ name: 'a', prefix: '/a', auth: 'none', origins: { production: 'http://a' }, rate_limit: name }];
      expect(fail(() => loadConfig({ values: { routes } }))).toBe(
        `config: routes[0].rate_limit: unknown rate limit policy ${JSON.stringify(name)}`,
      );
    }
  });

  it('names the key path of a bad value in one line', () => {
    expect(fail(() => loadConfig({ values: { server: { port: 'x' } } }))).toMatch(/^config: server\.port: /);
    expect(fail(() => loadConfig({ values: { capture: { batch_rows: -1 } } }))).toMatch(
      /^config: capture\.batch_rows: /,
    );
    expect(fail(() => loadConfig({ values: { bogus: 1 } }))).toMatch(/^config: bogus: is not a known setting$/);
    expect(fail(() => loadConfig({ values: { capture: { detail: { max_per_second: -1 } } } }))).toMatch(
      /^config: capture\.detail\.max_per_second: /,
    );
    expect(fail(() => loadConfig({ values: { capture: { detail: { max_bytes_per_second: 'lots' } } } }))).toMatch(
      /^config: capture\.detail\.max_bytes_per_second: /,
    );
    const badRate = [
      { name: 'r', prefix: '/x', origins: { production: 'http://a' }, capture: { detail: { max_per_second: 1.5 } } },
    ];
    expect(fail(() => loadConfig({ values: { routes: badRate } }))).toMatch(
      /^config: routes\[0\]\.capture\.detail\.max_per_second: /,
    );
    expect(fail(() => loadConfig({ env: { PORT: 'eighty' } }))).toMatch(
      /^config: server\.port: PORT must be a whole number/,
    );
    const bad = [{ name: 'r', prefix: '/x', auth: 'none', origins: { nowhere: 'http://127.0.0.1:1' } }];
    expect(fail(() => loadConfig({ values: { routes: bad } }))).toMatch(
      /^config: routes\[0\]\.origins\.nowhere: unknown environment/,
    );
    const badPolicy = [
      { name: 'r', prefix: '/x', auth: 'none', origins: { production: 'http://a' }, rate_limit: 'zzz' },
    ];
    expect(fail(() => loadConfig({ values: { routes: badPolicy } }))).toMatch(/routes\[0\]\.rate_limit/);
    expect(fail(() => loadConfig({ values: { routes: [{ prefix: 'x' }] } }))).toMatch(/^config: routes\[0\]\./);
    expect(fail(() => loadConfig({ env: { WAKEGATE_ADMIN_KEY: 'nope' } }))).toMatch(/^config: admin_key: /);
    expect(fail(() => loadConfig({ file: '/nonexistent.yaml' }))).toMatch(/cannot read/);
    expect(fail(() => loadConfig({ values: { instance: { index: 0, count: 2 } } }))).toMatch(
      /^config: instance: .*retired.*coordination\.redis_url/,
    );
    expect(fail(() => loadConfig({ values: { coordination: { redis_url: 'http://x' } } }))).toMatch(
      /^config: coordination\.redis_url: must be a redis:\/\//,
    );
    // Node would throw a RangeError at listen time; the config names both keys instead.
    expect(fail(() => loadConfig({ values: { server: { request_timeout_ms: 1000 } } }))).toMatch(
      /^config: server\.headers_timeout_ms: must be at most server\.request_timeout_ms \(1000\)/,
    );
    expect(loadConfig({ values: { server: { request_timeout_ms: 0 } } }).server.request_timeout_ms).toBe(0);
    expect(fail(() => loadConfig({ values: { coordination: { on_unavailable: 'maybe' } } }))).toMatch(
      /^config: coordination\.on_unavailable: /,
    );
    const fleetEnv = { REDIS_URL: 'redis://127.0.0.1:6379/0', CLICKHOUSE_URL: 'http://127.0.0.1:8123' };
    expect(loadConfig({ env: fleetEnv }).coordination.redis_url).toBe('redis://127.0.0.1:6379/0');
    expect(loadConfig({ env: fleetEnv }).coordination.on_unavailable).toBe('local');
    // A fleet on the embedded store would share buckets but not keys, endpoints or wakes.
    const alone = fail(() => loadConfig({ env: { REDIS_URL: 'redis://127.0.0.1:6379/0' } }));
    expect(alone).toMatch(/CLICKHOUSE_URL/);
    expect(alone.split('\n')).toHaveLength(1);
    expect(fail(() => loadConfig({ values: { storage: { cluster: 'main' } } }))).toMatch(
      /^config: storage\.cluster: a cluster needs storage\.clickhouse_url/,
    );
    const onCluster = { storage: { cluster: 'main', clickhouse_url: 'http://127.0.0.1:8123' } };
    expect(loadConfig({ values: onCluster }).storage.cluster).toBe('main');
    expect(fail(() => loadConfig({ env: { WAKEGATE_ENCRYPTION_KEY: 'short' } }))).toMatch(
      /^config: storage\.encryption_key: /,
    );
    expect(
      fail(() =>
        loadConfig({
          values: { routes: [{ name: 'a', prefix: '/a', auth: 'required', origins: { production: 'http://a' } }] },
        }),
      ),
    ).toMatch(/routes\[0\]\.scopes/);
  });
});
