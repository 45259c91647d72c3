// The bare undici proxy core wakegate is built on: node:http server + undici
// Pool.dispatch, streaming both ways, no features. The floor wakegate is measured against.
import http from 'node:http';
import { Pool } from 'undici';

const target = new URL(process.env.TARGET);
const pool = new Pool(target.origin, { connections: 512, pipelining: 1, keepAliveTimeout: 4_000 });
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'proxy-connection']);
const server = http.createServer((req, res) => {
  const headers = [];
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) if (!HOP.has(raw[i].toLowerCase())) headers.push(raw[i], raw[i + 1]);
  const bodyless = req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined;
  pool.dispatch(
    { path: req.url, method: req.method, headers, body: bodyless ? null : req },
    {
      onConnect() {},
      onHeaders(status, rawHeaders, resume) {
        const h = [];
        for (let i = 0; i < rawHeaders.length; i += 2) {
          const k = rawHeaders[i].toString('latin1');
          if (!HOP.has(k.toLowerCase())) h.push(k, rawHeaders[i + 1].toString('latin1'));
        }
        res.writeHead(status, h);
        res.on('drain', resume);
        return true;
      },
      onData(chunk) {
        return res.write(chunk);
      },
      onComplete() {
        res.end();
      },
      onError() {
        if (!res.headersSent) res.writeHead(502);
        res.end();
      },
    },
  );
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.send?.('ready'));
