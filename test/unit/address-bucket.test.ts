import type { IncomingMessage } from 'node:http';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Admission, isRefusal, type Routed } from '../../src/admission/admission.js';
import type { Refusal } from '../../src/admission/refusal.js';
import { RouteTable } from '../../src/admission/routes.js';
import { KeyRing } from '../../src/auth/keyring.js';
import { Recorder } from '../../src/capture/recorder.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/index.js';
import { newSecret } from '../../src/ids.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';
import { addressBucket } from '../../src/ratelimit/address.js';
import { RateLimiter } from '../../src/ratelimit/limiter.js';

/**
 * Per-address buckets (requests without a key, refused keys under `unauthenticated`):
 * an IPv6 client owns at least a /64 and may send from any of its 2^64 addresses, so
 * its bucket is its /64; IPv4, also IPv4-mapped, stays one bucket per address.
 */
describe('addressBucket', () => {
  it('keeps IPv4 and IPv4-mapped addresses as they are (the same string: nothing allocated)', () => {
    for (const ip of ['1.2.3.4', '127.0.0.1', '', '::ffff:1.2.3.4', '::ffff:127.0.0.2']) {
      expect(addressBucket(ip)).toBe(ip);
    }
    // With a zone: the same IPv4 address, the same bucket.
    expect(addressBucket('::ffff:1.2.3.4%eth0')).toBe('::ffff:1.2.3.4');
  });

  it('names an IPv6 address by its /64, in every spelling of it', () => {
    const cases: [string, string][] = [
      ['2001:db8::1', '2001:db8:0:0::/64'],
      ['2001:db8::ffff:ffff:ffff:ffff', '2001:db8:0:0::/64'],
      ['2001:0DB8:0000:0000:0:0:0:2', '2001:db8:0:0::/64'],
      ['2001:db8:a:b:1:2:3:4', '2001:db8:a:b::/64'],
      ['2001:db8:a:b::', '2001:db8:a:b::/64'],
      ['2001:db8:a:b::1.2.3.4', '2001:db8:a:b::/64'],
      ['::1', '0:0:0:0::/64'],
      ['::', '0:0:0:0::/64'],
      ['fe80::1%eth0', 'fe80:0:0:0::/64'],
      ['1:2:3:4:5:6:7::', '1:2:3:4::/64'],
      ['::2:3:4:5:6:7:8', '0:2:3:4::/64'],
      // IPv4-mapped in another spelling: still that one IPv4 address.
      ['::ffff:102:304', '::ffff:1.2.3.4'],
      ['0:0:0:0:0:ffff:1.2.3.4', '::ffff:1.2.3.4'],
      // NAT64's well-known prefix: the IPv4 client it embeds.
      ['64:ff9b::1.2.3.4', '1.2.3.4'],
      ['64:ff9b::102:305', '1.2.3.5'],
    ];
    for (const [ip, bucket] of cases) expect(addressBucket(ip), ip).toBe(bucket);
  });

  it('leaves what is no IPv6 address as it is (its own bucket, never a shared one)', () => {
    for (const ip of ['2001:db8:::1', '1:2:3:4:5:6:7:8:9', '1:2:3:4:5:6:7::8', 'x:y', '::1.2.3', '12345::', ':']) {
      expect(addressBucket(ip), ip).toBe(ip);
    }
  });

  it('property: two addresses share a bucket exactly when they share a /64 (or are one IPv4 address)', () => {
    const group = fc.integer({ min: 0, max: 0xffff });
    const addr = fc.array(group, { minLength: 8, maxLength: 8 });
    const text = (g: number[]) => g.map((x) => x.toString(16)).join(':');
    fc.assert(
      fc.property(addr, addr, fc.boolean(), (a, b, sameTop) => {
        if (sameTop) b.splice(0, 4, ...a.slice(0, 4));
        const mapped = (g: number[]) =>
          (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) ||
          (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0));
        if (mapped(a) || mapped(b)) return;
        const same = a.slice(0, 4).join() === b.slice(0, 4).join();
        expect(addressBucket(text(a)) === addressBucket(text(b))).toBe(same);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('admission: the per-address buckets of IPv6 clients are their /64s', () => {
  const setup = () => {
    const cfg = loadConfig({
      values: {
        routes: [
          { name: 'open', prefix: '/open', auth: 'none', origins: { production: 'http://127.0.0.1:1' } },
          {
            name: 'keyed',
            prefix: '/keyed',
            scopes: { read: 'k:read', write: 'k:write' },
            origins: { production: 'http://127.0.0.1:1' },
          },
        ],
        rate_limits: {
          default: { limit: 5, burst: 5, window: 'minute' },
          unauthenticated: { limit: 3, burst: 3, window: 'minute' },
        },
      },
    });
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const metrics = createMetrics({ process: false });
    const ring = new KeyRing(
      null,
      createLogger('error', () => {}),
    );
    const recorder = new Recorder({ clock, metrics, region: 'test', capture: () => {} });
    const admission = new Admission({
      routes: new RouteTable(cfg.routes, cfg.environments),
      ring,
      limiter: new RateLimiter(cfg),
      metrics,
      clock,
    });
    const send = (ip: string, auth?: string): Routed | Refusal => {
      const req = {
        url: auth === undefined ? '/open/x' : '/keyed/x',
        method: 'GET',
        headers: auth === undefined ? {} : { authorization: auth },
        socket: { remoteAddress: ip },
      } as unknown as IncomingMessage;
      const v = admission.request(req, recorder.begin());
      if (v instanceof Promise) throw new Error('waited on a promise');
      return v;
    };
    return { send };
  };
  const status = (v: Routed | Refusal) => (isRefusal(v) ? v.error.status : 200);

  it('keyless requests: rotating through one /64 draws from one bucket; another /64 has its own', () => {
    const { send } = setup();
    const got = Array.from({ length: 8 }, (_, i) => status(send(`2001:db8:1:2::${(i + 1).toString(16)}`)));
    expect(got).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    expect(status(send('2001:db8:1:2:dead:beef:0:1'))).toBe(429);
    expect(status(send('2001:db8:1:3::1'))).toBe(200);
  });

  it('refused keys (unauthenticated): rotating through one /64 gets the 429 after its burst', () => {
    const { send } = setup();
    const bad = `Bearer svc_live_${newSecret()}`;
    const got = Array.from({ length: 6 }, (_, i) => status(send(`2001:db8:9:9:${i}::1`, bad)));
    expect(got).toEqual([401, 401, 401, 429, 429, 429]);
    expect(status(send('2001:db8:9:a::1', bad))).toBe(401);
  });

  it('IPv4 clients, also IPv4-mapped, keep a bucket per address', () => {
    const { send } = setup();
    for (let i = 0; i < 5; i++) expect(status(send('::ffff:10.0.0.1'))).toBe(200);
    expect(status(send('::ffff:10.0.0.1'))).toBe(429);
    expect(status(send('::ffff:10.0.0.2'))).toBe(200);
    expect(status(send('10.0.0.3'))).toBe(200);
    // ::1's /64 (::/64) holds the IPv4-mapped range; they are never folded into it.
    for (let i = 0; i < 5; i++) expect(status(send('::1'))).toBe(200);
    expect(status(send('::1'))).toBe(429);
    expect(status(send('::ffff:10.0.0.4'))).toBe(200);
  });
});
