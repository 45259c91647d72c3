import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATEWAY } from '../helpers/child.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { deadPort } from '../helpers/origin.js';

/**
 * The ops listener (docs/operations.md "Processes and ports", "Metrics"): /healthz is 200
 * while the process runs; /readyz is 503 while starting or stopping. DESIGN "Errors":
 * every error the gateway itself returns has the `{"error": {...}}` body.
 */
// Regression tests from a review of the CLI, configuration and operations (each failed before its fix).
describe('the ops listener answers a wrong method as an HTTP server and as DESIGN says', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway({ routes: [] });
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it.each(['/metrics', '/healthz', '/readyz'])('POST %s: 405 with Allow and the error body', async (path) => {
    const r = await fetch(`${t.opsUrl}${path}`, { method: 'POST', body: 'x' });
    expect(r.status).toBe(405);
    // RFC 9110 §15.5.6: the origin server MUST generate an Allow header field in a 405 response.
    expect(r.headers.get('allow')).toMatch(/GET/);
    // Actual body: {"status":"method not allowed"}; the same listener's 404 has DESIGN's body.
    const body = (await r.json()) as { error?: { type?: string; message?: string } };
    expect(body.error?.type, JSON.stringify(body)).toEqual(expect.any(String));
    expect(body.error?.message).toEqual(expect.any(String));
  });
});
