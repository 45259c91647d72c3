import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TestServer {
  server: http.Server;
  url: string;
  port: number;
  close: () => Promise<void>;
}

/** A real HTTP server on 127.0.0.1 and an ephemeral port. */
export async function startServer(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<TestServer> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** An origin that answers every request with a JSON echo of what it received. */
export function echoOrigin(tag = 'origin'): Promise<TestServer> {
  return startServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.stringify({
        tag,
        method: req.method,
        url: req.url,
        rawHeaders: req.rawHeaders,
        bodyBytes: Buffer.concat(chunks).length,
      });
      res.writeHead(200, { 'content-type': 'application/json', 'x-origin': tag });
      res.end(body);
    });
  });
}

/** A port nothing listens on (bound, then closed). */
export async function deadPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}
