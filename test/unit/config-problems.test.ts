import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';

const origin = { production: 'http://127.0.0.1:1' };

/** The lines of the ConfigError `values` (and `env`) make. */
function problems(values: unknown, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    loadConfig({ values, env });
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message.split('\n');
  }
  throw new Error('the config loaded');
}

describe('a bad config names every problem at once (DESIGN.md, Running it)', () => {
  it('the checks across keys run on what parsed: a duplicate route name beside a wrong type elsewhere', () => {
    // The cross-key checks ran only once the whole schema passed: fix, run, and only then learn the next.
    const lines = problems({
      routes: [
        { name: 'a', prefix: '/a', auth: 'none', origins: origin },
        { name: 'a', prefix: '/b', auth: 'none', origins: origin },
        { name: 'c', prefix: 7, auth: 'none', origins: origin },
      ],
    });
    expect(lines).toHaveLength(2);
    expect(lines).toEqual(
      expect.arrayContaining([
        'config: routes[1].name: duplicate route name "a"',
        'config: routes[2].prefix: must be text, not 7',
      ]),
    );
  });

  it('each check on the keys it needs (environments, policies, scopes), beside type errors and variables', () => {
    const lines = problems(
      {
        server: { port: 'eighty' },
        rate_limits: { default: { limit: 10, burst: 0, window: 'minute' } },
        routes: [
          { name: 'x', prefix: '/x', auth: 'required', origins: { staging: 'http://127.0.0.1:1' }, rate_limit: 'gold' },
          { name: 'y', prefix: '/y', auth: 'none', origins: origin, timeout_ms: -1 },
        ],
        instance: { index: 0, count: 2 },
      },
      { OPS_PORT: 'x' },
    );
    for (const path of [
      'server.ops_port',
      'instance',
      'server.port',
      'rate_limits.default.burst',
      'routes[0].origins.staging',
      'routes[0].rate_limit',
      'routes[0].scopes',
      'routes[1].timeout_ms',
    ])
      expect(
        lines.some((l) => l.startsWith(`config: ${path}: `)),
        `${path} in\n${lines.join('\n')}`,
      ).toBe(true);
  });

  it('a key that did not parse is not also reported as missing by a check that needs it', () => {
    // environments failed: no route's origins are called unknown, and no "class live is needed".
    const lines = problems({
      environments: { production: { class: 'prod' } },
      routes: [{ name: 'a', prefix: '/a', auth: 'none', origins: origin }],
    });
    expect(lines).toEqual([expect.stringMatching(/^config: environments\.production\.class: /)]);
  });
});
