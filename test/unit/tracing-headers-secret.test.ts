// Regression tests from a review of the OTLP export path (2026-11-28): secrets of tracing.headers in config errors.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';

/*
 * docs/tracing.md: "a value must hold no line break ... The message names the header, never its
 * value", and tracing.headers is where "a collector's auth token" goes. An operator used to
 * OpenTelemetry's OTEL_EXPORTER_OTLP_HEADERS (`key=value,key=value`) easily writes the headers
 * as one string; the config error then repeats its first 40 characters, i.e. the token
 * (problems.ts describe(): `not the text "authorization=Bearer sk_live_…"`), into the start-up
 * output and whatever collects it. Only a mapping's values are kept out of messages; the whole
 * setting is not treated as the secret it holds.
 */

const SECRET = 'sk_live_Q7w3TOKEN';

function problem(headers: unknown): string {
  try {
    loadConfig({
      values: { tracing: { otlp_url: 'http://collector:4318/v1/traces', headers } },
      env: { DATA_DIR: '/tmp/wakegate-review-tracing-unused' },
    });
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('the config was accepted');
}

describe('tracing.headers written in the wrong shape', () => {
  it('as OTEL_EXPORTER_OTLP_HEADERS text (key=value): refused without repeating the token', () => {
    const msg = problem(`authorization=Bearer ${SECRET}`);
    expect(msg).toContain('tracing.headers');
    // The token (or any part of it) must not appear in the error.
    expect(msg).not.toContain('sk_live_');
    expect(msg).not.toContain('Bearer');
  });

  it('as a bare header line (authorization: Bearer ...): refused without repeating the token', () => {
    // In YAML a quoted "authorization: Bearer x" is one string, not a mapping.
    const msg = problem(`authorization: Bearer ${SECRET}`);
    expect(msg).toContain('tracing.headers');
    expect(msg).not.toContain('sk_live_');
  });
});
