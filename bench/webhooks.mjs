#!/usr/bin/env node
import { mkdtempSync, rmSync } from 'node:fs';
// bench:webhooks — signed deliveries a second to loopback receivers through the real
// pipeline (events table -> fan-out -> persisted deliveries -> signed POSTs), and
// enqueue-to-2xx latency p50/p99.
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, table } from './lib.mjs';

const { Gateway } = await import(join(ROOT, 'dist/app.js'));
const { loadConfig } = await import(join(ROOT, 'dist/config/index.js'));
const { silentLogger } = await import(join(ROOT, 'dist/log.js'));

const EVENTS = Number(process.env.BENCH_EVENTS ?? 5000);
const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS ?? 4);
const dir = mkdtempSync(join(tmpdir(), 'wakegate-wh-'));
const cfg = loadConfig({
  values: {
    server: { port: 0, host: '127.0.0.1', ops_port: 0 },
    log: { level: 'warn' },
    webhooks: { allow_insecure_http: true, allow_private_networks: true },
  },
  env: { DATA_DIR: dir },
});
const gw = new Gateway(cfg, { log: silentLogger });
const emitted = new Map();
const latencies = [];
let received = 0;
let lastAt = 0;
const receivers = [];
try {
  await gw.init();
  for (let i = 0; i < ENDPOINTS; i++) {
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const t = performance.now();
        const id = req.headers['x-service-event-id'];
        latencies.push(t - emitted.get(id));
        received++;
        lastAt = t;
        res.writeHead(204);
        res.end();
      });
    });
    server.keepAliveTimeout = 60_000;
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    receivers.push(server);
    await gw.endpoints.create({ url: `http://127.0.0.1:${server.address().port}/hook`, events: ['*'] }, 'production');
  }
  await gw.start();
  const total = EVENTS * ENDPOINTS;
  const t0 = performance.now();
  for (let i = 0; i < EVENTS; i++) {
    const ev = gw.events.emit('wake.error', 'production', { wake: { id: `wk_bench${i}`, status: 503 } });
    emitted.set(ev.id, performance.now());
    if (i % 500 === 0) await new Promise((r) => setImmediate(r));
  }
  const deadline = Date.now() + 120_000;
  while (received < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  const secs = (lastAt - t0) / 1000;
  await gw.dispatcher.idle();
  const page = await gw.deliveries.list({ environment: 'production', status: 'delivered' }, 1, null);
  latencies.sort((a, b) => a - b);
  const p = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  const rate = received / secs;
  console.log(
    `\nbench:webhooks — ${EVENTS} events x ${ENDPOINTS} endpoints = ${total} signed deliveries to loopback receivers in this process\n`,
  );
  console.log(
    table(
      ['measure', 'value', 'budget', 'met'],
      [
        ['deliveries received', `${received} / ${total}`, 'all', received === total ? 'yes' : 'NO'],
        ['deliveries/s', Math.round(rate).toLocaleString('en-US'), '>= 2,000', rate >= 2000 ? 'yes' : 'NO'],
        ['enqueue-to-2xx p50 ms', p(0.5).toFixed(0), '', ''],
        ['enqueue-to-2xx p99 ms', p(0.99).toFixed(0), '', ''],
        ['stored as delivered', page.rows.length ? 'yes' : 'no', '', ''],
      ],
    ),
  );
} finally {
  await gw.stop();
  for (const s of receivers) {
    s.closeAllConnections();
    s.close();
  }
  rmSync(dir, { recursive: true, force: true });
}
