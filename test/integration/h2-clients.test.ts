import { execFile } from 'node:child_process';
import http2 from 'node:http2';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { F, frame, hpack, RawH2, request, rstStream } from '../helpers/h2-frames.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const run = promisify(execFile);

/** Issue #37: HTTP/2 with clients nobody here wrote (curl, h2load), and a rapid-reset attack beside them. */
describe('HTTP/2 (h2c) with curl and h2load', () => {
  let origin: TestServer;
  let t: TestGateway;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => res.end(`${req.method} ${req.url} ${Buffer.concat(chunks).length}`));
    });
    t = await startGateway({
      server: { http2: 'h2c' },
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('curl --http2-prior-knowledge: GET and POST over HTTP/2', async () => {
    const get = await run('curl', [
      '-sS',
      '--http2-prior-knowledge',
      '-w',
      '\n%{http_version} %{http_code}',
      `${t.url}/open/c?q=1`,
    ]);
    expect(get.stdout).toBe('GET /open/c?q=1 0\n2 200');
    const post = await run('curl', [
      '-sS',
      '--http2-prior-knowledge',
      '-w',
      '\n%{http_version} %{http_code}',
      '--data-binary',
      'x'.repeat(100_000),
      `${t.url}/open/p`,
    ]);
    expect(post.stdout).toBe('POST /open/p 100000\n2 200');
  });

  it('curl on /v2 over HTTP/2 is told HTTP_1_1_REQUIRED and retries on HTTP/1.1', async () => {
    const r = await run('curl', [
      '-sS',
      '--http2-prior-knowledge',
      '-w',
      '\n%{http_version} %{http_code}',
      '-H',
      `authorization: ${bearer(t.admin).authorization}`,
      `${t.url}/v2/wakes?limit=1`,
    ]).catch((e: { stdout: string; stderr: string }) => e);
    expect(r.stdout).toMatch(/\n1\.1 200$/);
  });

  it('h2load: 400 requests, 4 connections of 10 streams each, all answered 2xx; the wakes say h2', async () => {
    const { stdout } = await run('h2load', ['-n', '400', '-c', '4', '-m', '10', `${t.url}/open/load`]);
    expect(stdout).toMatch(/requests: 400 total, 400 started, 400 done, 400 succeeded, 0 failed, 0 errored/);
    expect(stdout).toMatch(/status codes: 400 2xx/);
    await flushed(t.gw);
    const page = await (await fetch(`${t.url}/v2/wakes?limit=5&route=open`, { headers: bearer(t.admin) })).json();
    expect(page.data.length).toBeGreaterThan(0);
    for (const w of page.data) expect(w.protocol).toBe('h2');
  });

  it('a rapid-reset attack leaves h2load (beside it) fully served', async () => {
    const port = Number(new URL(t.url).port);
    /** One attacking session: HEADERS + RST_STREAM(CANCEL) pairs until the gateway sends GOAWAY and closes. */
    const attack = async (): Promise<number | null> => {
      const c = await RawH2.connect(port);
      let id = 1;
      for (let round = 0; round < 40 && !c.closed; round++) {
        const burst: Buffer[] = [];
        for (let i = 0; i < 25; i++, id += 2) {
          burst.push(frame(1, F.END_STREAM | F.END_HEADERS, id, hpack(request('/open/r'))));
          burst.push(rstStream(id, http2.constants.NGHTTP2_CANCEL));
        }
        c.write(Buffer.concat(burst));
        await new Promise((r) => setTimeout(r, 5));
      }
      await c.closedWithin(5000);
      c.destroy();
      return c.goawayCode();
    };
    const load = run('h2load', ['-n', '1000', '-c', '2', '-m', '10', `${t.url}/open/load`]);
    const codes: (number | null)[] = [];
    for (let i = 0; i < 3; i++) codes.push(await attack());
    const { stdout } = await load;
    expect(stdout).toMatch(/1000 succeeded, 0 failed, 0 errored/);
    expect(codes).toEqual(Array(3).fill(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM));
  }, 60_000);
});
