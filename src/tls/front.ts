import { createHash } from 'node:crypto';
import type http from 'node:http';
import type net from 'node:net';
import tls from 'node:tls';
import type { Clock } from '../clock.js';
import type { ListenerTls } from '../config/tls-schema.js';
import { SniTable, type TlsMaterial } from './material.js';
import type { TlsMetrics } from './metrics.js';
import { dayOf, type TicketSource, ticketKeyFor } from './tickets.js';

/** Takes a TLS connection whose client chose HTTP/2 by ALPN (the HTTP/2 module's); null: h2 is not offered. */
export type AcceptH2 = ((socket: tls.TLSSocket) => void) | null;

export interface FrontDeps {
  /** The HTTP/1.1 server every other secure connection is handed to (its budgets, timeouts, upgrades and drain). */
  http: http.Server;
  settings: ListenerTls;
  material: TlsMaterial;
  /** The ticket keys while `material` brings none (no ticket_keys_file): the process's. */
  tickets: TicketSource;
  clock: Clock;
  /** A handshake not done within this is dropped (and counted). */
  handshakeTimeoutMs: number;
  acceptH2: AcceptH2;
  metrics: TlsMetrics;
  /** The listener's name in the metrics (main, ops, management). */
  listener: string;
}

/**
 * The session id context every ticket is bound to (OpenSSL resumes a session only in
 * the context it was made in, else it does a full handshake): the same on every thread
 * and instance with the same client-certificate settings (Node's default derives from
 * argv), so tickets resume anywhere, and another once the client CA changes, so a
 * client whose certificate the new CA would refuse cannot skip the check by resuming.
 */
function sessionContext(clientAuth: string, ca: string | null): string {
  return createHash('sha256')
    .update(`wakegate\0${clientAuth}\0${ca ?? ''}`)
    .digest('hex')
    .slice(0, 32);
}

/** A TLS listener in front of an HTTP server. */
export interface TlsFront {
  readonly server: tls.Server;
  /** New certificates (and ticket_keys_file's keys) for new handshakes; open connections keep theirs. */
  update(m: TlsMaterial): void;
  /** Ends every connection, handshaking or not (a stop's grace is over). */
  destroyAll(): void;
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
  // What every context of the listener shares: the client CAs, and the session id context they make.
  const shared = (m: TlsMaterial) => ({
    ...(m.ca === null ? {} : { ca: m.ca }),
    sessionIdContext: sessionContext(s.client_auth, m.ca),
  });
  const contextOptions = (m: TlsMaterial): tls.SecureContextOptions => ({
    cert: m.certs[0]?.cert,
    key: m.certs[0]?.key,
    minVersion: s.min_version,
    ...shared(m),
  });
  let sni = new SniTable(d.material, shared(d.material));
  const server = tls.createServer({
    ...contextOptions(d.material),
    ALPNProtocols: d.acceptH2 ? ['h2', 'http/1.1'] : ['http/1.1'],
    requestCert: s.client_auth !== 'none',
    rejectUnauthorized: s.client_auth === 'required',
    handshakeTimeout: d.handshakeTimeoutMs,
    SNICallback: (name, cb) => cb(null, sni.pick(name) ?? undefined),
  });
  // The HTTP server's bound on connections holds at the TLS front too (connections are counted where accepted).
  if (d.http.maxConnections !== undefined) server.maxConnections = d.http.maxConnections;
  // ticket_keys_file's keys as last loaded (a reload replaces them), else the process's.
  let tickets = d.material.tickets ?? d.tickets;
  let day = -1;
  const keys = () => {
    day = dayOf(d.clock.now());
    server.setTicketKeys(ticketKeyFor(tickets, day));
  };
  keys();

  // Every raw connection until it closes: a stop's grace ending ends handshakes too.
  const open = new Set<net.Socket>();
  server.on('connection', (raw: net.Socket) => {
    // The day's ticket key, rotated by the first connection after UTC midnight (one
    // compare a connection, and exact against the injected clock).
    if (dayOf(d.clock.now()) !== day) keys();
    open.add(raw);
    raw.once('close', () => open.delete(raw));
  });
  server.on('secureConnection', (socket: tls.TLSSocket) => {
    // A client may not start a handshake again (TLS 1.2): each is a full one the server
    // pays for, and the certificate read at the first request would be stale (nginx and
    // BoringSSL refuse them too). TLS 1.3 has no renegotiation.
    socket.disableRenegotiation();
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
      sni = new SniTable(m, shared(m));
      // The file's keys as reloaded: a key no longer in it seals and opens nothing from now.
      if (m.tickets) tickets = m.tickets;
      // A new context has new ticket keys of its own: put the day's back, so tickets keep resuming.
      keys();
    },
    destroyAll() {
      for (const raw of open) raw.destroy();
    },
  };
}
