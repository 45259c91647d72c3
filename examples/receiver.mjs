// An example webhook receiver that verifies every delivery before trusting it.
// Usage: WEBHOOK_SECRET=whsec_... node examples/receiver.mjs PORT
// From a checkout, `wakegate/verify` resolves to this package itself (Node's package
// self-reference); in your own project, install wakegate (or copy dist/verify.js).
import http from 'node:http';
import { verifySignature } from 'wakegate/verify';

const port = Number(process.argv[2] ?? 4000);
const secret = process.env.WEBHOOK_SECRET;
if (!secret) throw new Error('set WEBHOOK_SECRET to the endpoint signing secret (whsec_...)');
http
  .createServer((req, res) => {
    if (req.method !== 'POST') return res.end('receiver ready');
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      // The signature covers the raw body: verify before parsing.
      if (!verifySignature(raw, String(req.headers['x-service-signature'] ?? ''), secret)) {
        console.log('refused: bad signature');
        res.writeHead(400);
        return res.end('bad signature');
      }
      const event = JSON.parse(raw.toString('utf8'));
      console.log(`verified ${event.type} ${event.id} (attempt ${req.headers['x-service-attempt']})`);
      res.end('ok');
    });
  })
  .listen(port, '127.0.0.1', () => console.log(`receiver listening on http://127.0.0.1:${port}/hooks`));
