import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Downloads } from '../../src/proxy/downloads.js';
import { Slots } from '../../src/proxy/upstream.js';

/** Issue #34, item 12: what streams at a client's pace is bounded, per origin and per address. */
describe('stream bounds', () => {
  it("streams never hold more than three quarters of an origin's connections (at least one stays for the rest)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4096 }), fc.array(fc.boolean(), { maxLength: 300 }), (max, ops) => {
        const s = new Slots(max);
        let held = 0;
        for (const take of ops) {
          if (take) held += s.takeStream() ? 1 : 0;
          else if (held > 0) {
            s.giveStream();
            held--;
          }
          expect(s.streams).toBe(held);
          expect(s.streams).toBeLessThanOrEqual(s.streamMax);
        }
        if (max >= 2) expect(max - s.streamMax).toBeGreaterThanOrEqual(Math.ceil(max / 4));
        expect(s.streamMax).toBeGreaterThanOrEqual(1);
      }),
    );
  });

  it('an address holds at most its bound of streaming answers, and the held bytes stay within the budget', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ ip: fc.integer({ min: 0, max: 3 }), n: fc.integer({ min: 1, max: 5000 }) }), {
          maxLength: 200,
        }),
        (ops) => {
          const d = new Downloads({ bufferBytes: 10_000, totalBytes: 50_000, perClient: 2, sendTimeoutMs: 1 });
          const per = new Map<number, number>();
          for (const { ip, n } of ops) {
            if (d.take(String(ip))) per.set(ip, (per.get(ip) ?? 0) + 1);
            expect(d.streamsOf(String(ip))).toBeLessThanOrEqual(2);
            d.mayHold(0, n, n);
            expect(d.held).toBeLessThanOrEqual(50_000);
          }
          for (const [ip, k] of per) for (let i = 0; i < k; i++) d.give(String(ip));
          for (const ip of per.keys()) expect(d.streamsOf(String(ip))).toBe(0);
        },
      ),
    );
  });
});
