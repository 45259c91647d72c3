// Regression tests from a review of TLS and HTTP/2 at the edge (2026-11-28).
// Review of TLS and HTTP/2 at the edge (2026-11-28): ticket_keys_file is read once at start; rotating its keys (file change or SIGHUP) never takes effect, the old key keeps sealing and opening tickets
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { hasReusePort } from '../../src/startup.js';
import { dayOf } from '../../src/tls/tickets.js';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { type ChildGateway, spawnGateway } from '../helpers/child.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { type Handshake, handshake } from '../helpers/tls-client.js';
import { manualTlsWatch } from '../helpers/tls-watch.js';

// The threaded tests at the end run again on the Node LTS (scripts/test-on-lts.sh), where two threads share the port (on an older Node they skip).

/**
 * docs/security.md ("Session tickets"): the fleet's `ticket_keys_file` "is as sensitive as a
 * private key: whoever holds it can decrypt recorded sessions resumed with its tickets ...
 * rotate it by putting new keys in the file". docs/configuration.md ("Reloads"): the TLS
 * files are watched and SIGHUP reads them again at once.
 *
 * The file is read only in loadEdgeTls/listenerTls at start (src/tls/edge-tls.ts); the
 * reloader (src/tls/reloader.ts, material.ts filesOf/readMaterial) neither watches nor reads
 * it, and tlsFront.update (src/tls/front.ts) puts the start's keys back. So an operator who
 * replaces a leaked key file and sends SIGHUP gets "TLS certificates reloaded", while the
 * leaked key goes on sealing every new ticket until a restart.
 *
 * Proof through the real listener: a ticket sealed under key A still resumes after the file
 * holds only key B and a reload ran. Under key B alone (Node holds one ticket key), a ticket
 * sealed with A cannot be opened: the client must do a full handshake.
 */

const DAY_MS = 86_400_000;
/** Keys chosen by the UTC day: a test that writes a file meant for today does not start a second before midnight. */
async function awayFromMidnight(): Promise<void> {
  const left = DAY_MS - (Date.now() % DAY_MS);
  if (left < 5000) await new Promise((r) => setTimeout(r, left + 100));
}

/** A keys file of `keys` where `inForce` is the one the UTC day picks (day number modulo their count). */
function fileWithTodays(inForce: Buffer, others: Buffer[]): Buffer {
  const keys = [...others];
  keys.splice(dayOf(Date.now()) % (others.length + 1), 0, inForce);
  return Buffer.concat(keys);
}

/** One keep-alive TLS connection: `get` sends a request on it and waits for the origin's `ok`. */
function keptOpen(port: number, ca: string, path: string) {
  const s = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' });
  let closed = false;
  s.on('close', () => {
    closed = true;
  });
  s.on('error', () => {});
  const ready = new Promise<void>((r, j) => {
    s.once('secureConnect', () => r());
    s.once('error', j);
  });
  return {
    get closed() {
      return closed;
    },
    async get(): Promise<string> {
      await ready;
      if (closed) throw new Error('the kept-open connection was closed');
      return new Promise((resolve, reject) => {
        let got = '';
        const on = (c: Buffer) => {
          got += c.toString();
          if (/\r\n\r\n[\s\S]*ok(\r\n0\r\n\r\n)?$/.test(got)) {
            s.off('data', on);
            s.off('close', gone);
            resolve(got);
          }
        };
        const gone = () => reject(new Error(`closed while answering: ${got}`));
        s.on('data', on);
        s.once('close', gone);
        s.write(`GET ${path} HTTP/1.1\r\nhost: localhost\r\n\r\n`);
      });
    },
    close: () => s.destroy(),
  };
}

