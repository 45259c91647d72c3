import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';
import { createTracing } from '../../src/tracing/index.js';

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

  describe('headers: every name and value checked at start', () => {
    const url = 'http://collector:4318/v1/traces';

    it('takes tokens, tabs, spaces and Latin-1 in values', () => {
      const t = loadConfig({
        values: { tracing: { otlp_url: url, headers: { authorization: 'Bearer abc.def', 'X-Scope-OrgID': 'a\tb é' } } },
        env: {},
      }).tracing;
      expect(t.headers).toEqual({ authorization: 'Bearer abc.def', 'X-Scope-OrgID': 'a\tb é' });
    });

    it('refuses a value with a line break or another control character, without repeating it', () => {
      for (const value of [
        'Bearer s3cret\r\nx-evil: 1',
        'Bearer s3cret\n',
        's3cret\u0000',
        's3cret\u007f',
        's3cret€',
      ]) {
        const m = problem({ otlp_url: url, headers: { authorization: value } });
        expect(m).toContain('tracing.headers.authorization: holds a character a header value cannot have');
        expect(m).not.toContain('s3cret');
      }
    });

    it('refuses a value that is not text without repeating it', () => {
      const m = problem({ otlp_url: url, headers: { 'x-api-key': 987654321 } });
      expect(m).toContain('tracing.headers.x-api-key: must be text');
      expect(m).not.toContain('987654321');
      expect(problem({ otlp_url: url, headers: { 'x-api-key': 'a'.repeat(8193) } })).toBe(
        'config: tracing.headers.x-api-key: must be at most 8192 characters long',
      );
    });

    it("refuses the exporter's own headers (framing, content type, host), in any case", () => {
      for (const name of [
        'content-length',
        'Content-Type',
        'HOST',
        'transfer-encoding',
        'Connection',
        'expect',
        'keep-alive',
        'upgrade',
      ]) {
        expect(problem({ otlp_url: url, headers: { [name]: '5' } })).toBe(
          `config: tracing.headers.${name}: is set by the exporter itself (the request's framing and content type); it cannot be configured`,
        );
      }
    });

    it('names each bad header', () => {
      const m = problem({ otlp_url: url, headers: { host: 'x', 'x-ok': 'fine', 'x-bad': 'a\rb' } }).split('\n');
      expect(m).toHaveLength(2);
      expect(m[0]).toContain('tracing.headers.host:');
      expect(m[1]).toContain('tracing.headers.x-bad:');
    });
  });

  describe('credentials in otlp_url', () => {
    const basic = (s: string) => `Basic ${Buffer.from(s, 'utf8').toString('base64')}`;
    const load = (tracing: Record<string, unknown>) => loadConfig({ values: { tracing }, env: {} }).tracing;

    it('become an authorization: Basic header, and leave the URL', () => {
      const t = load({ otlp_url: 'http://collector:s3cret@otel:4318/v1/traces', headers: { 'x-tenant': 'a' } });
      expect(t.otlp_url).toBe('http://otel:4318/v1/traces');
      expect(t.headers).toEqual({ 'x-tenant': 'a', authorization: basic('collector:s3cret') });
    });

    it('are percent-decoded (RFC 3986 userinfo), a query kept', () => {
      const t = load({ otlp_url: 'https://me%40corp:p%3Aw%20d%25@otel/v1/traces?tenant=1' });
      expect(t.otlp_url).toBe('https://otel/v1/traces?tenant=1');
      expect(t.headers.authorization).toBe(basic('me@corp:p:w d%'));
      expect(load({ otlp_url: 'http://token@otel/v1/traces' }).headers.authorization).toBe(basic('token:'));
    });

    it('leave a URL without them as written', () => {
      const t = load({ otlp_url: 'http://otel:4318/v1/traces' });
      expect(t.otlp_url).toBe('http://otel:4318/v1/traces');
      expect(t.headers).toEqual({});
    });

    it('are refused beside an authorization header (two credentials), without repeating the password', () => {
      for (const name of ['authorization', 'Authorization']) {
        const m = problem({ otlp_url: 'http://u:s3cret@otel/v1/traces', headers: { [name]: 'Bearer t0ken' } });
        expect(m).toBe(
          "config: tracing.otlp_url: carries credentials (user:password@) and tracing.headers sets authorization too: keep one of them (the URL's are sent as Basic authentication)",
        );
        expect(m).not.toContain('s3cret');
        expect(m).not.toContain('t0ken');
      }
    });

    it('are refused when Basic authentication cannot carry them, without repeating them', () => {
      const bad = problem({ otlp_url: 'http://u:s3cret%zz@otel/v1/traces' });
      expect(bad).toContain('tracing.otlp_url: its credentials (user:password@) are not valid percent-encoding');
      expect(bad).not.toContain('s3cret');
      const colon = problem({ otlp_url: 'http://u%3Ax:s3cret@otel/v1/traces' });
      expect(colon).toContain('tracing.otlp_url: the user name of its credentials (user:password@) holds a colon');
      expect(colon).not.toContain('s3cret');
      expect(problem({ otlp_url: 'http://u:s3cret@[bad/v1/traces' })).not.toContain('s3cret');
    });

    it('reach the collector as Basic authentication (config through export)', async () => {
      const seen: http.IncomingHttpHeaders[] = [];
      const server = http.createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          seen.push(req.headers);
          res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const port = (server.address() as AddressInfo).port;
      const cfg = loadConfig({
        values: {
          tracing: {
            otlp_url: `http://collector:s3cret@127.0.0.1:${port}/v1/traces`,
            headers: { 'x-tenant': 'a' },
            flush_interval_ms: 10,
          },
        },
        env: {},
      });
      const tracing = createTracing({ cfg, log: silentLogger, metrics: createMetrics({ process: false }) });
      try {
        tracing.webhook({
          kind: 'webhook',
          deliveryId: 'del_1',
          eventType: 'wake.error',
          attempt: 1,
          url: 'https://hooks.example.com/in',
          payload: '{}',
          startMs: Date.now(),
          durationMs: 5,
          status: 200,
          error: null,
        });
        for (let i = 0; i < 200 && seen.length < 1; i++) await new Promise((r) => setTimeout(r, 25));
        expect(seen[0]?.authorization).toBe(basic('collector:s3cret'));
        expect(seen[0]?.['x-tenant']).toBe('a');
        expect(seen[0]?.['content-type']).toBe('application/x-protobuf');
      } finally {
        await tracing.close();
        await new Promise<void>((r) => server.close(() => r()));
      }
    });
  });
});
