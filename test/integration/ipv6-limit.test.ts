import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { GATEWAY } from '../helpers/child.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * Per-address buckets (keyless requests under `default`, refused keys under
 * `unauthenticated`) through the real listener. An IPv6 client owns at least a /64:
 * rotating its source address must not give it a fresh bucket per address.
 */

const LIMITS = {
  default: { limit: 5, burst: 5, window: 'minute' },
  unauthenticated: { limit: 3, burst: 3, window: 'minute' },
};

/** A GET from `localAddress` (the client's own address) to `host`:`port`; its status. */
function get(host: string, port: number, path: string, localAddress?: string, auth?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const r = http.request(
      {
        host,
        port,
        path,
        localAddress,
        headers: { connection: 'close', ...(auth ? { authorization: auth } : {}) },
        agent: false,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    r.on('error', reject);
    r.end();
  });
}

describe('per-address buckets over IPv6, on a dual-stack listener (::)', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    origin = await startServer((_req, res) => res.end('ok'));
    t = await startGateway({
      server: { host: '::' },
      routes: [
        { name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } },
        {
          name: 'keyed',
          prefix: '/keyed',
          scopes: { read: 'k:read', write: 'k:write' },
          origins: { production: origin.url },
        },
      ],
      rate_limits: LIMITS,
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('::1 draws from its /64 bucket; IPv4 clients (IPv4-mapped here) keep one bucket per address, never ::/64', async () => {
    const from6 = [];
    for (let i = 0; i < 6; i++) from6.push(await get('::1', port, '/open/x', '::1'));
    expect(from6).toEqual([200, 200, 200, 200, 200, 429]);
    // ::ffff:127.0.0.1 lies in ::/64, ::1's prefix: an IPv4 client is still its own address.
    expect(await get('127.0.0.1', port, '/open/x', '127.0.0.1')).toBe(200);
    expect(await get('127.0.0.1', port, '/open/x', '127.0.0.2')).toBe(200);
    const bad = `Bearer svc_live_${newSecret()}`;
    const refused = [];
    for (let i = 0; i < 4; i++) refused.push(await get('::1', port, '/keyed/x', '::1', bad));
    expect(refused).toEqual([401, 401, 401, 429]);
    expect(await get('127.0.0.1', port, '/keyed/x', '127.0.0.3', bad)).toBe(401);
  });
});

/** Addresses given to the loopback of a network namespace of the test's own: two in one /64, one in another. */
const SAME_64 = ['fd00:1:2:3::1', 'fd00:1:2:3::2', 'fd00:1:2:3:ffff::7', 'fd00:1:2:3:1234:5678:9abc:def0'];
const OTHER_64 = 'fd00:1:2:4::1';
const SETUP = ['ip link set lo up', ...[...SAME_64, OTHER_64].map((a) => `ip -6 addr add ${a}/64 dev lo nodad`)].join(
  ' && ',
);

/** Whether this machine lets an unprivileged test make a network namespace with IPv6 addresses of its own. */
const namespaces = (() => {
  if (process.platform !== 'linux') return false;
  const r = spawnSync('unshare', ['-rn', 'sh', '-c', SETUP], { stdio: 'ignore', timeout: 10_000 });
  return r.status === 0;
})();

/**
 * The client inside the namespace: an origin, then, once the gateway is ready, six
 * keyless requests and four with a refused key from one /64 (each from another of its
 * addresses), and one of each from another /64. Prints the statuses as JSON.
 */
