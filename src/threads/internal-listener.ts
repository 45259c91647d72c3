import { timingSafeEqual } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { type BodyRefusalKind, refusalKind } from '../management-body.js';
import { HANDOVER_PEER, HANDOVER_REFUSED, HANDOVER_TOKEN, internalConnectionLimit } from './handover.js';

/** Connections that have not yet shown the token, at most; past it the oldest is closed. */
export const UNPROVEN_CONNECTIONS = 32;

/** How long a connection may stay without showing the token (the edges send theirs at once). */
export const UNPROVEN_IDLE_MS = 1_000;

/**
 * The control thread's loopback listener for the /v2 calls edge threads hand over.
 * Any local process can connect to a loopback port, so connections are counted
 * apart: those that showed the token (the edges' pools, at most their sockets) and
 * the others, few, short-lived and evicted oldest first. A wrong token closes the
 * connection at once. Idle unproven connections cannot fill the listener and make
 * every handover fail.
 */
export function internalListener(o: {
  token: string;
  threads: number;
  /** `peer`: the edge's client connection's address; `refused`: why the edge did not read the body, or null. */
  serve: (req: IncomingMessage, res: ServerResponse, peer: string, refused: BodyRefusalKind | null) => void;
  unprovenLimit?: number;
  unprovenIdleMs?: number;
}): http.Server {
  const want = Buffer.from(o.token);
  const unprovenLimit = o.unprovenLimit ?? UNPROVEN_CONNECTIONS;
  const idleMs = o.unprovenIdleMs ?? UNPROVEN_IDLE_MS;
  const provenLimit = internalConnectionLimit(o.threads);
  /** Unproven connections, oldest first (a Set keeps insertion order). */
  const unproven = new Set<Socket>();
  const proven = new Set<Socket>();
  const server = http.createServer(
    {
      headersTimeout: idleMs * 2,
      requestTimeout: idleMs * 4,
      connectionsCheckingInterval: Math.max(50, Math.floor(idleMs / 2)),
    },
    (req, res) => {
      const socket = req.socket;
      const given = Buffer.from(String(req.headers[HANDOVER_TOKEN] ?? ''));
      if (given.length !== want.length || !timingSafeEqual(given, want)) return void socket.destroy();
      if (unproven.delete(socket)) {
        if (proven.size >= provenLimit) return void socket.destroy();
        proven.add(socket);
        socket.setTimeout(0);
      }
      const peer = String(req.headers[HANDOVER_PEER] ?? '');
      const refused = refusalKind(req.headers[HANDOVER_REFUSED]);
      delete req.headers[HANDOVER_TOKEN];
      delete req.headers[HANDOVER_PEER];
      delete req.headers[HANDOVER_REFUSED];
      o.serve(req, res, peer, refused);
    },
  );
  server.on('connection', (socket: Socket) => {
    unproven.add(socket);
    socket.setTimeout(idleMs, () => socket.destroy());
    socket.once('close', () => {
      unproven.delete(socket);
      proven.delete(socket);
    });
    if (unproven.size > unprovenLimit) {
      const oldest = unproven.values().next().value as Socket;
      unproven.delete(oldest);
      oldest.destroy();
    }
  });
  return server;
}
