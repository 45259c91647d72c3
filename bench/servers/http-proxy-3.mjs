// Bare http-proxy-3 with a keep-alive agent: the Node proxy baseline.
import http from 'node:http';
import { createProxyServer } from 'http-proxy-3';

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
const proxy = createProxyServer({ target: process.env.TARGET, agent });
proxy.on('error', (_e, _req, res) => {
  res.writeHead?.(502);
  res.end?.();
});
const server = http.createServer((req, res) => proxy.web(req, res));
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.send?.('ready'));
