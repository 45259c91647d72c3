// An OTLP/HTTP collector stand-in for the benches: takes each export whole, answers
// 200 with an empty body, and counts requests and bytes (GET / returns them). It does
// not decode (the tests decode with OpenTelemetry's definitions); in a process of its
// own, so its work never slows the bench's load generator. PORT.
import http from 'node:http';

let requests = 0;
let bytes = 0;
const server = http.createServer((req, res) => {
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ requests, bytes }));
    return;
  }
  req.on('data', (c) => {
    bytes += c.length;
  });
  req.on('end', () => {
    requests++;
    res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
  });
});
server.listen(Number(process.env.PORT), '127.0.0.1');
