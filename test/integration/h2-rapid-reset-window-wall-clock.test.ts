// Regression tests from a review of the HTTP/2 edge (2026-11-28).
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { F, frame, hpack, RawH2, request, rstStream, T } from '../helpers/h2-frames.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const { NGHTTP2_CANCEL, NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants;
const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);

/**
 * docs/security.md: "streams a client resets ... are counted per session in 10 s windows;
 * past `server.http2_limits.max_resets_per_10s` the session gets GOAWAY ENHANCE_YOUR_CALM".
 * The main edge measures those 10 s on the wall clock (edge.ts `now: () => d.clock.now()`,
 * Date.now; resets.ts `now - this.start >= RESET_WINDOW_MS`), where the ops and management
 * listeners use performance.now() (console.ts). Once NTP steps the wall clock back, the
 * window cannot end until the clock is back past its start: every reset in the meantime
 * (an hour, for a one-hour step) counts in the same window, and a session resetting well
 * under the limit per 10 s is sent GOAWAY ENHANCE_YOUR_CALM and cut.
 */
describe('HTTP/2 rapid-reset windows when the wall clock steps back', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  const clock = new ManualClock(T0);
  const LIMIT = 20;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway(
      {
        server: {
          http2: 'h2c',
          keep_alive_timeout_ms: 30_000,
          http2_limits: { max_concurrent_streams: 100, max_header_list_bytes: 65_536, max_resets_per_10s: LIMIT },
        },
        routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      },
      { clock },
    );
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  /** Opens and resets `n` streams from `next` on (HEADERS and RST_STREAM CANCEL in one write each); the next id. */
  const resets = async (c: RawH2, next: number, n: number): Promise<number> => {
    for (let i = 0; i < n; i++, next += 2)
      c.write(
        Buffer.concat([
          frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, next, hpack(request('/open/r'))),
          rstStream(next, NGHTTP2_CANCEL),
        ]),
      );
    await sleep(300);
    return next;
  };

  it('control: 15 resets, 11 s later (by the clock) 15 more: no GOAWAY', async () => {
    clock.set(T0);
    const c = await RawH2.connect(port);
    let id = await resets(c, 1, 15);
    clock.advance(11_000);
    id = await resets(c, id, 15);
    expect(c.goawayCode()).toBeNull();
    c.destroy();
  });

  it('control: 25 resets at once get GOAWAY ENHANCE_YOUR_CALM', async () => {
    const c = await RawH2.connect(port);
    await resets(c, 1, 25);
    expect(c.goawayCode()).toBe(NGHTTP2_ENHANCE_YOUR_CALM);
    c.destroy();
  });

  it('15 resets, the clock stepped back an hour, 15 more after 10.5 s: two windows, no GOAWAY', async () => {
    clock.set(T0 + 60_000);
    const c = await RawH2.connect(port);
    let id = await resets(c, 1, 15);
    // NTP steps the host's clock back an hour; then 10.5 s pass.
    clock.set(T0 + 60_000 - 3_600_000);
    await sleep(10_500);
    id = await resets(c, id, 15);
    // Observed: GOAWAY ENHANCE_YOUR_CALM (30 resets counted in one "10 s" window that lasts an hour).
    expect(c.goawayCode()).toBeNull();
    c.destroy();
  }, 20_000);
});
