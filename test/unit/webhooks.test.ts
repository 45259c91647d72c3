import { describe, expect, it } from 'vitest';
import { hostIsReachable, isPublicAddress } from '../../src/webhooks/address.js';
import { parseRetryAfter, retryDelay } from '../../src/webhooks/backoff.js';
import { MinHeap } from '../../src/webhooks/heap.js';
import { sign, verifySignature } from '../../src/webhooks/signer.js';

describe('address rules', () => {
  it('refuses loopback, private, link-local, CGNAT and special ranges, IPv4-mapped IPv6 included (all of it: only global unicast IPv6 is reachable)', () => {
    for (const ip of [
      '127.0.0.1',
      '10.0.0.1',
      '172.16.5.4',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '198.18.0.1',
      '::1',
      '::',
      'fe80::1',
      'fc00::1',
      'fd12::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:10.0.0.1',
      '0:0:0:0:0:ffff:7f00:1',
      '64:ff9b::a00:1',
      '2001:db8::1',
      // Only global unicast (2000::/3) minus its special blocks may receive.
      '::ffff:8.8.8.8',
      '::ffff:0:7f00:1',
      '64:ff9b:1::a00:1',
      '3fff::1',
      '5f00::1',
      '2002:7f00:1::',
      '2001::1',
      '2620:4f:8000::1',
      '100::1',
      '192.31.196.1',
      '192.175.48.1',
      '255.255.255.255',
    ]) {
      expect(isPublicAddress(ip), ip).toBe(false);
    }
    for (const ip of ['8.8.8.8', '1.1.1.1', '93.184.216.34', '2606:4700:4700::1111', '2a00:1450:4001::1'])
      expect(isPublicAddress(ip), ip).toBe(true);
    expect(isPublicAddress('not-an-ip')).toBe(false);
  });
  it('resolves names before judging them', async () => {
    expect((await hostIsReachable('localhost', false)).ok).toBe(false);
    // The reason names no address, and reads the same for a name that does not resolve: no DNS oracle.
    const local = await hostIsReachable('localhost', false);
    expect(local.reason).toBe('localhost does not resolve to a public address');
    expect(local.reason).not.toMatch(/127\.0\.0\.1|::1/);
    expect((await hostIsReachable('nothing.invalid', false)).reason).toBe(
      'nothing.invalid does not resolve to a public address',
    );
    expect((await hostIsReachable('[::1]', false)).ok).toBe(false);
    expect((await hostIsReachable('127.0.0.1', true)).ok).toBe(true);
  });
});

describe('backoff', () => {
  const S = [5, 300, 1800, 3600, 7200, 18000, 34200];
  it('follows the schedule, spread by the jitter', () => {
    expect([2, 3, 4, 5, 6, 7, 8].map((n) => retryDelay({ next: n, scheduleS: S, jitter: 0 }))).toEqual(
      S.map((s) => s * 1000),
    );
    expect(retryDelay({ next: 3, scheduleS: S, jitter: 0.1, random: () => 0 })).toBe(270_000);
    expect(retryDelay({ next: 3, scheduleS: S, jitter: 0.1, random: () => 1 })).toBe(330_000);
    expect(S.reduce((a, b) => a + b, 0) / 3600).toBeCloseTo(18.08, 2);
  });
  it('lets Retry-After lengthen a wait, never shorten it', () => {
    expect(retryDelay({ next: 2, scheduleS: S, jitter: 0, retryAfterS: 60 })).toBe(60_000);
    expect(retryDelay({ next: 3, scheduleS: S, jitter: 0, retryAfterS: 60 })).toBe(300_000);
    expect(retryDelay({ next: 2, scheduleS: S, jitter: 0, retryAfterS: 10 ** 9 })).toBe(86_400_000);
    expect(parseRetryAfter('120', 0)).toBe(120);
    expect(parseRetryAfter(new Date(30_000).toUTCString(), 0)).toBe(30);
    expect(parseRetryAfter('soon', 0)).toBeNull();
  });
});

describe('signature', () => {
  it('verifies what it signs, within the tolerance, and nothing else', () => {
    const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    const h = sign('{"a":1}', secret, 1000);
    expect(verifySignature('{"a":1}', h, secret, 300, 1000)).toBe(true);
    expect(verifySignature('{"a":1}', h, secret, 300, 1300)).toBe(true);
    expect(verifySignature('{"a":1}', h, secret, 300, 1301)).toBe(false);
    expect(verifySignature('{"a":2}', h, secret, 300, 1000)).toBe(false);
    expect(verifySignature('{"a":1}', h, `whsec_${Buffer.alloc(32, 8).toString('base64')}`, 300, 1000)).toBe(false);
    expect(verifySignature('{"a":1}', `${h},v1=${'0'.repeat(64)}`, secret, 300, 1000)).toBe(true);
    for (const bad of [undefined, '', 't=1000', 'v1=abc', `t=x,${h.split(',')[1]}`])
      expect(verifySignature('{"a":1}', bad, secret, 300, 1000)).toBe(false);
  });
});

describe('heap', () => {
  it('pops in key order', () => {
    const h = new MinHeap<number>((x) => x);
    for (const x of [5, 1, 4, 1, 3, 9, 2]) h.push(x);
    const out: number[] = [];
    while (h.size) out.push(h.pop() as number);
    expect(out).toEqual([1, 1, 2, 3, 4, 5, 9]);
  });
});
