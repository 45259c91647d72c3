import type { IncomingMessage } from 'node:http';
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { h2once } from '../helpers/h2.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange, statusOf } from '../helpers/raw.js';

/**
 * A review's item: the gateway drops a client's `x-wakegate-consumer` and sets its own,
 * but `X_Wakegate_Consumer: admin` passed. nginx (underscores_in_headers on), CGI and
 * PHP (HTTP_X_WAKEGATE_CONSUMER), Django, Rack/Rails and others read `_` as `-`, so the
 * origin read the client's forged identity (or address, with `x_forwarded_for`). Each
 * request here goes through the real listener to a real origin, which reads its fields
 * as such a framework does.
 */

/** The fields as CGI, PHP, Django or Rack hand them to an app: HTTP_ + upper case, `-` as `_`; the first of each wins. */
function cgiEnv(raw: string[]): Map<string, string> {
  const env = new Map<string, string>();
  for (let i = 0; i < raw.length; i += 2) {
    const k = `HTTP_${(raw[i] as string).toUpperCase().replace(/-/g, '_')}`;
    if (!env.has(k)) env.set(k, raw[i + 1] as string);
  }
  return env;
}

/** A field name as a folding origin reads it. */
const folded = (name: string): string => name.toLowerCase().replace(/_/g, '-');

/** The names the gateway sets (or drops for trust) at the origin: no client may send any spelling of them. */
const gatewaySet = (name: string): boolean => {
  const f = folded(name);
  return f.startsWith('x-wakegate-') || f.startsWith('x-forwarded-') || f === 'forwarded';
};

const FORGED: [string, string][] = [
  ['X_Wakegate_Consumer', 'admin'],
  ['x_wakegate_key_id', 'key_forged'],
  ['X-Wakegate_Environment', 'production'],
  ['x_wakegate-replayed-by', 'key_forged'],
  ['X_Forwarded_For', '6.6.6.6'],
  ['x_forwarded_proto', 'https'],
  ['X_FORWARDED_HOST', 'evil.example'],
];

describe('underscore spellings of the identity and forwarding fields never reach an origin', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  let key: { id: string; secret: string; consumer: string };
  const seen: { url: string; raw: string[] }[] = [];
  const upgrades: string[][] = [];

  const lastAt = (url: string) => {
    const s = seen.findLast((x) => x.url === url);
    expect(s, url).toBeDefined();
    return (s as { raw: string[] }).raw;
  };

  /** No field the origin got folds to a gateway-set name unless it is the gateway's own spelling. */
  const onlyGatewayOwn = (raw: string[], what: string) => {
    const names = raw.filter((_, i) => i % 2 === 0);
    expect(
      names.filter((n) => gatewaySet(n) && n.includes('_')),
      what,
    ).toEqual([]);
    expect(raw.join('\n'), what).not.toMatch(/admin|key_forged|6\.6\.6\.6|evil\.example|https/);
  };

  beforeAll(async () => {
    origin = await startServer((req: IncomingMessage, res) => {
      seen.push({ url: req.url ?? '', raw: req.rawHeaders });
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    origin.server.on('upgrade', (req: IncomingMessage, socket: net.Socket) => {
      upgrades.push(req.rawHeaders);
      socket.on('error', () => {});
      socket.end('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    });
    t = await startGateway({
      server: { http2: 'h2c' },
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } },
        {
          name: 'pay',
          prefix: '/pay',
          scopes: { read: 'payments:read', write: 'payments:write' },
          origins: { production: origin.url },
        },
      ],
    });
    port = Number(new URL(t.url).port);
    const r = await fetch(`${t.url}/v2/api-keys`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'billing', environment: 'production', scopes: ['payments:read'] }),
    });
    key = (await r.json()) as typeof key;
    expect(r.status).toBe(201);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('HTTP/1.1: a keyed request is seen by a folding origin as its key, never as the forged identity', async () => {
    const lines = FORGED.map(([k, v]) => `${k}: ${v}\r\n`).join('');
    const r = await rawExchange(
      port,
      `GET /pay/who HTTP/1.1\r\nHost: x\r\n${lines}Authorization: Bearer ${key.secret}\r\nConnection: close\r\n\r\n`,
    );
    expect(statusOf(r.text), r.text).toBe(200);
    const raw = lastAt('/pay/who');
    onlyGatewayOwn(raw, 'keyed, HTTP/1.1');
    const env = cgiEnv(raw);
    expect(env.get('HTTP_X_WAKEGATE_CONSUMER')).toBe(key.consumer);
    expect(env.get('HTTP_X_WAKEGATE_KEY_ID')).toBe(key.id);
    expect(env.get('HTTP_X_WAKEGATE_ENVIRONMENT')).toBe('production');
    expect(env.get('HTTP_X_FORWARDED_FOR')).toBe('127.0.0.1');
    expect(env.get('HTTP_X_FORWARDED_PROTO')).toBe('http');
  });

  it('HTTP/1.1: a keyless request carries no identity at all, in any spelling', async () => {
    const lines = FORGED.map(([k, v]) => `${k}: ${v}\r\n`).join('');
    const r = await rawExchange(port, `GET /open/who HTTP/1.1\r\nHost: x\r\n${lines}Connection: close\r\n\r\n`);
    expect(statusOf(r.text), r.text).toBe(200);
    const raw = lastAt('/open/who');
    onlyGatewayOwn(raw, 'keyless, HTTP/1.1');
    const env = cgiEnv(raw);
    expect(env.has('HTTP_X_WAKEGATE_CONSUMER')).toBe(false);
    expect(env.get('HTTP_X_FORWARDED_FOR')).toBe('127.0.0.1');
  });

  it('HTTP/2: the same fields on a stream are dropped alike', async () => {
    const fields = Object.fromEntries(FORGED.map(([k, v]) => [k.toLowerCase(), v]));
    const r = await h2once(t.url, { ':path': '/pay/h2who', ...fields, authorization: `Bearer ${key.secret}` });
    expect(r.status, r.text).toBe(200);
    const raw = lastAt('/pay/h2who');
    onlyGatewayOwn(raw, 'keyed, h2');
    expect(cgiEnv(raw).get('HTTP_X_WAKEGATE_CONSUMER')).toBe(key.consumer);
  });

  it('an upgrade request (a tunnel) is dropped alike', async () => {
    upgrades.length = 0;
    const lines = FORGED.map(([k, v]) => `${k}: ${v}\r\n`).join('');
    const r = await rawExchange(
      port,
      `GET /pay/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${lines}Authorization: Bearer ${key.secret}\r\n\r\n`,
      1500,
    );
    expect(statusOf(r.text), r.text).toBe(101);
    expect(upgrades).toHaveLength(1);
    const raw = upgrades[0] as string[];
    onlyGatewayOwn(raw, 'upgrade');
    expect(cgiEnv(raw).get('HTTP_X_WAKEGATE_CONSUMER')).toBe(key.consumer);
  });

  it('fields with an underscore the gateway does not own pass as sent', async () => {
    const r = await rawExchange(
      port,
      'GET /open/own HTTP/1.1\r\nHost: x\r\nX_Request_Id: r-1\r\nx_wakegatex: 1\r\nx_forwarded: 2\r\nConnection: close\r\n\r\n',
    );
    expect(statusOf(r.text), r.text).toBe(200);
    const raw = lastAt('/open/own');
    expect(raw).toEqual(expect.arrayContaining(['X_Request_Id', 'r-1', 'x_wakegatex', '1', 'x_forwarded', '2']));
  });
});
