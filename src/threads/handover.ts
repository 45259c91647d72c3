import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { errorBody } from '../errors.js';
import type { Logger } from '../log.js';
import type { BodyRefusalKind } from '../management-body.js';
import { AnswerBudget, type AnswerLimits, HANDOVER_BUFFER_BYTES, relay } from './answer-relay.js';

/**
 * Connections each edge thread keeps to the control thread's internal listener, at
 * most (kept alive and reused). A call holds one only while the control thread
 * answers it: its body was read whole before (management-body.ts), and the answer
 * is read from the control thread at once, whatever the client's reading speed.
 */
export const HANDOVER_SOCKETS = 16;

/**
 * Hands a /v2 call over, its body read whole (or, `refused`, not read: why); held(): the
 * answer bytes this edge holds for clients not reading them yet.
 */
export type HandOver = ((
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer | null,
  refused?: BodyRefusalKind,
) => void) & {
  held: () => number;
};

/**
 * The headers of the handover (internal-listener.ts reads them once the token is shown):
 * set by the edge, whatever the client sent under their names. The peer is the edge's
 * connection's (the control thread reads X-Forwarded-For behind it as the edge would,
 * admission.ts clientOf); a refused body says why.
 */
export const HANDOVER_TOKEN = 'x-wakegate-internal';
export const HANDOVER_PEER = 'x-wakegate-peer';
export const HANDOVER_REFUSED = 'x-wakegate-body-refused';

/** The internal listener's connection limit for `threads` edge threads (with room for a thread started again). */
export const internalConnectionLimit = (threads: number): number => (threads + 1) * HANDOVER_SOCKETS;

/**
 * A /v2 call on the main listener, handed to the control thread on loopback with
 * its peer's address and its body (read whole on this edge, or refused: why); the
 * control thread answers it (and records its wake).
 */
export function handOver(
  internal: { port: number; token: string },
  log: Logger,
  limits: AnswerLimits = { sendTimeoutMs: 60_000, budgetBytes: HANDOVER_BUFFER_BYTES },
): HandOver {
  const agent = new http.Agent({ keepAlive: true, maxSockets: HANDOVER_SOCKETS, maxFreeSockets: HANDOVER_SOCKETS });
  const budget = new AnswerBudget(limits.budgetBytes);
  const hand = (req: IncomingMessage, res: ServerResponse, body: Buffer | null, refused?: BodyRefusalKind) => {
    const headers: http.OutgoingHttpHeaders = { ...req.headers };
    // This edge already answered Expect (checkContinue); the connection's own headers stay on its hop.
    delete headers.expect;
    delete headers.connection;
    delete headers['keep-alive'];
    delete headers['transfer-encoding'];
    if (body === null) delete headers['content-length'];
    else headers['content-length'] = String(body.length);
    headers[HANDOVER_TOKEN] = internal.token;
    headers[HANDOVER_PEER] = req.socket.remoteAddress ?? '';
    if (refused === undefined) delete headers[HANDOVER_REFUSED];
    else headers[HANDOVER_REFUSED] = refused;
    const up = http.request(
      { host: '127.0.0.1', port: internal.port, method: req.method, path: req.url, headers, agent },
      (r) => {
        const out: http.OutgoingHttpHeaders = { ...r.headers };
        delete out.connection;
        delete out['keep-alive'];
        delete out['transfer-encoding'];
        res.writeHead(r.statusCode ?? 502, out);
        // Read at the control thread's speed while this edge's budget holds (the
        // connection goes back to the pool at once); past it, at the client's pace. A
        // client that reads nothing for send_timeout_ms is cut either way.
        relay({ from: r, to: res, budget, sendTimeoutMs: limits.sendTimeoutMs });
      },
    );
    up.on('error', (e) => {
      log.warn('a /v2 call could not reach the control thread', { err: e });
      if (res.headersSent) return void res.destroy();
      const msg = JSON.stringify(errorBody('service_unavailable', null, 'the gateway is stopping; try again', null));
      res.writeHead(503, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(msg) });
      res.end(msg);
    });
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    up.end(body ?? undefined);
  };
  return Object.assign(hand, { held: () => budget.held });
}
