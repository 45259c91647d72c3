import type { IncomingMessage } from 'node:http';
import { Pool } from 'undici';
import type { Origin } from './routes.js';

/**
 * Keep-alive connection pools to origins, one per origin, on undici (measured
 * 1.7x the throughput of node:http's client with a keep-alive agent on this
 * gateway's hot path: bench/RESULTS.md).
 */
export class Upstreams {
  private readonly pools = new Map<string, Pool>();
  /** The pool of each origin object, so the hot path builds no key string. */
  private readonly byOrigin = new WeakMap<Origin, Pool>();

  pool(o: Origin): Pool {
    const known = this.byOrigin.get(o);
    if (known !== undefined && !known.destroyed) return known;
    const k = `${o.protocol}//${o.host}`;
    let p = this.pools.get(k);
    if (!p) {
      p = new Pool(`${o.protocol}//${o.host}`, {
        connections: 512,
        pipelining: 1,
        keepAliveTimeout: 4_000,
        keepAliveMaxTimeout: 60_000,
        connect: { timeout: 10_000 },
      });
      this.pools.set(k, p);
    }
    this.byOrigin.set(o, p);
    return p;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.destroy()));
    this.pools.clear();
  }
}

/** The request body as undici reads it; `seen` counts (and may copy the start of) each chunk as it passes. */
export async function* countedBody(req: IncomingMessage, seen: (chunk: Buffer) => void): AsyncGenerator<Buffer> {
  for await (const chunk of req) {
    seen(chunk as Buffer);
    yield chunk as Buffer;
  }
}
