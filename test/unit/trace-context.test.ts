import { describe, expect, it } from 'vitest';
import { forwardRequestHeaders } from '../../src/proxy/headers.js';
import { HexPool, parseTraceparent, type TraceFields, TraceStart, traceparentOf } from '../../src/tracing/context.js';

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
      expect(traceparentOf(x)?.endsWith(x.traceSampled ? '-01' : '-00')).toBe(true);
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
    const low = fields();
    t.begin(low, `00-${'f'.repeat(18)}00000000000000-${PARENT}-00`);
    expect(low.traceSampled).toBe(true);
    const high = fields();
    t.begin(high, `00-${'0'.repeat(18)}ffffffffffffff-${PARENT}-00`);
    expect(high.traceSampled).toBe(false);
  });

  it('cuts distinct ids from its pool across refills', () => {
    const pool = new HexPool(64);
    const seen = new Set<string>();
    for (let i = 0; i < 100; i++) seen.add(pool.take(32));
    expect(seen.size).toBe(100);
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
