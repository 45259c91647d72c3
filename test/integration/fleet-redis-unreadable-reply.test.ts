import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator } from '../../src/fleet/redis.js';
import { createLogger } from '../../src/log.js';
import { createMetrics, registerCoordination } from '../../src/metrics/index.js';

/**
 * A reply the Redis client cannot read (from a review of the fleet: a 512 MB value is
 * one too long for a JavaScript string; here, cheaper, a reply of a type RESP does not
 * have) left the connection 'ready' with its replies no longer lined up with its
 * commands: the call never answered, and each later call got the reply of the one
 * before it. A server on loopback that speaks enough RESP stands in for Redis, as the
 * reply is what is tested. The test failed first.
 */

/** The commands of a RESP stream, each as its words (arrays of bulk strings, as clients send). */
function commands(buf: { b: Buffer }): string[][] {
  const out: string[][] = [];
  for (;;) {
    const s = buf.b.toString('latin1');
    const m = /^\*(\d+)\r\n/.exec(s);
    if (!m) return out;
    let at = m[0].length;
    const words: string[] = [];
    for (let i = 0; i < Number(m[1]); i++) {
      const l = /^\$(\d+)\r\n/.exec(s.slice(at));
      if (!l) return out;
      const start = at + l[0].length;
      if (s.length < start + Number(l[1]) + 2) return out;
      words.push(s.slice(start, start + Number(l[1])));
      at = start + Number(l[1]) + 2;
    }
    out.push(words);
    buf.b = buf.b.subarray(at);
  }
}

describe('a reply the Redis client cannot read', () => {
  let server: Server;
  let port = 0;
  let connections = 0;
  beforeAll(async () => {
    server = createServer((s: Socket) => {
      connections++;
      const buf = { b: Buffer.alloc(0) };
      s.on('data', (d) => {
        buf.b = Buffer.concat([buf.b, d]);
        for (const [name, arg] of commands(buf)) {
          if (name === 'GET' && arg === 'wakegate:poison') s.write('?not a reply\r\n');
          else if (name === 'GET') s.write(`$${(arg ?? '').length}\r\n${arg}\r\n`);
          else s.write('+OK\r\n');
        }
      });
      s.on('error', () => {});
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('fails that call, and the connection is made again: later calls get their own replies', async () => {
    const metrics = createMetrics({ process: false });
    registerCoordination(metrics);
    const co = new Coordinator({
      url: `redis://127.0.0.1:${port}`,
      timeoutMs: 500,
      log: createLogger('silent'),
      metrics,
    });
    await co.start();
    try {
      expect(co.ready).toBe(true);
      expect(await co.command(['GET', 'a'], 'test')).toBe('wakegate:a');
      const before = connections;
      await expect(co.command(['GET', 'poison'], 'test')).rejects.toThrow();
      // Connected again within a second, and each reply is its own call's.
      const t0 = Date.now();
      while (!co.ready && Date.now() - t0 < 3000) await new Promise((r) => setTimeout(r, 20));
      expect(co.ready).toBe(true);
      expect(connections).toBe(before + 1);
      expect(await co.command(['GET', 'b'], 'test')).toBe('wakegate:b');
      expect(await co.command(['GET', 'c'], 'test')).toBe('wakegate:c');
    } finally {
      await co.close();
    }
  }, 20_000);
});
