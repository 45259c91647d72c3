// Regression tests from a review of TLS (2026-11-28): a private key written in the config in place of its path is printed back whole.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCerts, type TestCerts } from '../helpers/certs.js';
import { wakegate } from '../helpers/cli-run.js';

/**
 * server.tls.certificates[].key is a file path (src/config/tls-schema.ts: any non-empty string).
 * An operator who pastes the PEM itself there (`key: |` in YAML, or `key: ${TLS_KEY}` filled from
 * a secret, as other proxies accept) gets a config error, rightly, but readBounded
 * (src/tls/files.ts) names the "file" in its message: `cannot read -----BEGIN PRIVATE KEY-----
 * MIG...: ENOENT`. The whole private key goes to stderr, i.e. to journald / the container log,
 * where anyone who reads logs can take it. Key material should never be echoed.
 */
describe('a PEM key given in place of its path', () => {
  let certs: TestCerts;
  let dir: string;
  beforeAll(() => {
    certs = makeCerts();
    dir = mkdtempSync(join(tmpdir(), 'wakegate-inline-key-'));
  });
  afterAll(() => {
    certs?.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it('stops the start without printing the key', async () => {
    const file = join(dir, 'gateway.yaml');
    const indented = certs.server.keyPem
      .trimEnd()
      .split('\n')
      .map((l) => `            ${l}`)
      .join('\n');
    writeFileSync(
      file,
      [
        'server:',
        '  tls:',
        '    certificates:',
        `      - cert: ${certs.server.cert}`,
        '        key: |',
        indented,
        'routes:',
        '  - name: open',
        '    prefix: /open',
        '    auth: none',
        '    origins: { production: "http://127.0.0.1:9" }',
        '',
      ].join('\n'),
    );
    const r = await wakegate(['serve', '--config', file], { DATA_DIR: join(dir, 'data') }, 30_000);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('server.tls.certificates[0].key');
    // The key's body (its base64 lines) must not be in what the start printed.
    const body = certs.server.keyPem.split('\n').filter((l) => l !== '' && !l.startsWith('-----'));
    for (const line of body) expect(r.stderr).not.toContain(line);
  });
});
