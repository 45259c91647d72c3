import { describe, expect, it } from 'vitest';
import { forwardRequestHeaders } from '../../src/proxy/headers.js';
import { boundTracestate } from '../../src/tracing/tracestate.js';

describe('boundTracestate (W3C Trace Context §3.3)', () => {
  it('keeps a well-formed list as it is, fields joined in order', () => {
    expect(boundTracestate(['congo=t61rcWkgMzE,rojo=00f067aa0ba902b7'])).toBe(
      'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7',
    );
    expect(boundTracestate(['a=1', 'b=2 , c=3'])).toBe('a=1,b=2,c=3');
    expect(boundTracestate(['tenant@vendor=x', 'ot=th:8;rv:0123456789abcd'])).toBe(
      'tenant@vendor=x,ot=th:8;rv:0123456789abcd',
    );
  });

  it('drops malformed members, repeated keys and empty members, keeping the rest', () => {
    expect(boundTracestate(['Upper=1,a=1,,b=x=y,=v,novalue,c=ok,a=2,d=trailing ,e=\u00e9'])).toBe(
      'a=1,c=ok,d=trailing',
    );
    expect(boundTracestate(['', ' , '])).toBeNull();
    expect(boundTracestate(['Bad=1'])).toBeNull();
  });

  it('keeps at most 32 members, the first ones', () => {
    const many = Array.from({ length: 40 }, (_, i) => `k${i}=v`);
    const out = boundTracestate([many.join(',')]);
    expect(out?.split(',')).toEqual(many.slice(0, 32));
  });

  it('past 512 characters drops members longer than 128 first, then from the end', () => {
    const long = `big=${'x'.repeat(200)}`;
    const mid = Array.from({ length: 6 }, (_, i) => `m${i}=${'y'.repeat(60)}`);
    // 6 x 63 + 5 commas = 383, with the long one 588: only the long one goes.
    expect(boundTracestate([[mid[0], long, ...mid.slice(1)].join(',')])).toBe(mid.join(','));
    const many = Array.from({ length: 12 }, (_, i) => `n${String(i).padStart(2, '0')}=${'z'.repeat(56)}`);
    const out = boundTracestate([many.join(',')]) as string;
    expect(out.length).toBeLessThanOrEqual(512);
    expect(out.split(',')).toEqual(many.slice(0, 8)); // 8 x 60 + 7 = 487; a ninth makes 548
  });
});

describe('forwardRequestHeaders: the tracestate an origin gets', () => {
  const base = {
    dropAuthorization: false,
    clientIp: '127.0.0.1',
    clientTrusted: false,
    proto: 'http',
    originHost: 'origin',
    identity: null,
    traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  };
  const states = (out: string[]) => out.filter((_, i) => i % 2 === 1 && out[i - 1]?.toLowerCase() === 'tracestate');

  it('sends the bounded list once, after the gateway’s traceparent', () => {
    const raw = ['tracestate', 'a=1,Bad=2', 'TraceState', 'b=2,a=3', 'accept', '*/*'];
    expect(states(forwardRequestHeaders(raw, { ...base, keepTracestate: true }))).toEqual(['a=1,b=2']);
  });

  it('sends none when nothing of it is kept, or when it is not to be kept', () => {
    expect(states(forwardRequestHeaders(['tracestate', 'Bad=1'], { ...base, keepTracestate: true }))).toEqual([]);
    expect(states(forwardRequestHeaders(['tracestate', 'a=1'], { ...base, keepTracestate: false }))).toEqual([]);
  });

  it('passes tracestate as it came when the gateway writes no traceparent', () => {
    const { traceparent: _, ...off } = base;
    expect(states(forwardRequestHeaders(['tracestate', 'Bad=1, a=1'], off))).toEqual(['Bad=1, a=1']);
  });
});