describe('TLS session tickets: a rotated ticket_keys_file', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  let ticketFile: string;
  const watch = manualTlsWatch();
  const metric = async (name: string) => {
    const text = await (await fetch(`${t.opsUrl}/metrics`)).text();
    return text.split('\n').filter((l) => l.startsWith(name));
  };

  beforeAll(async () => {
    certs = makeCerts();
    ticketFile = join(certs.dir, 'tickets.key');
    writeFileSync(ticketFile, randomBytes(48), { mode: 0o600 }); // key A
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    t = await startGateway(
      {
        server: {
          tls: {
            certificates: [{ cert: certs.server.cert, key: certs.server.key }],
            ticket_keys_file: ticketFile,
          },
        },
        routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
      },
      { log: watch.log, tlsWatch: watch.tlsWatch },
    );
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    await origin?.close();
    certs?.cleanup();
  });

  it('after the key file is replaced and reloaded (file change, then SIGHUP), a ticket sealed with the old key no longer resumes', async () => {
    const first = await handshake(port, { ca: certs.caPem, path: '/open/a' });
    expect(first.session).not.toBeNull();
    // Sanity: under key A the ticket resumes.
    expect((await handshake(port, { ca: certs.caPem, session: first.session as Buffer })).reused).toBe(true);

    // Rotation: the file now holds only key B (as if key A had leaked).
    writeFileSync(ticketFile, randomBytes(48), { mode: 0o600 });
    const said = await watch.reloaded(); // the file watch firing
    expect(said.join('')).toContain('TLS certificates reloaded');
    expect(t.gw.reloadTls()).toBe(true); // SIGHUP

    const after = await handshake(port, { ca: certs.caPem, session: first.session as Buffer });
    // Key A is no longer in the file: its ticket must not open.
    expect(after.reused, 'a ticket sealed with the rotated-out key still resumed: the old key is still in force').toBe(
      false,
    );
  });

  it('keeps the keys in force when the new file does not load (wrong size, then not a file): one log line each, the reload failure metric', async () => {
    // Sealed under the key in force (B, from the test before).
    const before = await handshake(port, { ca: certs.caPem, path: '/open/b' });
    expect(before.session).not.toBeNull();
    const failures = (await metric('wakegate_tls_reload_failures_total{listener="main"}')).map((l) => l.split(' ')[1]);
    const failed = Number(failures[0] ?? 0);

    writeFileSync(ticketFile, randomBytes(47), { mode: 0o600 }); // not a whole key
    const said = await watch.reloaded();
    expect(said).toHaveLength(1);
    expect(said[0]).toContain('TLS certificates not reloaded');
    expect(said[0]).toContain('server.tls.ticket_keys_file');
    expect(await metric('wakegate_tls_reload_failures_total{listener="main"}')).toEqual([
      `wakegate_tls_reload_failures_total{listener="main"} ${failed + 1}`,
    ]);
    // The old key still opens its tickets, and still seals new ones.
    expect((await handshake(port, { ca: certs.caPem, session: before.session as Buffer })).reused).toBe(true);
    const during = await handshake(port, { ca: certs.caPem, path: '/open/c' });
    expect((await handshake(port, { ca: certs.caPem, session: during.session as Buffer })).reused).toBe(true);

    // SIGHUP with no file to read at that path (a directory there): refused the same way.
    rmSync(ticketFile);
    mkdirSync(ticketFile);
    try {
      expect(t.gw.reloadTls()).toBe(false);
      expect(await metric('wakegate_tls_reload_failures_total{listener="main"}')).toEqual([
        `wakegate_tls_reload_failures_total{listener="main"} ${failed + 2}`,
      ]);
      expect((await handshake(port, { ca: certs.caPem, session: before.session as Buffer })).reused).toBe(true);
    } finally {
      rmSync(ticketFile, { recursive: true });
    }
    // The certificates served all along.
    expect((await handshake(port, { ca: certs.caPem })).peer.subject.CN).toBe('localhost');
  });

  it('a ticket under a key still in force after the reload resumes; once its key leaves the file it does not; no connection is dropped', async () => {
    await awayFromMidnight();
    const inForce = randomBytes(48);
    writeFileSync(ticketFile, inForce, { mode: 0o600 });
    expect(t.gw.reloadTls()).toBe(true);
    const sealed = await handshake(port, { ca: certs.caPem, path: '/open/d' });
    expect(sealed.session).not.toBeNull();
    const kept = keptOpen(port, certs.caPem, '/open/kept');
    try {
      expect(await kept.get()).toContain('200');

      // New keys beside it, the day's still the same: its tickets go on resuming.
      writeFileSync(ticketFile, fileWithTodays(inForce, [randomBytes(48), randomBytes(48)]), { mode: 0o600 });
      const said = await watch.reloaded();
      expect(said.join('')).toContain('TLS certificates reloaded');
      expect(said.join('')).toContain('"ticket_keys":3');
      expect((await handshake(port, { ca: certs.caPem, session: sealed.session as Buffer })).reused).toBe(true);
      expect(await kept.get()).toContain('200');

      // Its key taken out: its tickets stop; the new key's resume.
      writeFileSync(ticketFile, randomBytes(96), { mode: 0o600 });
      expect(t.gw.reloadTls()).toBe(true);
      expect((await handshake(port, { ca: certs.caPem, session: sealed.session as Buffer })).reused).toBe(false);
      const fresh = await handshake(port, { ca: certs.caPem, path: '/open/e' });
      expect((await handshake(port, { ca: certs.caPem, session: fresh.session as Buffer })).reused).toBe(true);
      // The connection opened before both reloads still serves.
      expect(await kept.get()).toContain('200');
      expect(kept.closed).toBe(false);
    } finally {
      kept.close();
    }
  });
});

