import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forwardRequestHeaders } from '../../src/proxy/headers.js';
import {
  explicitRandomness,
  HexPool,
  parseTraceparent,
  rejectionThreshold,
  type TraceFields,
  TraceStart,
  traceparentOf,
} from '../../src/tracing/context.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const VALID = `00-${TRACE}-${PARENT}-01`;

const fields = (): TraceFields => ({
  traceId: '',
  spanId: '',
  parentSpanId: '',
  traceFlags: '00',
  traceSampled: false,
});

describe('parseTraceparent (W3C Trace Context §3.2)', () => {
  // Each invalid header is ignored as if none had come.
  const cases: [string, string, ReturnType<typeof parseTraceparent>][] = [
    ['valid, sampled', VALID, [TRACE, PARENT, 1]],
    ['valid, not sampled', `00-${TRACE}-${PARENT}-00`, [TRACE, PARENT, 0]],
    ['a later version with more fields after a dash', `01-${TRACE}-${PARENT}-01-what-comes`, [TRACE, PARENT, 1]],
    ['a later version of exactly the 00 length', `cc-${TRACE}-${PARENT}-01`, [TRACE, PARENT, 1]],
    ['version ff', `ff-${TRACE}-${PARENT}-01`, null],
    ['version 00 with more after it', `${VALID}-x`, null],
    ['a later version followed by no dash', `01-${TRACE}-${PARENT}-01x`, null],
    ['trace id too short', `00-${TRACE.slice(1)}-${PARENT}-01`, null],
    ['trace id too long', `00-${TRACE}a-${PARENT}-01`, null],
    ['parent id too short', `00-${TRACE}-${PARENT.slice(1)}-01`, null],
    ['flags of one digit', `00-${TRACE}-${PARENT}-1`, null],
    ['upper-case hex', `00-${TRACE.toUpperCase()}-${PARENT}-01`, null],
    ['non-hex trace id', `00-${TRACE.slice(0, 31)}g-${PARENT}-01`, null],
    ['non-hex parent id', `00-${TRACE}-${PARENT.slice(0, 15)}z-01`, null],
    ['non-hex flags', `00-${TRACE}-${PARENT}-0x`, null],
    ['non-hex version', `0g-${TRACE}-${PARENT}-01`, null],
    ['all-zero trace id', `00-${'0'.repeat(32)}-${PARENT}-01`, null],
    ['all-zero parent id', `00-${TRACE}-${'0'.repeat(16)}-01`, null],
    ['wrong separators', `00_${TRACE}_${PARENT}_01`, null],
    ['empty', '', null],
    ['spaces around', ` ${VALID} `, null],
  ];
  for (const [name, header, want] of cases) {
    it(name, () => expect(parseTraceparent(header)).toEqual(want));
  }
});

