import type { IncomingMessage, ServerResponse } from 'node:http';
import { startServer, type TestServer } from './origin.js';

export interface Received {
  headers: IncomingMessage['headers'];
  body: string;
  at: number;
}

export interface Receiver extends TestServer {
  got: Received[];
  /** How to answer the next request; default 200. */
  answer: (req: IncomingMessage, res: ServerResponse, n: number) => void;
  waitFor: (n: number, timeoutMs?: number) => Promise<Received[]>;
}

/** A real webhook receiver on loopback that records every request. */
export async function startReceiver(clock: { now(): number } = Date): Promise<Receiver> {
  const got: Received[] = [];
  const r = {} as Receiver;
  const server = await startServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: clock.now() });
      r.answer(req, res, got.length);
    });
  });
  Object.assign(r, server, {
    got,
    answer: (_req: IncomingMessage, res: ServerResponse) => res.end('ok'),
    waitFor: async (n: number, timeoutMs = 5000) => {
      const deadline = Date.now() + timeoutMs;
      while (got.length < n) {
        if (Date.now() > deadline) throw new Error(`receiver got ${got.length} requests, expected ${n}`);
        await new Promise((res) => setTimeout(res, 10));
      }
      return got;
    },
  });
  return r;
}

export async function until(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
