import type http from 'node:http';
import type { Config } from './config/index.js';
import { errorBody } from './errors.js';
import { gatewayServer } from './http-server.js';

export interface OpsDeps {
  /** The limits every listener holds to (server.*: head size and time, request time, keep-alive). */
  server: Config['server'];
  /** The text of a scrape: every thread's series, merged. */
  scrape: () => Promise<string>;
  contentType: string;
  /** Readiness: whether the gateway can serve, and what to say about it. */
  ready: () => Promise<{ ok: boolean; body: Record<string, unknown> }>;
  /** Every other path (the console and /v2, when they share this listener); null: 404. */
  other?: ((req: http.IncomingMessage, res: http.ServerResponse) => void) | null;
}

/** The ops listener: /metrics, /healthz, /readyz (and, by default, the console and /v2 through `other`). */
export function createOpsServer(d: OpsDeps): http.Server {
  return gatewayServer(d.server, (req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const known = path === '/healthz' || path === '/readyz' || path === '/metrics';
    if (d.other && !known) return d.other(req, res);
    const json = (status: number, body: unknown) => {
      const s = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s) });
      res.end(s);
    };
    if (!known) return json(404, errorBody('resource_missing', null, `no such endpoint: ${path}`));
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      // As /v2 answers a method an endpoint does not take (RFC 9110 §15.5.6: with Allow).
      res.setHeader('allow', 'GET, HEAD');
      return json(
        405,
        errorBody('invalid_request', null, `${req.method} is not allowed here; use GET, HEAD`, 'method'),
      );
    }
    if (path === '/healthz') return json(200, { status: 'ok' });
    if (path === '/readyz') {
      d.ready().then(
        (r) => json(r.ok ? 200 : 503, r.body),
        (e: Error) => json(503, { status: 'not ready', error: e.message }),
      );
      return;
    }
    if (path === '/metrics') {
      d.scrape().then(
        (text) => {
          res.writeHead(200, { 'content-type': d.contentType });
          res.end(text);
        },
        () => json(500, { status: 'metrics failed' }),
      );
      return;
    }
  });
}
