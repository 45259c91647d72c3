import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { listenerTlsSchema } from '../../src/config/tls-schema.js';
import { type TlsFront, tlsFront } from '../../src/tls/front.js';
import { readMaterial } from '../../src/tls/material.js';
import { tlsMetrics } from '../../src/tls/metrics.js';
import { processTickets } from '../../src/tls/tickets.js';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { handshake } from '../helpers/tls-client.js';

/** Session-ticket keys rotate with the UTC day of the injected clock; two fronts of one source share tickets. */
describe('ticket key rotation', () => {
  let certs: TestCerts;
  const clock = new ManualClock(Date.UTC(2026, 10, 25, 23, 59));
  const tickets = processTickets();
  const servers: { front: TlsFront; http: http.Server; port: number }[] = [];

  const start = async () => {
    const settings = listenerTlsSchema.parse({ certificates: [{ cert: certs.server.cert, key: certs.server.key }] });
    const h = http.createServer((_req, res) => res.end('ok'));
    const front = tlsFront({
      http: h,
      settings,
      material: readMaterial(settings, 'server.tls'),
      tickets,
      clock,
      handshakeTimeoutMs: 2000,
      acceptH2: null,
      metrics: tlsMetrics(new Registry()),
      listener: 'main',
    });
    await new Promise<void>((r) => front.server.listen(0, '127.0.0.1', r));
    const s = { front, http: h, port: (front.server.address() as AddressInfo).port };
    servers.push(s);
    return s;
  };

  beforeAll(() => {
    certs = makeCerts();
  });
  afterAll(async () => {
    for (const s of servers) {
      s.front.destroyAll();
      await new Promise((r) => s.front.server.close(r));
    }
    certs.cleanup();
  });

  it('resumes across listeners of one source the same day, not after the day turns', async () => {
    const a = await start();
    const b = await start();
    const first = await handshake(a.port, { ca: certs.caPem });
    expect(first.session).not.toBeNull();
    // Another listener (another thread's) of the same source opens the ticket.
    expect((await handshake(b.port, { ca: certs.caPem, session: first.session as Buffer })).reused).toBe(true);
    clock.advance(60_000); // 00:00 UTC: a new day's key, taken at the next connection
    const after = await handshake(b.port, { ca: certs.caPem, session: first.session as Buffer });
    expect(after.reused).toBe(false);
    // Tickets of the new day resume on both.
    expect((await handshake(a.port, { ca: certs.caPem, session: after.session as Buffer })).reused).toBe(true);
  });
});
