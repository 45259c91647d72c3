import type http from 'node:http';
import { type Clock, systemClock } from '../clock.js';
import type { Config } from '../config/index.js';
import type { ListenerTls } from '../config/tls-schema.js';
import type { Metrics } from '../metrics/index.js';
import { type AcceptH2, type TlsFront, tlsFront } from './front.js';
import { readMaterial, type TlsMaterial } from './material.js';
import { tlsMetrics } from './metrics.js';
import type { Reloadable } from './part.js';
import { processTickets, type TicketSource } from './tickets.js';

/**
 * What an edge needs to terminate TLS: the certificates (and ticket_keys_file's keys)
 * as last loaded, and the ticket keys made at start (the process's, serving while
 * the material holds none).
 */
export interface EdgeTls {
  material: TlsMaterial;
  tickets: TicketSource;
}

/** The main listener's TLS front (server.tls), or null for plain HTTP. */
export function mainTls(d: {
  http: http.Server;
  cfg: Readonly<Config>;
  clock: Clock;
  tls: EdgeTls | null;
  acceptH2: AcceptH2;
  metrics: Metrics;
}): TlsFront | null {
  const settings = d.cfg.server.tls;
  if (settings === null || d.tls === null) return null;
  return tlsFront({
    http: d.http,
    settings,
    material: d.tls.material,
    tickets: d.tls.tickets,
    clock: d.clock,
    // The handshake is part of the header block's time (the slowloris guard).
    handshakeTimeoutMs: d.cfg.server.headers_timeout_ms,
    acceptH2: d.acceptH2,
    metrics: tlsMetrics(d.metrics.registry),
    listener: 'main',
  });
}

/** Reads server.tls's files and the ticket keys at start (a ConfigError names what does not load); null without TLS. */
export function loadEdgeTls(cfg: Readonly<Config>): EdgeTls | null {
  const t = cfg.server.tls;
  if (t === null) return null;
  const material = readMaterial(t, 'server.tls');
  return { material, tickets: material.tickets ?? processTickets() };
}

/**
 * TLS on a control-thread listener (server.ops_tls, management.tls) in front of its
 * HTTP server, with what its certificate reloads need; null without its block.
 */
export function listenerTls(d: {
  http: http.Server;
  settings: ListenerTls | null;
  at: string;
  listener: string;
  metrics: Metrics;
  handshakeTimeoutMs: number;
  /** HTTP/2 offered by ALPN beside http/1.1 (its connections' handler), or null. */
  acceptH2?: AcceptH2;
}): { front: TlsFront; reloadable: Reloadable } | null {
  if (d.settings === null) return null;
  const material = readMaterial(d.settings, d.at);
  const front = tlsFront({
    http: d.http,
    settings: d.settings,
    material,
    tickets: material.tickets ?? processTickets(),
    clock: systemClock,
    handshakeTimeoutMs: d.handshakeTimeoutMs,
    acceptH2: d.acceptH2 ?? null,
    metrics: tlsMetrics(d.metrics.registry),
    listener: d.listener,
  });
  return {
    front,
    reloadable: {
      listener: d.listener,
      at: d.at,
      settings: d.settings,
      initial: material,
      apply: (m) => front.update(m),
    },
  };
}
