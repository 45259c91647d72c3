// Regression tests from a review of capture and redaction (2026-11-28).
import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { queryRows } from '../../src/store/store.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * DESIGN: a gateway key never reaches storage "in any spelling that the receiving
 * application would decode: … a content coding (gzip, deflate, br, zstd, nested)";
 * `opaque_bodies: keep` keeps binary bodies with "gateway keys still replaced".
 * A body whose codings are sent as two Content-Encoding field lines (gzip, then gzip:
 * one list, RFC 9110 §5.3) is decoded once by the redactor, which reads only the first
 * line, and the still-compressed result is kept as it came.
 */
describe('nested coding over two Content-Encoding lines', () => {
  let origin: TestServer;
  let t: TestGateway;
  const key = `svc_live_${newSecret()}`;
  const twice = gzipSync(gzipSync(Buffer.from(JSON.stringify({ note: key, password: 'hunter2-twice' }))));

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, [
          'content-type',
          'application/json',
          'content-encoding',
          'gzip',
          'content-encoding',
          'gzip',
          'content-length',
          String(twice.length),
        ]);
        res.end(twice);
      });
    });
    t = await startGateway({
      routes: [
        {
          name: 'keep',
          prefix: '/keep',
          auth: 'none',
          origins: { production: origin.url },
          capture: { detail: { opaque_bodies: 'keep' } },
        },
      ],
    });
  }, 20_000);
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('a response gzipped twice (two Content-Encoding lines) holding a gateway key and a password: neither is stored', async () => {
    // The client reads both codings (RFC 9110: the lines are one list).
    const id = await new Promise<string>((resolve, reject) => {
      const s = net.connect(Number(new URL(t.url).port), '127.0.0.1', () =>
        s.write('GET /keep/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'),
      );
      let got = '';
      s.on('data', (c) => {
        got += c.toString('latin1');
      });
      s.on('end', () => resolve(/x-wake-id: (\S+)/i.exec(got)?.[1] ?? ''));
      s.on('error', reject);
    });
    expect(id).toMatch(/^wk_/);
    await flushed(t.gw);
    const w = await (await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) })).json();
    expect(w.response).not.toBeNull();
    const rows = JSON.stringify(await queryRows(t.gw.store, `SELECT * FROM ${t.gw.store.db}.wake_details`));
    const { gunzipSync } = await import('node:zlib');
    let kept = '';
    if (w.response.body_encoding === 'base64') {
      let b = Buffer.from(w.response.body, 'base64');
      for (let i = 0; i < 3; i++) {
        try {
          b = gunzipSync(b);
        } catch {
          break;
        }
      }
      kept = b.toString('latin1');
    }
    expect(kept).not.toContain(key);
    expect(kept).not.toContain('hunter2-twice');
    expect(rows).not.toContain(key);
  });
});
