import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { ClientHttp2Session } from 'node:http2';
import type https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { makeCerts, type TestCerts } from './certs.js';
import { type ChildGateway, spawnGateway } from './child.js';
import { h2request } from './h2.js';
import { startServer, type TestServer } from './origin.js';
import { httpsOn } from './tls-client.js';

/** A gateway as a child process with two edge threads and TLS from `live.pem`/`live.key` in its certificates' directory (which a test may replace). */
export interface TlsChild {
  certs: TestCerts;
  origin: TestServer;
  g: ChildGateway;
  url: string;
  stop(): Promise<void>;
}

/** Starts it: route `/free` (no key) to an origin answering ok. */
export async function startTlsChild(tag: string): Promise<TlsChild> {
  const certs = makeCerts();
  copyFileSync(certs.server.cert, join(certs.dir, 'live.pem'));
  copyFileSync(certs.server.key, join(certs.dir, 'live.key'));
  const origin = await startServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  const dir = mkdtempSync(join(tmpdir(), `wakegate-${tag}-`));
  writeFileSync(
    join(dir, 'cfg.yaml'),
    [
      'server:',
      '  threads: 2',
      '  tls:',
      `    certificates: [{ cert: ${join(certs.dir, 'live.pem')}, key: ${join(certs.dir, 'live.key')} }]`,
      'log: { level: info }',
      'routes:',
      `  - { name: free, prefix: /free, auth: none, origins: { production: ${origin.url} } }`,
      '',
    ].join('\n'),
  );
  const g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
    DATA_DIR: join(dir, 'data'),
    WAKEGATE_ADMIN_KEY: `svc_live_${newSecret()}`,
    WAKEGATE_TEST_HOOKS: '1',
  });
  return {
    certs,
    origin,
    g,
    url: `https://localhost:${g.port}`,
    async stop() {
      if (g.proc.exitCode === null) {
        g.proc.kill('SIGTERM');
        await g.exited;
      }
      await origin.close();
      rmSync(dir, { recursive: true, force: true });
      certs.cleanup();
    },
  };
}

/**
 * Keep-alive load over TLS until stopped: `perSession` concurrent streams on each HTTP/2
 * session and `h1` HTTP/1.1 loops on `agent`. A failure ends the loops (a closed session
 * fails at once, and would spin) and is kept to be asserted.
 */
export function mixedLoad(o: {
  sessions: readonly ClientHttp2Session[];
  perSession: number;
  agent: https.Agent;
  h1: number;
  /** Base URL and path prefix of the requests (`${url}${prefix}/h1`, `${prefix}/h2`). */
  url: string;
  prefix: string;
}): {
  readonly failures: string[];
  readonly h2done: number;
  readonly h1done: number;
  /** Waits (10 s at most) until `ok`, failing the test on a failure or the time running out. */
  until(ok: () => boolean): Promise<void>;
  stop(): Promise<void>;
} {
  const failures: string[] = [];
  let h2done = 0;
  let h1done = 0;
  let going = true;
  const h2loop = async (s: ClientHttp2Session) => {
    while (going && failures.length === 0) {
      try {
        const r = await h2request(s, { ':path': `${o.prefix}/h2` });
        if (r.status !== 200) failures.push(`h2 ${r.status}`);
      } catch (e) {
        failures.push(`h2 ${(e as Error).message}`);
      }
      h2done++;
    }
  };
  const h1loop = async () => {
    while (going && failures.length === 0) {
      try {
        const r = await httpsOn(`${o.url}${o.prefix}/h1`, o.agent);
        if (r.status !== 200) failures.push(`h1 ${r.status}`);
      } catch (e) {
        failures.push(`h1 ${(e as Error).message}`);
      }
      h1done++;
    }
  };
  const loops = [
    ...o.sessions.flatMap((s) => Array.from({ length: o.perSession }, () => h2loop(s))),
    ...Array.from({ length: o.h1 }, () => h1loop()),
  ];
  return {
    failures,
    get h2done() {
      return h2done;
    },
    get h1done() {
      return h1done;
    },
    async until(ok) {
      for (let i = 0; i < 2000 && !ok() && failures.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(failures).toEqual([]);
      expect(ok()).toBe(true);
    },
    async stop() {
      going = false;
      await Promise.all(loops);
    },
  };
}
