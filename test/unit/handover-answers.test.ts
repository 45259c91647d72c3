import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { cutWhenStalled } from '../../src/threads/answer-relay.js';
import { type HandOver, handOver } from '../../src/threads/handover.js';
import { closeBoth, edgeInFront } from '../helpers/edge-handover.js';

// Larger than a stalled loopback connection's kernel buffers take (the sender's up to
// tcp_wmem's 4 MiB here, and the receiver's): at 4 MiB a whole answer sometimes fit in
// them on a loaded run, the edge never held a byte, and the test's check that it did failed.
const ANSWER = 8 * 1_048_576;
const BUDGET = 1_048_576;
const SEND_TIMEOUT = 1_000;

/** Raw clients that ask for a large /v2 answer and never read a byte of it. */
function nonReaders(port: number, n: number): net.Socket[] {
  return Array.from({ length: n }, () => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.pause();
    s.write('GET /v2/wakes/big HTTP/1.1\r\nHost: x\r\n\r\n');
    return s;
  });
}

const until = async (ok: () => boolean | Promise<boolean>, ms: number) => {
  const end = performance.now() + ms;
  while (!(await ok())) {
    if (performance.now() > end) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
};

const connections = (s: http.Server) => new Promise<number>((r) => s.getConnections((_e, n) => r(n)));

/**
 * /v2 answers relayed by an edge thread to clients that never read them: the edge
 * holds at most its budget (then the handover socket waits), and a client that takes
 * nothing for send_timeout_ms is cut, giving back what the edge held for it.
 */
describe('handover answers to clients that never read', () => {
  let internal: http.Server;
  let edge: http.Server;
  let hand: HandOver;
  let edgePort: number;
  const big = Buffer.alloc(ANSWER, 0x61);

  beforeAll(async () => {
    internal = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      // Written in pieces, as a large wake detail is streamed.
      for (let i = 0; i < ANSWER; i += 65_536) res.write(big.subarray(i, i + 65_536));
      res.end();
    });
    await new Promise<void>((r) => internal.listen(0, '127.0.0.1', r));
    hand = handOver({ port: (internal.address() as AddressInfo).port, token: 't' }, silentLogger, {
      sendTimeoutMs: SEND_TIMEOUT,
      budgetBytes: BUDGET,
    });
    ({ edge, port: edgePort } = await edgeInFront(hand));
  });
  afterAll(() => closeBoth(edge, internal));

  it('20 non-readers of 4 MiB answers: the edge holds at most its budget, and all are cut after send_timeout_ms', async () => {
    // Counted as the edge accepts them: on a loaded run the first were already cut
    // (send_timeout_ms) before the last connected, so the 20 were never open at once.
    let accepted = 0;
    const count = () => {
      accepted++;
    };
    edge.on('connection', count);
    const clients = nonReaders(edgePort, 20);
    let peak = 0;
    const sampler = setInterval(() => {
      peak = Math.max(peak, hand.held());
    }, 5);
    expect(await until(() => accepted === 20, 5000)).toBe(true);
    edge.off('connection', count);
    // Until they are cut the edge holds no more than its budget and one piece per answer.
    expect(await until(async () => (await connections(edge)) === 0, SEND_TIMEOUT * 2 + 10_000)).toBe(true);
    clearInterval(sampler);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(BUDGET + 20 * 65_536 * 2);
    // Every byte is given back once the handover sockets close, which may come a moment
    // after the client connections (4 answers' bytes were still held on a loaded run).
    expect(await until(() => hand.held() === 0, 5000), `${hand.held()} bytes held`).toBe(true);
    for (const c of clients) c.destroy();
    // The handover sockets were let go: a reader gets its whole answer.
    const r = await fetch(`http://127.0.0.1:${edgePort}/v2/wakes/big`, { signal: AbortSignal.timeout(5000) });
    expect((await r.arrayBuffer()).byteLength).toBe(ANSWER);
  });

  it('a slow reader that keeps taking bytes is not cut', async () => {
    // Its own edge with a send timeout 25 reader periods long: the rule under test is that
    // taking bytes at all keeps a client, so a loaded host that delays one read by a few
    // hundred milliseconds (a 400 ms timeout cut this reader at 3.8 of 4 MiB on a CI run)
    // must not decide it.
    const slowTimeout = 2_500;
    const period = slowTimeout / 25;
    const slowHand = handOver({ port: (internal.address() as AddressInfo).port, token: 't' }, silentLogger, {
      sendTimeoutMs: slowTimeout,
      budgetBytes: BUDGET,
    });
    const front = await edgeInFront(slowHand);
    const s = net.connect(front.port, '127.0.0.1');
    s.on('error', () => {});
    s.pause();
    s.write('GET /v2/wakes/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    let got = 0;
    // Reads a little every period: slower than the answer comes, never stalled.
    const reader = setInterval(() => {
      const c: Buffer | null = s.read(262_144) ?? s.read();
      if (c) got += c.length;
    }, period);
    const ended = await new Promise<boolean>((r) => {
      s.on('end', () => r(true));
      s.on('close', () => r(true));
      setTimeout(() => r(false), 30_000);
      s.on('readable', () => {});
    });
    clearInterval(reader);
    for (let c = s.read(); c; c = s.read()) got += (c as Buffer).length;
    front.edge.closeAllConnections();
    await new Promise((r) => front.edge.close(r));
    expect(ended).toBe(true);
    expect(got).toBeGreaterThan(ANSWER);
  });
});

describe('answers written whole (threads: 1)', () => {
  it('cutWhenStalled cuts a client that takes nothing, and leaves one that reads', async () => {
    const big = Buffer.alloc(ANSWER, 0x62);
    const server = http.createServer((_req, res) => {
      cutWhenStalled(res, SEND_TIMEOUT);
      res.end(big);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    nonReaders(port, 5);
    expect(await until(async () => (await connections(server)) === 5, 5000)).toBe(true);
    expect(await until(async () => (await connections(server)) === 0, SEND_TIMEOUT * 2 + 10_000)).toBe(true);
    const r = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(5000) });
    expect((await r.arrayBuffer()).byteLength).toBe(ANSWER);
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
});
