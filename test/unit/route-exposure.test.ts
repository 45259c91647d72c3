import { describe, expect, it } from 'vitest';
import { keyedPathsExposed } from '../../src/admission/exposure.js';
import { RouteTable } from '../../src/admission/routes.js';
import { loadConfig } from '../../src/config/index.js';

const table = (routes: Record<string, unknown>[]) => {
  const cfg = loadConfig({ values: { routes } });
  return new RouteTable(cfg.routes, cfg.environments);
};
const keyed = (o: Record<string, unknown>) => ({
  name: 'pay',
  prefix: '/payments',
  scopes: { read: 'p:read', write: 'p:write' },
  origins: { production: 'http://origin.internal:8080' },
  ...o,
});
const open = (o: Record<string, unknown>) => ({
  name: 'site',
  prefix: '/',
  auth: 'none',
  origins: { production: 'http://origin.internal:8080' },
  ...o,
});

describe('keyed paths a route without a key reaches at the same origin', () => {
  it('a keyed route stripping its prefix onto the origin a public / serves: one line naming both', () => {
    const lines = keyedPathsExposed(table([keyed({ strip_prefix: true }), open({})]));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^routes pay and site \(production\): pay needs a key/);
    expect(lines[0]).toContain('/ through site is /payments through pay');
  });

  it('the same through a base path: the keyed origin URL ends in /v1, the public route serves /v1', () => {
    const lines = keyedPathsExposed(
      table([keyed({ origins: { production: 'http://origin.internal:8080/v1' }, strip_prefix: true }), open({})]),
    );
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('/v1/ through site is /payments through pay');
  });

  it('a public route under another prefix that strips onto the keyed space', () => {
    const lines = keyedPathsExposed(
      table([keyed({}), open({ name: 'mirror', prefix: '/public', strip_prefix: true })]),
    );
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('/public/payments through mirror is /payments through pay');
  });

  it('nothing when the longest prefix guards the keyed paths, or the origins differ', () => {
    // The usual layout: / public, /payments keyed, one origin, nothing stripped.
    expect(keyedPathsExposed(table([keyed({}), open({})]))).toEqual([]);
    // Another port, another host, another scheme.
    for (const other of ['http://origin.internal:8081', 'http://other.internal:8080', 'https://origin.internal:8080']) {
      expect(
        keyedPathsExposed(table([keyed({ strip_prefix: true }), open({ origins: { production: other } })])),
      ).toEqual([]);
    }
    // A public route whose paths never reach the keyed route's.
    expect(keyedPathsExposed(table([keyed({ strip_prefix: true }), open({ prefix: '/docs' })]))).toEqual([]);
  });
});
