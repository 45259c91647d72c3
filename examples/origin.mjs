// An example origin for trying wakegate: answers every request with JSON naming
// itself and what it received. Usage: node examples/origin.mjs PORT [NAME]
import http from 'node:http';

const port = Number(process.argv[2] ?? 9001);
const name = process.argv[3] ?? `origin :${port}`;
http
  .createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.stringify({
        origin: name,
        method: req.method,
        path: req.url,
        consumer: req.headers['x-wakegate-consumer'] ?? null,
        environment: req.headers['x-wakegate-environment'] ?? null,
        received_bytes: Buffer.concat(chunks).length,
      });
      res.writeHead(req.url?.includes('fail') ? 500 : 200, { 'content-type': 'application/json' });
      // A line of JSON: a shell prompt after `curl` starts on a line of its own.
      res.end(`${body}\n`);
    });
  })
  .listen(port, '127.0.0.1', () => console.log(`${name} listening on http://127.0.0.1:${port}`));