const CLIENT = `
const http = require('node:http');
const get = (path, localAddress, auth) => new Promise((resolve, reject) => {
  const r = http.request({ host: '${SAME_64[0]}', port: 18080, path, localAddress, agent: false,
    headers: { connection: 'close', ...(auth ? { authorization: auth } : {}) } }, (res) => {
    res.resume();
    res.on('end', () => resolve(res.statusCode));
  });
  r.on('error', reject);
  r.end();
});
const same = ${JSON.stringify(SAME_64)};
const other = ${JSON.stringify(OTHER_64)};
const bad = 'Bearer svc_live_' + 'A'.repeat(40);
http.createServer((req, res) => {
  req.resume();
  req.on('end', () => res.end('ok'));
}).listen(19000, '127.0.0.1', async () => {
  const ready = () => new Promise((resolve) => {
    http.get({ host: '127.0.0.1', port: 18081, path: '/readyz', agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    }).on('error', () => resolve(false));
  });
  for (let i = 0; i < 600 && !(await ready()); i++) await new Promise((r) => setTimeout(r, 100));
  const out = { keyless: [], refused: [], otherKeyless: 0, otherRefused: 0 };
  // First (each takes one of the /64's 7 keyless tokens, leaving the burst of 5): bodies streamed past the buffer (max_streaming_uploads_per_client: 1): one per /64.
  const upload = (localAddress) => new Promise((resolve) => {
    const r = http.request({ host: same[0], port: 18080, path: '/up/x', method: 'POST', localAddress, agent: false,
      headers: { 'content-length': '100000' } }, (res) => {
      res.resume();
      resolve({ status: res.statusCode, r });
    });
    r.on('error', () => resolve({ status: 0, r }));
    r.write(Buffer.alloc(4096));
    // Still streaming (the origin waits for the rest): no answer yet.
    setTimeout(() => resolve({ status: 'streaming', r }), 1500);
  });
  const first = await upload(same[0]);
  const sameNet = await upload(same[1]);
  const otherNet = await upload(other);
  out.uploads = [first.status, sameNet.status, otherNet.status];
  for (const u of [first, sameNet, otherNet]) u.r.destroy();
  for (let i = 0; i < 6; i++) out.keyless.push(await get('/open/x', same[i % same.length]));
  for (let i = 0; i < 4; i++) out.refused.push(await get('/keyed/x', same[i % same.length], bad));
  out.otherKeyless = await get('/open/x', other);
  out.otherRefused = await get('/keyed/x', other, bad);

  console.log('RESULT ' + JSON.stringify(out));
  process.exit(0);
});
`;

describe.skipIf(!namespaces)(
  'per-address buckets of clients rotating through one IPv6 /64 (a network namespace)',
  () => {
    let dir: string;

    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'wakegate-ipv6-'));
      writeFileSync(
        join(dir, 'config.json'),
        JSON.stringify({
          routes: [
            { name: 'open', prefix: '/open', auth: 'none', origins: { production: 'http://127.0.0.1:19000' } },
            {
              name: 'keyed',
              prefix: '/keyed',
              scopes: { read: 'k:read', write: 'k:write' },
              origins: { production: 'http://127.0.0.1:19000' },
            },
            {
              name: 'up',
              prefix: '/up',
              auth: 'none',
              origins: { production: 'http://127.0.0.1:19000' },
            },
          ],
          // Two more than the burst the requests after the uploads meet (each upload takes one).
          rate_limits: { ...LIMITS, default: { limit: 7, burst: 7, window: 'minute' } },
          server: { threads: 1, buffer_request_body_bytes: 1024, max_streaming_uploads_per_client: 1 },
        }),
      );
      writeFileSync(join(dir, 'client.cjs'), CLIENT);
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('every address of the /64 draws from one bucket (429 past the burst) and one streaming upload; another /64 has its own', async () => {
      const q = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;
      const gateway = [process.execPath, ...GATEWAY, 'serve', '--config', join(dir, 'config.json')].map(q).join(' ');
      const client = `${q(process.execPath)} ${q(join(dir, 'client.cjs'))}`;
      const script = `${SETUP} || exit 1; ${gateway} 2>&1 & g=$!; ${client}; s=$?; kill $g; wait $g; exit $s`;
      const env = {
        PATH: process.env.PATH ?? '',
        DATA_DIR: join(dir, 'data'),
        WAKEGATE_ADMIN_KEY: `svc_live_${newSecret()}`,
        HOST: '::',
        PORT: '18080',
        OPS_PORT: '18081',
      };
      const out = await new Promise<string>((resolve, reject) => {
        // A process group of its own: a test that times out ends all it started, gateway included.
        const p = spawn('unshare', ['-rn', 'sh', '-c', script], {
          env,
          stdio: ['ignore', 'pipe', 'pipe'],
          detached: true,
        });
        let text = '';
        p.stdout.on('data', (c) => {
          text += c;
        });
        p.stderr.on('data', (c) => {
          text += c;
        });
        const timer = setTimeout(() => {
          if (p.pid !== undefined) process.kill(-p.pid, 'SIGKILL');
          reject(new Error(`timed out:\n${text}`));
        }, 80_000);
        p.on('exit', () => {
          clearTimeout(timer);
          resolve(text);
        });
      });
      const line = /RESULT (.*)/.exec(out)?.[1];
      if (line === undefined) throw new Error(`no result from the namespace:\n${out}`);
      expect(JSON.parse(line)).toEqual({
        keyless: [200, 200, 200, 200, 200, 429],
        refused: [401, 401, 401, 429],
        otherKeyless: 200,
        otherRefused: 401,
        uploads: ['streaming', 503, 'streaming'],
      });
    }, 90_000);
  },
);
