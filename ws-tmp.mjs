import http from 'node:http';
import net from 'node:net';
import { WebSocketServer } from 'ws';

const s = http.createServer();
const wss = new WebSocketServer({ server: s });
wss.on('connection', (ws) => ws.on('message', (m) => ws.send(m)));
s.listen(0, () => {
  const port = s.address().port;
  const r = http.request({
    method: 'GET',
    path: '/x',
    headers: [
      'Host',
      'h',
      'Sec-WebSocket-Key',
      'dGhlIHNhbXBsZSBub25jZQ==',
      'Sec-WebSocket-Version',
      '13',
      'Connection',
      'upgrade',
      'Upgrade',
      'websocket',
    ],
    agent: false,
    createConnection: () => net.connect({ host: '127.0.0.1', port, allowHalfOpen: true }),
    timeout: 1000,
  });
  r.on('upgrade', (res) => {
    console.log('upgrade', res.statusCode);
    process.exit(0);
  });
  r.on('response', (res) => console.log('response', res.statusCode));
  r.on('error', (e) => console.log('err', e));
  r.end();
});