describe('TraceStart', () => {
  it('keeps an incoming trace id and makes the gateway span the origin’s parent', () => {
    const x = fields();
    new TraceStart({ enabled: true, sampleRatio: 0 }).begin(x, VALID);
    expect(x.traceId).toBe(TRACE);
    expect(x.parentSpanId).toBe(PARENT);
    expect(x.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(x.spanId).not.toBe(PARENT);
    // The caller sampled it: followed, even at ratio 0.
    expect(x.traceSampled).toBe(true);
    expect(traceparentOf(x)).toBe(`00-${TRACE}-${x.spanId}-01`);
  });

  it('starts a new trace when tracing is on and none (or an invalid one) came', () => {
    for (const header of [undefined, `ff-${TRACE}-${PARENT}-01`, ['a', 'b']]) {
      const x = fields();
      new TraceStart({ enabled: true, sampleRatio: 1 }).begin(x, header);
      expect(x.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(x.parentSpanId).toBe('');
      expect(x.traceSampled).toBe(true);
      expect(traceparentOf(x)).toBe(`00-${x.traceId}-${x.spanId}-01`);
    }
  });

  it('follows a caller’s sampled flag as tracing.follow_sampled says: anyone’s, a trusted proxy’s, no one’s', () => {
    const trusted = (ip: string) => ip === '10.0.0.1';
    const sampled = (follow: 'always' | 'trusted' | 'never', header: string, ip?: string) => {
      const x = fields();
      const peer = ip === undefined ? undefined : { remoteAddress: ip };
      new TraceStart({ enabled: true, sampleRatio: 0, follow, trusted }).begin(x, header, peer);
      // The origin is told the gateway's own decision; the caller's trace is kept either way.
      expect(x.traceId).toBe(TRACE);
      // (Its sampled bit; the random bit 02 passes as it came.)
      expect(Number.parseInt(traceparentOf(x)?.slice(-2) ?? '', 16) & 1).toBe(x.traceSampled ? 1 : 0);
      expect(Number.parseInt(traceparentOf(x)?.slice(-2) ?? '', 16) & 2).toBe(
        Number.parseInt(header.slice(-2), 16) & 2,
      );
      return x.traceSampled;
    };
    expect(sampled('always', VALID, '192.0.2.9')).toBe(true);
    expect(sampled('always', VALID)).toBe(true);
    expect(sampled('trusted', VALID, '10.0.0.1')).toBe(true);
    expect(sampled('trusted', VALID, '192.0.2.9')).toBe(false);
    expect(sampled('trusted', VALID)).toBe(false);
    expect(sampled('never', VALID, '10.0.0.1')).toBe(false);
    // Flags other than sampled (a later version's bits) ask for nothing.
    expect(sampled('always', `00-${TRACE}-${PARENT}-02`, '10.0.0.1')).toBe(false);
    expect(sampled('always', `00-${TRACE}-${PARENT}-03`, '10.0.0.1')).toBe(true);
  });

  it('decides a caller’s trace by a draw of its own when it does not follow the caller: its id chooses nothing', () => {
    // An id whose randomness is all f's is sampled at any ratio above 0 by R >= T.
    const chosen = `00-${'4bf92f3577b34da6a3'}${'f'.repeat(14)}-${PARENT}-00`;
    const count = (follow: 'always' | 'trusted' | 'never', ip?: string) => {
      const t = new TraceStart({ enabled: true, sampleRatio: 0.01, follow, trusted: (a) => a === '10.0.0.1' });
      let n = 0;
      for (let i = 0; i < 2000; i++) {
        const x = fields();
        t.begin(x, chosen, ip === undefined ? undefined : { remoteAddress: ip });
        if (x.traceSampled) n++;
      }
      return n;
    };
    expect(count('always', '192.0.2.9')).toBe(2000);
    expect(count('trusted', '10.0.0.1')).toBe(2000);
    // 1% of 2,000 is 20; 60 or more has a chance below 1e-13.
    expect(count('trusted', '192.0.2.9')).toBeLessThan(60);
    expect(count('never', '10.0.0.1')).toBeLessThan(60);
  });

  it('takes an explicit rv of the caller’s tracestate for its randomness (OpenTelemetry’s ot=rv:)', () => {
    expect(explicitRandomness('ot=th:8;rv:ffffffffffffff')).toBe('ffffffffffffff');
    expect(explicitRandomness(['vendor=1', ' ot=rv:0123456789abcd;th:0 , x=y'])).toBe('0123456789abcd');
    for (const bad of [
      'ot=rv:FFFFFFFFFFFFFF',
      'ot=rv:fff',
      'ot=rv:ffffffffffffff0',
      'xot=rv:ffffffffffffff',
      'ot=th:8',
    ]) {
      expect(explicitRandomness(bad), bad).toBeNull();
    }
    expect(explicitRandomness(undefined)).toBeNull();
    const low = `00-${'4bf92f3577b34da6a3'}${'0'.repeat(14)}-${PARENT}-00`;
    const decide = (tracestate?: string) => {
      const x = fields();
      new TraceStart({ enabled: true, sampleRatio: 0.5 }).begin(x, low, undefined, tracestate);
      return x.traceSampled;
    };
    expect([decide(), decide('ot=rv:ffffffffffffff'), decide('ot=rv:00000000000000')]).toEqual([false, true, false]);
  });

  it('never takes an invalid traceparent’s flags as sampled', () => {
    for (const header of [
      `ff-${TRACE}-${PARENT}-01`,
      `00-${TRACE}-${PARENT}-0g`,
      `00-${'0'.repeat(32)}-${PARENT}-01`,
    ]) {
      const x = fields();
      new TraceStart({ enabled: true, sampleRatio: 0 }).begin(x, header, { remoteAddress: '10.0.0.1' });
      expect(x.traceId).not.toBe(TRACE);
      expect(x.traceSampled).toBe(false);
    }
  });

  it('mints nothing and sends nothing when tracing is off and no traceparent came', () => {
    const x = fields();
    new TraceStart({ enabled: false, sampleRatio: 1 }).begin(x, undefined);
    expect(x.traceId).toBe('');
    expect(traceparentOf(x)).toBeNull();
  });

  it('passes the caller’s flags through unchanged when tracing is off', () => {
    const x = fields();
    new TraceStart({ enabled: false, sampleRatio: 1 }).begin(x, `00-${TRACE}-${PARENT}-00`);
    expect(traceparentOf(x)).toBe(`00-${TRACE}-${x.spanId}-00`);
    expect(x.traceSampled).toBe(false);
  });

  it('samples by the trace id alone: the same id, the same choice; about the ratio of ids', () => {
    const t = new TraceStart({ enabled: true, sampleRatio: 0.25 });
    let kept = 0;
    for (let i = 0; i < 4000; i++) {
      const x = fields();
      t.begin(x, undefined);
      if (x.traceSampled) kept++;
      const again = fields();
      t.begin(again, `00-${x.traceId}-${PARENT}-00`);
      expect(again.traceSampled).toBe(x.traceSampled);
    }
    expect(kept).toBeGreaterThan(800);
    expect(kept).toBeLessThan(1200);
    // The highest randomness is kept, the lowest not (R >= T), whatever the id's first 18 digits.
    const low = fields();
    t.begin(low, `00-${'f'.repeat(18)}00000000000000-${PARENT}-00`);
    expect(low.traceSampled).toBe(false);
    const high = fields();
    t.begin(high, `00-${'0'.repeat(17)}1ffffffffffffff-${PARENT}-00`);
    expect(high.traceSampled).toBe(true);
  });

  it('cuts distinct ids from its pool across refills', () => {
    const pool = new HexPool(64);
    const seen = new Set<string>();
    for (let i = 0; i < 100; i++) seen.add(pool.take(32));
    expect(seen.size).toBe(100);
  });
});

/**
 * OpenTelemetry's consistent probability sampling (specification/trace/tracestate-probability-sampling.md,
 * "If rv >= th, keep"; the Collector's pkg/sampling ProbabilityToThreshold): R = the trace id's
 * rightmost 56 bits, T = 2^56 - round(p * 2^56), sampled iff R >= T. Written here with BigInt, apart
 * from the gateway's text comparison.
 */
const otel = (ratio: number, traceId: string): boolean =>
  BigInt(`0x${traceId.slice(18)}`) >= (1n << 56n) - BigInt(Math.round(ratio * 2 ** 56));

describe('head sampling: the same traces as OpenTelemetry at the same ratio', () => {
  const decide = (ratio: number, traceId: string): boolean => {
    const x = fields();
    // A caller that did not sample its trace, whose flag is followed: decided by its id.
    new TraceStart({ enabled: true, sampleRatio: ratio }).begin(x, `00-${traceId}-${PARENT}-00`);
    return x.traceSampled;
  };
  const hex = (n: number) => fc.uint8Array({ minLength: n, maxLength: n }).map((b) => Buffer.from(b).toString('hex'));
  // Random ids, and ids whose random part is at (or one either side of) a ratio's threshold.
  const ratio = fc.oneof(
    fc.double({ min: 0, max: 1, noNaN: true }),
    fc.constantFrom(0, 1, 0.5, 0.25, 0.01, 0.001, 1 / 3, 0.999, 2 ** -56, 1 - 2 ** -53),
  );
  const nearThreshold = (p: number) =>
    fc.tuple(hex(9), fc.constantFrom(-1n, 0n, 1n)).map(([head, d]) => {
      const t = (1n << 56n) - BigInt(Math.round(p * 2 ** 56)) + d;
      const r = t < 0n ? 0n : t >= 1n << 56n ? (1n << 56n) - 1n : t;
      return `${head.slice(0, 17)}1${r.toString(16).padStart(14, '0')}`;
    });

  it('agrees with R >= T on random ids and on ids at the threshold', () => {
    fc.assert(
      fc.property(
        ratio.chain((p) => fc.tuple(fc.constant(p), fc.oneof(hex(16), nearThreshold(p)))),
        ([p, id]) => {
          expect(decide(p, id)).toBe(otel(p, id));
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('keeps the highest randomness: at 1%, ...ffffffffffffff is sampled and ...00000000000001 is not', () => {
    const high = `4bf92f3577b34da6a3${'f'.repeat(14)}`;
    const low = `4bf92f3577b34da6a3${'0'.repeat(13)}1`;
    expect([decide(0.01, high), decide(0.01, low)]).toEqual([true, false]);
  });

  it('a higher ratio samples every trace a lower one does', () => {
    fc.assert(
      fc.property(ratio, ratio, hex(16), (a, b, id) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        if (decide(lo, id)) expect(decide(hi, id)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('ratio 1 samples every id and 0 none, the extremes of the random part included', () => {
    for (const tail of ['00000000000000', '00000000000001', '7fffffffffffff', 'fffffffffffffe', 'ffffffffffffff']) {
      const id = `0123456789abcdef01${tail}`;
      expect([decide(1, id), decide(0, id)]).toEqual([true, false]);
    }
  });

  it("the rejection threshold of a ratio, as 14 hex digits (the specification's examples)", () => {
    expect(rejectionThreshold(1)).toBe('00000000000000');
    expect(rejectionThreshold(0.5)).toBe('80000000000000');
    expect(rejectionThreshold(0.25)).toBe('c0000000000000');
    // (1 - 0.01) * 2^56: the specification's 0xfd70a4 at 6 digits, here at all 14.
    expect(rejectionThreshold(0.01)).toBe('fd70a3d70a3d71');
    expect(rejectionThreshold(0)).toBe('g');
  });
});

describe('forwardRequestHeaders with trace context', () => {
  const base = {
    dropAuthorization: false,
    clientIp: '10.0.0.1',
    clientTrusted: false,
    proto: 'http',
    originHost: 'o',
    identity: null,
  };
  const raw = ['Traceparent', VALID, 'tracestate', 'vendor=1', 'accept', '*/*'];

  it('replaces the client’s traceparent by the gateway’s and keeps tracestate with a valid one', () => {
    const out = forwardRequestHeaders(raw, { ...base, traceparent: 'ours', keepTracestate: true });
    expect(out.filter((v) => v.toLowerCase() === 'traceparent')).toEqual(['traceparent']);
    expect(out[out.indexOf('traceparent') + 1]).toBe('ours');
    expect(out).toContain('vendor=1');
  });

  it('drops tracestate when the trace was restarted, and sends no traceparent when there is none', () => {
    const out = forwardRequestHeaders(raw, { ...base, traceparent: null, keepTracestate: false });
    expect(out.map((v) => v.toLowerCase())).not.toContain('traceparent');
    expect(out).not.toContain('vendor=1');
  });

  it('passes both unchanged without trace options', () => {
    expect(forwardRequestHeaders(raw, base)).toContain(VALID);
  });
});
