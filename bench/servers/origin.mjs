// The benchmark origin: a plain Node http server answering 1 KB of JSON (BODY_BYTES to change it).
import http from 'node:http';

const body = JSON.stringify({ data: 'x'.repeat(Number(process.env.BODY_BYTES ?? 1000) - 12) });
const server = http.createServer((req, res) => {
  req.resume();
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.send?.('ready'));
