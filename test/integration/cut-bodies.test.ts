import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * A body that ended short of what its sender declared (a client gone mid-body, an
 * origin broken off mid-answer) is stored marked cut, as one cut at max_body_bytes is:
 * a replay must not re-send it as if it were whole, and a gateway key cut at its end
 * is scrubbed as a cut body's is.
 */
describe('bodies that ended short are stored as cut', () => {
  let origin: TestServer;
  let t: TestGateway;
  const KEY_HEAD = `svc_live_${'Qz7'.repeat(6)}`;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      if (req.url?.startsWith('/open/short-answer')) {
        // Declares 100 bytes, sends 40, then breaks off.
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100' });
        res.write(`partial answer ${KEY_HEAD}`.slice(0, 40));
        setTimeout(() => res.socket?.destroy(), 20);
        return;
      }
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('ok');
      });
    });
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  }, 60_000);
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
  });

  const wakeOf = async (id: string) => {
    await flushed(t.gw);
    const w = await call(t.url, t.admin, 'GET', `/v2/wakes/${id}`);
    expect(w.status).toBe(200);
    return w.body as {
      status: number;
      request: { body: string | null; body_truncated: boolean };
      response: { body: string | null; body_truncated: boolean };
    };
  };

  it('a request body its client abandoned mid-way (499)', async () => {
    const port = Number(new URL(t.url).port);
    const sent = `plain text then ${KEY_HEAD}`;
    const s = net.connect(port, '127.0.0.1');
    await new Promise<void>((r) => s.once('connect', () => r()));
    s.write(`POST /open/upload HTTP/1.1\r\nhost: x\r\ncontent-type: text/plain\r\ncontent-length: 400\r\n\r\n${sent}`);
    // The gateway has read the part sent once its exchange is open; then the client goes.
    await new Promise((r) => setTimeout(r, 100));
    s.destroy();
    let id: string | undefined;
    for (let i = 0; i < 100 && id === undefined; i++) {
      await flushed(t.gw);
      const page = await call(t.url, t.admin, 'GET', '/v2/wakes?route=open&status=499&limit=1');
      const top = page.body.data[0] as { id: string } | undefined;
      if (top !== undefined) id = top.id;
      else await new Promise((r) => setTimeout(r, 20));
    }
    expect(id).toBeDefined();
    const w = await wakeOf(id as string);
    expect(w.status).toBe(499);
    expect(w.request.body_truncated).toBe(true);
    expect(w.request.body ?? '').toContain('plain text then');
    // The key's beginning, cut where the client stopped, is scrubbed as a cut body's end is.
    expect(w.request.body ?? '').not.toContain('Qz7Qz7Qz7');
    // Nor is it re-sent as if it were whole.
    const replay = await call(t.url, t.admin, 'POST', `/v2/wakes/${id}/replay`, { allow_unsafe: true });
    expect(replay.status).toBe(409);
    expect(replay.body.error.type).toBe('conflict');
  });

  it('an answer its origin broke off mid-way (502 after its headers)', async () => {
    const r = await fetch(`${t.url}/open/short-answer`).catch(() => null);
    // The client sees its answer cut off; the wake id came with the headers.
    const id = r?.headers.get('x-wake-id') as string;
    await r?.arrayBuffer().catch(() => null);
    expect(id).toBeTruthy();
    let w = await wakeOf(id);
    for (let i = 0; i < 50 && w.status === 0; i++) w = await wakeOf(id);
    expect(w.status).toBe(502);
    expect(w.response.body_truncated).toBe(true);
    expect(w.response.body ?? '').not.toContain('Qz7Qz7');
  });
});
