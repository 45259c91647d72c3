import type http from 'node:http';
import type net from 'node:net';
import tls from 'node:tls';
import type { Clock } from '../clock.js';
import type { ListenerTls } from '../config/tls-schema.js';
import { SniTable, type TlsMaterial } from './material.js';
import type { TlsMetrics } from './metrics.js';
import { dayOf, type TicketSource, ticketKeyFor, untilNextDay } from './tickets.js';

/** Takes a TLS connection whose client chose HTTP/2 by ALPN (the HTTP/2 module's); null: h2 is not offered. */
export type AcceptH2 = ((socket: tls.TLSSocket) => void) | null;

export interface FrontDeps {
  /** The HTTP/1.1 server every other secure connection is handed to (its budgets, timeouts, upgrades and drain). */
  http: http.Server;
  settings: ListenerTls;
  material: TlsMaterial;
  tickets: TicketSource;
  clock: Clock;
  /** A handshake not done within this is dropped (and counted). */
  handshakeTimeoutMs: number;
  acceptH2: AcceptH2;
  metrics: TlsMetrics;
  /** The listener's name in the metrics (main, ops, management). */
  listener: string;
}

/** A TLS listener in front of an HTTP server. */
export interface TlsFront {
  readonly server: tls.Server;
  /** New certificates for new handshakes; open connections keep theirs. */
  update(m: TlsMaterial): void;
  /** Ends every connection, handshaking or not (a stop's grace is over). */
  destroyAll(): void;
  /** Stops the daily ticket-key rotation. */
  close(): void;
}

/**
 * TLS terminated in front of `http`: the listening socket is a tls.Server, and each
 * connection, once secure, is given to the HTTP server as if it had accepted it
 * (`emit('connection')`, as https.Server is built), so nothing of HTTP/1.1 changes.
 * Certificates are picked by SNI; session tickets are sealed with the day's key of
 * `tickets`, so they resume on any thread that holds the same source.
 */
export function tlsFront(d: FrontDeps): TlsFront {
  const s = d.settings;
  const label = d.metrics.handshakeFailures.labels(d.listener);
  const ca = (m: TlsMaterial) => (m.ca === null ? {} : { ca: m.ca });
  const contextOptions = (m: TlsMaterial): tls.SecureContextOptions => ({
    cert: m.certs[0]?.cert,
    key: m.certs[0]?.key,
    minVersion: s.min_version,
    ...ca(m),
    // The same on every thread and instance (Node's default derives from argv): tickets resume anywhere.
    sessionIdContext: 'wakegate',
  });
  let sni = new SniTable(d.material, ca(d.material));
  const server = tls.createServer({
    ...contextOptions(d.material),
    ALPNProtocols: d.acceptH2 ? ['h2', 'http/1.1'] : ['http/1.1'],
    requestCert: s.client_auth !== 'none',
    rejectUnauthorized: s.client_auth === 'required',
    handshakeTimeout: d.handshakeTimeoutMs,
    SNICallback: (name, cb) => cb(null, sni.pick(name) ?? undefined),
  });
  let day = -1;
  const keys = () => {
    day = dayOf(d.clock.now());
    server.setTicketKeys(ticketKeyFor(d.tickets, day));
  };
  keys();
  let rotation: NodeJS.Timeout | null = null;
  const rotate = () => {
    // A timer may fire early against an injected clock: it only rotates once the day has turned.
    if (dayOf(d.clock.now()) !== day) keys();
    rotation = setTimeout(rotate, Math.max(1000, untilNextDay(d.clock.now())));
    rotation.unref();
  };
  rotation = setTimeout(rotate, Math.max(1000, untilNextDay(d.clock.now())));
  rotation.unref();

  // Every raw connection until it closes: a stop's grace ending ends handshakes too.
  const open = new Set<net.Socket>();
  server.on('connection', (raw: net.Socket) => {
    open.add(raw);
    raw.once('close', () => open.delete(raw));
  });
  server.on('secureConnection', (socket: tls.TLSSocket) => {
    if (d.acceptH2 !== null && socket.alpnProtocol === 'h2') return d.acceptH2(socket);
    d.http.emit('connection', socket);
  });
  // Garbage, plain HTTP, a stalled or refused handshake: counted, never logged one by one.
  server.on('tlsClientError', (_err: Error, socket: tls.TLSSocket) => {
    label.inc();
    socket.destroy();
  });
  return {
    server,
    update(m) {
      server.setSecureContext(contextOptions(m));
      sni = new SniTable(m, ca(m));
      // A new context has new ticket keys of its own: put the day's back, so tickets keep resuming.
      keys();
    },
    destroyAll() {
      for (const raw of open) raw.destroy();
    },
    close() {
      if (rotation !== null) clearTimeout(rotation);
      rotation = null;
    },
  };
}
