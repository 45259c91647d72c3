// An https:// collector signed by a private CA: tracing.tls.ca, as a route's origins have (2026-11-28).
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { insecureOrigins } from '../../src/tls/origin-trust.js';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { attempt, tracingTo, until } from '../helpers/otlp-collector.js';

/**
 * Collectors inside a company are often served with a certificate of its own CA. The
 * exporter trusted only the system's CAs (and NODE_EXTRA_CA_CERTS, process-wide):
 * tracing.tls takes a CA file and a server name as routes[].tls does, for the collector alone.
 */
describe('tracing.tls: a collector behind a private CA', () => {
  let certs: TestCerts;
  let server: https.Server;
  let url: string;
  let got = 0;

  beforeAll(async () => {
    certs = makeCerts();
    server = https.createServer(
      { cert: readFileSync(certs.server.cert), key: readFileSync(certs.server.key) },
      (req, res) => {
        req.resume();
        req.on('end', () => {
          got++;
          res.writeHead(200, { 'content-type': 'application/x-protobuf' });
          res.end();
        });
      },
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`;
  });
  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
    certs?.cleanup();
  });

  it('without it the collector is refused (its certificate is not trusted), the spans dropped', async () => {
    const before = got;
    const t = tracingTo(url, { max_retries: 0 });
    try {
      t.tracing.webhook(attempt());
      expect(
        await until(
          async () => (await t.metric('wakegate_trace_spans_dropped_total{reason="export_failed"}')) >= 1,
          5000,
        ),
      ).toBe(true);
      expect(got).toBe(before);
    } finally {
      await t.tracing.close();
    }
  });

  it('with tracing.tls.ca the spans are exported to it', async () => {
    const before = got;
    const tls = { ca: certs.ca, servername: null, insecure_skip_verify: false };
    const t = tracingTo(url, { max_retries: 0, tls });
    try {
      t.tracing.webhook(attempt());
      expect(await until(async () => (await t.metric('wakegate_trace_spans_exported_total')) >= 1, 5000)).toBe(true);
      expect(got).toBe(before + 1);
    } finally {
      await t.tracing.close();
    }
  });

  it('with a servername the certificate does not hold, refused', async () => {
    const tls = { ca: certs.ca, servername: 'elsewhere.test', insecure_skip_verify: false };
    const t = tracingTo(url, { max_retries: 0, tls });
    try {
      t.tracing.webhook(attempt());
      expect(
        await until(
          async () => (await t.metric('wakegate_trace_spans_dropped_total{reason="export_failed"}')) >= 1,
          5000,
        ),
      ).toBe(true);
    } finally {
      await t.tracing.close();
    }
  });

  it('the config takes it as routes[].tls is written; an unreadable CA file fails the start naming it; insecure is warned of', () => {
    const cfg = loadConfig({
      values: { tracing: { otlp_url: url, tls: { ca: certs.ca } } },
      env: { DATA_DIR: '/tmp/wakegate-tracing-ca-unused' },
    });
    expect(cfg.tracing.tls).toEqual({ ca: certs.ca, servername: null, insecure_skip_verify: false });
    expect(() =>
      tracingTo(url, { tls: { ca: '/nonexistent/ca.pem', servername: null, insecure_skip_verify: false } }),
    ).toThrow(/tracing\.tls\.ca.*ENOENT/);
    const insecure = loadConfig({
      values: { tracing: { otlp_url: url, tls: { insecure_skip_verify: true } } },
      env: { DATA_DIR: '/tmp/wakegate-tracing-ca-unused' },
    });
    expect(insecureOrigins(insecure)).toMatch(/tracing\.tls\.insecure_skip_verify is set/);
  });
});
