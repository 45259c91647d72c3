import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { loadEdgeTls } from '../../src/tls/edge-tls.js';
import { dayOf, exposedTicketFiles, processTickets, readTicketFile, ticketKeyFor } from '../../src/tls/tickets.js';
import { makeCerts, type TestCerts } from '../helpers/certs.js';

const problems = (values: unknown) => {
  try {
    loadConfig({ values });
  } catch (e) {
    return (e as ConfigError).message;
  }
  return '';
};

describe('server.tls config', () => {
  let certs: TestCerts;
  beforeAll(() => {
    certs = makeCerts();
  });
  afterAll(() => certs.cleanup());

  it('is null by default, and takes the DESIGN block with its defaults', () => {
    expect(loadConfig({}).server.tls).toBeNull();
    const c = loadConfig({ values: { server: { tls: { certificates: [{ cert: 'a.pem', key: 'a.key' }] } } } });
    expect(c.server.tls).toEqual({
      certificates: [{ cert: 'a.pem', key: 'a.key' }],
      min_version: 'TLSv1.2',
      client_ca: null,
      client_auth: 'none',
      ticket_keys_file: null,
    });
  });

  it('says what is wrong, by key path', () => {
    expect(problems({ server: { tls: { certificates: [] } } })).toContain(
      'config: server.tls.certificates: needs at least one { cert, key }',
    );
    expect(problems({ server: { tls: { certificates: [{ cert: 'a' }] } } })).toContain(
      'server.tls.certificates[0].key',
    );
    expect(
      problems({ server: { tls: { certificates: [{ cert: 'a', key: 'b' }], client_auth: 'required' } } }),
    ).toContain('config: server.tls.client_ca: client_auth: required needs client_ca');
    expect(problems({ server: { tls: { certificates: [{ cert: 'a', key: 'b' }], min_version: 'TLSv1' } } })).toContain(
      'server.tls.min_version',
    );
    expect(
      problems({ routes: [{ name: 'r', prefix: '/r', auth: 'mtlsx', origins: { production: 'http://x' } }] }),
    ).toContain('routes[0].auth');
  });

  it('names the file that does not load at start', () => {
    const at = (tls: Record<string, unknown>) => {
      try {
        loadEdgeTls(loadConfig({ values: { server: { tls } } }));
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        return (e as ConfigError).message;
      }
      return '';
    };
    expect(at({ certificates: [{ cert: `${certs.dir}/none.pem`, key: certs.server.key }] })).toMatch(
      /^config: server\.tls\.certificates\[0\]\.cert: cannot read .*none\.pem: ENOENT$/,
    );
    // A key that is not the certificate's.
    expect(at({ certificates: [{ cert: certs.server.cert, key: certs.other.key }] })).toContain(
      'server.tls.certificates[0].key',
    );
    expect(
      at({
        certificates: [{ cert: certs.server.cert, key: certs.server.key }],
        client_ca: certs.server.key,
        client_auth: 'optional',
      }),
    ).toContain('server.tls.client_ca');
    writeFileSync(`${certs.dir}/short.key`, Buffer.alloc(47));
    expect(
      at({
        certificates: [{ cert: certs.server.cert, key: certs.server.key }],
        ticket_keys_file: `${certs.dir}/short.key`,
      }),
    ).toContain('server.tls.ticket_keys_file');
    const ok = loadEdgeTls(
      loadConfig({
        values: { server: { tls: { certificates: [{ cert: certs.server.cert, key: certs.server.key }] } } },
      }),
    );
    expect(ok?.material.certs).toHaveLength(1);
    expect(ok?.tickets.kind).toBe('process');
  });
});

describe('session-ticket keys', () => {
  it('are one 48-byte key a day, the same wherever the source is the same, and new each day', () => {
    const src = processTickets();
    const day = dayOf(Date.UTC(2026, 10, 25, 13));
    expect(ticketKeyFor(src, day)).toHaveLength(48);
    expect(ticketKeyFor(structuredClone(src), day).equals(ticketKeyFor(src, day))).toBe(true);
    expect(ticketKeyFor(src, day + 1).equals(ticketKeyFor(src, day))).toBe(false);
    expect(ticketKeyFor(processTickets(), day).equals(ticketKeyFor(src, day))).toBe(false);
  });

  it("from a fleet's file: 48 bytes per key, raw or base64, taken in turn by day", () => {
    const certs = makeCerts();
    try {
      const raw = Buffer.concat([Buffer.alloc(48, 1), Buffer.alloc(48, 2)]);
      writeFileSync(`${certs.dir}/t.raw`, raw);
      writeFileSync(`${certs.dir}/t.b64`, `${raw.toString('base64')}\n`);
      for (const f of ['t.raw', 't.b64']) {
        const src = readTicketFile(`${certs.dir}/${f}`, 'server.tls.ticket_keys_file');
        expect(ticketKeyFor(src, 10)).toEqual(Buffer.alloc(48, 1));
        expect(ticketKeyFor(src, 11)).toEqual(Buffer.alloc(48, 2));
      }
    } finally {
      certs.cleanup();
    }
  });
});

describe('a ticket keys file others may read', () => {
  it('is warned of at start (by key path and mode); a private one, or none, is not', () => {
    const dir = mkdtempSync(join(tmpdir(), 'wakegate-tickets-'));
    const file = join(dir, 'tickets.key');
    writeFileSync(file, randomBytes(48 * 3));
    chmodSync(file, 0o644);
    const warned = exposedTicketFiles([
      { at: 'server.tls.ticket_keys_file', file },
      { at: 'server.ops_tls.ticket_keys_file', file: null },
    ]);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain('server.tls.ticket_keys_file');
    expect(warned[0]).toContain('mode 644');
    chmodSync(file, 0o640);
    expect(exposedTicketFiles([{ at: 'management.tls.ticket_keys_file', file }])[0]).toContain('mode 640');
    chmodSync(file, 0o600);
    expect(exposedTicketFiles([{ at: 'server.tls.ticket_keys_file', file }])).toEqual([]);
    // A file that is not there is the config loader's to refuse, not a warning.
    expect(exposedTicketFiles([{ at: 'server.tls.ticket_keys_file', file: join(dir, 'none') }])).toEqual([]);
    rmSync(dir, { recursive: true, force: true });
  });
});
