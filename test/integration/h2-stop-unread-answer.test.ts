// Regression tests (2026-11-28): a stop waited without end for an HTTP/2 client that stopped reading.
import { expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { h2connect } from '../helpers/h2.js';
import { startServer } from '../helpers/origin.js';

/**
 * A stop gives requests in flight server.drain_timeout_ms, then cuts every connection.
 * An HTTP/2 session whose client had its answer but read none of it (and asked to close
 * its session, which waits for that stream) was destroyed at the grace, yet Node ends a
 * destroyed session's socket only once its writes finish, which that client never let
 * happen: the socket stayed, the listener's close never came, and the stop never ended
 * (a SIGTERM then hangs until the orchestrator's SIGKILL). The socket is now cut with it.
 */
it('a stop ends at its grace even with an HTTP/2 client that reads nothing of its answer', async () => {
  const origin = await startServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('answer'));
  });
  const t = await startGateway({
    server: { http2: 'h2c', drain_timeout_ms: 1000 },
    routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
  });
  const s = await h2connect(t.url);
  s.on('error', () => {});
  try {
    const r = s.request({ ':method': 'POST', ':path': '/open/unread', 'content-length': '5' });
    r.on('error', () => {});
    r.end('hello');
    await new Promise((res) => r.once('response', res));
    // Its answer is never read; its session is asked to close (after that stream).
    s.close();
    const t0 = Date.now();
    const stopped = await Promise.race([
      t.cleanup().then(() => 'stopped'),
      new Promise((res) => setTimeout(() => res('still stopping after 20 s'), 20_000).unref()),
    ]);
    expect(stopped).toBe('stopped');
    expect(Date.now() - t0).toBeLessThan(20_000);
  } finally {
    s.destroy();
    await origin.close();
  }
}, 60_000);