/** The ops listener (server.ops_tls, as management.tls) goes through listenerTls: its ticket keys reload too. */
describe('TLS session tickets: a rotated ticket_keys_file on the ops listener', () => {
  let certs: TestCerts;
  let t: TestGateway;
  let opsPort: number;
  let ticketFile: string;
  const watch = manualTlsWatch();

  beforeAll(async () => {
    certs = makeCerts();
    ticketFile = join(certs.dir, 'ops-tickets.key');
    writeFileSync(ticketFile, randomBytes(48).toString('base64'), { mode: 0o600 });
    t = await startGateway(
      {
        server: {
          ops_tls: {
            certificates: [{ cert: certs.server.cert, key: certs.server.key }],
            ticket_keys_file: ticketFile,
          },
        },
      },
      { log: watch.log, tlsWatch: watch.tlsWatch },
    );
    opsPort = Number(new URL(t.opsUrl).port);
  });
  afterAll(async () => {
    await t?.cleanup();
    certs?.cleanup();
  });

  it('after a reload, a ticket sealed with the removed key no longer resumes there; a bad file keeps the new one', async () => {
    const first = await handshake(opsPort, { ca: certs.caPem, path: '/healthz' });
    expect(first.response).toContain('200');
    expect((await handshake(opsPort, { ca: certs.caPem, session: first.session as Buffer })).reused).toBe(true);

    writeFileSync(ticketFile, randomBytes(48).toString('base64'), { mode: 0o600 });
    expect(t.gw.reloadTls()).toBe(true);
    expect((await handshake(opsPort, { ca: certs.caPem, session: first.session as Buffer })).reused).toBe(false);
    const next = await handshake(opsPort, { ca: certs.caPem, path: '/healthz' });
    expect((await handshake(opsPort, { ca: certs.caPem, session: next.session as Buffer })).reused).toBe(true);

    writeFileSync(ticketFile, 'not base64, and not 48 bytes', { mode: 0o600 });
    const said = await watch.reloaded();
    expect(said).toHaveLength(1);
    expect(said[0]).toContain('TLS certificates not reloaded');
    expect(said[0]).toContain('server.ops_tls.ticket_keys_file');
    expect((await handshake(opsPort, { ca: certs.caPem, session: next.session as Buffer })).reused).toBe(true);
    const m = await handshake(opsPort, { ca: certs.caPem, path: '/metrics' });
    expect(m.response).toContain('wakegate_tls_reload_failures_total{listener="ops"} 1');
  });
});

/** Two edge threads, through the gateway as a child process: the reloaded keys reach every thread. */
describe.runIf(hasReusePort())('TLS session tickets: a rotated ticket_keys_file on two edge threads', () => {
  let certs: TestCerts;
  let origin: TestServer;
  let g: ChildGateway;
  let dir: string;
  let ticketFile: string;

  beforeAll(async () => {
    certs = makeCerts();
    ticketFile = join(certs.dir, 'tickets.key');
    writeFileSync(ticketFile, randomBytes(48), { mode: 0o600 });
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    dir = mkdtempSync(join(tmpdir(), 'wakegate-tls-ticket-keys-'));
    writeFileSync(
      join(dir, 'cfg.yaml'),
      [
        'server:',
        '  threads: 2',
        '  tls:',
        `    certificates: [{ cert: ${certs.server.cert}, key: ${certs.server.key} }]`,
        `    ticket_keys_file: ${ticketFile}`,
        'log: { level: info }',
        'routes:',
        `  - { name: free, prefix: /free, auth: none, origins: { production: ${origin.url} } }`,
        '',
      ].join('\n'),
    );
    g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], {
      DATA_DIR: join(dir, 'data'),
      WAKEGATE_ADMIN_KEY: `svc_live_${newSecret()}`,
      WAKEGATE_TEST_HOOKS: '1',
    });
  }, 60_000);
  afterAll(async () => {
    if (g && g.proc.exitCode === null) {
      g.proc.kill('SIGTERM');
      await g.exited;
    }
    await origin?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    certs?.cleanup();
  });

  const thread = (h: Handshake) => /x-wakegate-thread: (\d+)/i.exec(h.response)?.[1];
  /** Handshakes until one lands on each thread (the kernel spreads connections). */
  async function onEach(session?: Buffer): Promise<Map<string, Handshake>> {
    const seen = new Map<string, Handshake>();
    for (let i = 0; i < 200 && seen.size < 2; i++) {
      const h = await handshake(g.port, { ca: certs.caPem, path: '/free/x', ...(session ? { session } : {}) });
      const n = thread(h);
      if (n && !seen.has(n)) seen.set(n, h);
    }
    expect([...seen.keys()].sort()).toEqual(['1', '2']);
    return seen;
  }

  it('after the file is rotated and SIGHUP, no thread opens a ticket of the removed key; the new key resumes across threads', async () => {
    const first = await onEach();
    const old = first.get('1')?.session as Buffer;
    expect(old).toBeTruthy();
    const resumed = await onEach(old);
    expect([resumed.get('1')?.reused, resumed.get('2')?.reused]).toEqual([true, true]);

    writeFileSync(ticketFile, randomBytes(48), { mode: 0o600 });
    const before = (g.stderr().match(/TLS certificates reloaded/g) ?? []).length;
    g.proc.kill('SIGHUP');
    for (let i = 0; i < 200 && (g.stderr().match(/TLS certificates reloaded/g) ?? []).length === before; i++)
      await new Promise((r) => setTimeout(r, 10));
    // The message to the edge threads follows the log line: give it a moment to land.
    await new Promise((r) => setTimeout(r, 100));

    const after = await onEach(old);
    expect([after.get('1')?.reused, after.get('2')?.reused]).toEqual([false, false]);
    const fresh = (await onEach()).get('2')?.session as Buffer;
    const across = await onEach(fresh);
    expect([across.get('1')?.reused, across.get('2')?.reused]).toEqual([true, true]);
    expect(g.proc.exitCode).toBeNull();
  });
});
