import type http from 'node:http';
import type { Config } from './config/index.js';
import { errorBody } from './errors.js';
import { gatewayServer } from './http-server.js';

/**
 * The ops port while the gateway starts (storage opening, migrations, perhaps a wait on
 * another instance's migration lock): `/healthz` answers 200 (the process is alive) and
 * `/readyz` 503 `starting`, so a liveness probe never kills a start that is only slow;
 * every other path 503. Closed just before the ops listener itself takes the port. None
 * when the port is chosen at start (0: nobody knows it yet) or the ops listener speaks
 * TLS (`server.ops_tls`: a plain answer there would only fail the probe differently).
 */
export async function startProbe(cfg: Readonly<Config>): Promise<{ name: string; close: () => Promise<void> } | null> {
  const s = cfg.server;
  if (s.ops_port === 0 || s.ops_tls !== null) return null;
  const server = gatewayServer(s, (req: http.IncomingMessage, res: http.ServerResponse) => {
    const path = (req.url ?? '').split('?')[0];
    const alive = path === '/healthz';
    const body = JSON.stringify(
      alive
        ? { status: 'ok' }
        : path === '/readyz'
          ? { status: 'starting' }
          : errorBody('service_unavailable', null, 'the gateway is starting; retry shortly', null, 1),
    );
    res.shouldKeepAlive = false;
    res.writeHead(alive ? 200 : 503, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
      ...(alive ? {} : { 'retry-after': '1' }),
    });
    res.end(body);
  });
  const listening = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(s.ops_port, s.ops_host, () => resolve(true));
  });
  // Not free after all (checked a moment ago): the start says so when the ops listener itself tries.
  if (!listening) return null;
  let closed: Promise<void> | null = null;
  return {
    name: 'start-probe',
    close: () => {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
