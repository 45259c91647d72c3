// Regression tests from a review of TLS (2026-11-28).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeCerts } from '../helpers/certs.js';
import { startGateway } from '../helpers/gateway.js';

/**
 * A route's `tls.ca` is the CAs to trust instead of the system's. An empty file (a secret
 * not filled in yet, a file cut short mid-rotation) was passed on as `ca: ''`, which Node
 * takes as no `ca` at all: the route trusted every publicly trusted certificate for its
 * origin's name, with no word at start. It is a config error, naming the file's place.
 */
describe("a route's tls.ca holding no certificate", () => {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-origin-ca-'));
  const certs = makeCerts();
  afterAll(() => {
    certs.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it('stops the start with a config error naming routes[0].tls.ca, empty or not PEM', async () => {
    for (const [name, text] of [
      ['empty.pem', ''],
      ['blank.pem', '\n\n'],
      ['garbage.pem', 'not a certificate\n'],
    ] as const) {
      const file = join(dir, name);
      writeFileSync(file, text);
      const route = { name: 'pinned', prefix: '/p', auth: 'none', origins: { production: 'https://127.0.0.1:9' } };
      const outcome = await startGateway({ routes: [{ ...route, tls: { ca: file } }] }).then(
        async (g) => {
          await g.cleanup();
          return 'started';
        },
        (e: Error) => e.message,
      );
      expect(outcome, name).toMatch(/routes\[0\]\.tls\.ca.*no PEM certificate/s);
    }
    // A CA file that holds one starts.
    const route = { name: 'pinned', prefix: '/p', auth: 'none', origins: { production: 'https://127.0.0.1:9' } };
    const g = await startGateway({ routes: [{ ...route, tls: { ca: certs.ca } }] });
    await g.cleanup();
  });
});
