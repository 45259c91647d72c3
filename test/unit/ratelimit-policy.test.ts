import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/auth/key.js';
import { loadConfig } from '../../src/config/index.js';
import { RateLimiter } from '../../src/ratelimit/limiter.js';
import { emptyChoice, makePolicy, PolicySet, rateLimitProblem } from '../../src/ratelimit/policy.js';
import { keyRecord } from '../helpers/keys.js';

const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);
const BAD: unknown[] = [
  { limit: Number.NaN, burst: 1, window: 'minute' },
  { limit: 1, burst: Number.NaN, window: 'minute' },
  { limit: Number.POSITIVE_INFINITY, burst: 1, window: 'minute' },
  { limit: 1, burst: Number.POSITIVE_INFINITY, window: 'minute' },
  { limit: 0, burst: 1, window: 'minute' },
  { limit: 1, burst: 0, window: 'minute' },
  { limit: -1, burst: 1, window: 'minute' },
  { limit: 1, burst: -1, window: 'minute' },
  { limit: '5', burst: 1, window: 'minute' },
  { limit: undefined, burst: undefined, window: undefined },
  { limit: 1, burst: 1, window: 'constructor' },
  { limit: 1, burst: 1, window: '__proto__' },
  { limit: 1, burst: 1, window: 'week' },
  {},
  null,
  'default',
];

describe('makePolicy: finite positive numbers and a known window, or it throws', () => {
  it('makes a policy of good values', () => {
    const p = makePolicy('p', { limit: 60, burst: 10, window: 'minute' });
    expect(p).toMatchObject({ limit: 60, burst: 10, windowMs: 60_000, rate: 0.001, header: '"p";q=60;w=60' });
  });
  for (const [i, v] of BAD.entries()) {
    const shown =
      v && typeof v === 'object' ? `{${Object.entries(v).map(([k, x]) => `${k}: ${String(x)}`)}}` : String(v);
    it(`${i}: refuses ${shown}`, () => {
      expect(rateLimitProblem(v)).not.toBeNull();
      expect(() => makePolicy('p', v as never)).toThrow(RangeError);
    });
  }
});

describe('a key whose stored rate_limit makes no policy is held to default', () => {
  const cfg = loadConfig({ values: { rate_limits: { default: { limit: 5, burst: 5, window: 'minute' } } } });
  it('PolicySet chooses default for it', () => {
    const set = new PolicySet(cfg);
    for (const v of BAD) {
      const k = keyRecord('k', 'production', v as KeyRecord['rate_limit']);
      const c = set.choose(k, '', null, emptyChoice(set.def));
      expect(c.p1, JSON.stringify(v)).toBe(set.def);
    }
  });
  it('the limiter refuses it after default is spent', () => {
    const l = new RateLimiter(cfg);
    const k = keyRecord('k', 'production', {} as KeyRecord['rate_limit']);
    let ok = 0;
    for (let i = 0; i < 20; i++) if (l.check(k, '', null, T0).allowed) ok++;
    expect(ok).toBe(5);
  });
});
