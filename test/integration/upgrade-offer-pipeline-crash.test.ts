import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange } from '../helpers/raw.js';

/**
 * A regression test (found by an attack review, since fixed). What it was (upgrade-offer.ts): two keep-alive requests pipelined ahead of a declined
 * Upgrade offer, the second answered after the first. When the first answer finishes,
 * Node's server assigns the socket to the second answer (resOnFinish); serve() then
 * calls res.assignSocket on a socket that already has one: ERR_HTTP_SOCKET_ASSIGNED,
 * thrown from a process.nextTick callback (outside serve's try), an uncaught exception.
 */
const OFFER = 'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n';
const PIPELINE = `GET /open/a HTTP/1.1\r\nHost: x\r\n\r\nGET /open/b HTTP/1.1\r\nHost: x\r\n\r\nGET /open/c HTTP/1.1\r\nHost: x\r\n${OFFER}\r\n`;

describe('two keep-alive requests pipelined ahead of a declined offer (one unauthenticated connection)', () => {
  let origin: TestServer;
  let dir: string;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      // The second answer is still being made when the first is done.
      const delay = req.url === '/open/a' ? 100 : req.url === '/open/b' ? 600 : 0;
      setTimeout(() => res.end(`hello ${req.url}`), delay);
    });
    dir = mkdtempSync(join(tmpdir(), 'wakegate-review-offer-'));
  });
  afterAll(async () => {
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const threads of [1, 2]) {
    it(`threads: ${threads}: all three are answered in order and the gateway serves on`, async () => {
      const cfg = {
        server: { threads, drain_timeout_ms: 1000 },
        routes: [{ name: 'public', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      };
      writeFileSync(join(dir, `cfg${threads}.yaml`), JSON.stringify(cfg));
      const g: ChildGateway = await spawnGateway(['serve', '--config', join(dir, `cfg${threads}.yaml`)], {
        DATA_DIR: join(dir, `data${threads}`),
      });
      try {
        const other = rawExchange(
          g.port,
          'GET /open/slow-neighbour HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
          3000,
        );
        const r = await rawExchange(g.port, PIPELINE, 3000);
        const exited = await Promise.race([g.exited, new Promise((res) => setTimeout(() => res(null), 500))]);
        console.log({
          threads,
          exited,
          answers: r.text.match(/hello \/open\/./g),
          neighbour: (await other).text.slice(0, 15),
        });
        console.log(
          g
            .stderr()
            .split('\n')
            .filter((l) => /error|fail|ASSIGNED/i.test(l))
            .slice(0, 5)
            .join('\n'),
        );
        expect(exited).toBeNull();
        expect(g.stderr()).not.toContain('ERR_HTTP_SOCKET_ASSIGNED');
        expect(r.text.match(/hello \/open\/./g)).toEqual(['hello /open/a', 'hello /open/b', 'hello /open/c']);
      } finally {
        g.proc.kill('SIGKILL');
        await g.exited;
      }
    }, 60_000);
  }
});
