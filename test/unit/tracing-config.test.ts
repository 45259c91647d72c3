import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';

const problem = (tracing: Record<string, unknown>): string => {
  try {
    loadConfig({ values: { tracing }, env: {} });
    return 'accepted';
  } catch (e) {
    return (e as Error).message;
  }
};

describe('tracing config', () => {
  it('defaults to off, 1% head sampling, errors and slow always', () => {
    const t = loadConfig({ values: {}, env: {} }).tracing;
    expect(t).toMatchObject({ otlp_url: null, sample_ratio: 0.01, always_sample: ['errors', 'slow'], trace_url: null });
  });

  it('takes a collector, headers and a trace link', () => {
    const t = loadConfig({
      values: {
        tracing: {
          otlp_url: 'http://collector:4318/v1/traces',
          headers: { authorization: 'Bearer x' },
          trace_url: 'http://jaeger:16686/trace/{trace_id}',
        },
      },
      env: {},
    }).tracing;
    expect(t.otlp_url).toBe('http://collector:4318/v1/traces');
    expect(t.headers).toEqual({ authorization: 'Bearer x' });
    expect(t.queue_size).toBe(2048);
  });

  it('refuses what it cannot use, naming the key', () => {
    expect(problem({ sample_ratio: 2 })).toBe('config: tracing.sample_ratio: must be at most 1');
    expect(problem({ otlp_url: 'ftp://x' })).toContain('tracing.otlp_url: must be an http:// or https:// URL');
    expect(problem({ trace_url: 'http://jaeger/trace/' })).toContain(
      'tracing.trace_url: must be an http(s) URL containing {trace_id}',
    );
    expect(problem({ always_sample: ['fast'] })).toContain('tracing.always_sample[0]: must be one of "errors", "slow"');
    expect(problem({ headers: { 'bad name': 'x' } })).toContain('tracing.headers.bad name: is not a header name');
    expect(problem({ queue_size: 0 })).toContain('tracing.queue_size');
    expect(problem({ sampling: 1 })).toContain('tracing.sampling: is not a known setting');
  });
});
