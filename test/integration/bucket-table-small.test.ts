import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../../src/ids.js';
import { spawnGateway } from '../helpers/child.js';
import { startServer, type TestServer } from '../helpers/origin.js';

// Regression tests from a review of the product against its design contract (2026-11-27).

/**
 * Fixed (max_buckets is now at least 16). DESIGN, Rate limits: "A decision costs a small fixed amount of work whatever the
 * requests are ... a lookup probes a bounded window; a table under pressure evicts the
 * bucket that would be full soonest and remembers its debt, it never spins." Running it:
 * "A bad config stops the start naming every offending key path at once, each in one
 * line ...".
 *
 * `ratelimit.max_buckets` (the bound of the bucket table, docs/keys-and-limits.md) is
 * accepted as any positive integer. With fewer than 16 slots (the probe window), the
 * first limited request reads past the shared table: `RangeError: Invalid atomic access
 * index` at SharedBuckets.scan, uncaught, and the whole gateway process exits (with
 * threads: 1; the client's request gets no answer). Either the start must refuse the
 * value naming `ratelimit.max_buckets`, or the table must work at that size.
 */
describe('a small bucket table (ratelimit.max_buckets below the probe window)', () => {
  let dir: string;
  let origin: TestServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-review-buckets-'));
    origin = await startServer((req, res) => {
      req.resume();
      res.end('ok');
    });
  });
  afterAll(async () => {
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is refused at start naming ratelimit.max_buckets', async () => {
    const file = join(dir, 'small.yaml');
    writeFileSync(
      file,
      [
        'server: { threads: 1 }',
        'ratelimit: { max_buckets: 8 }',
        'routes:',
        `  - { name: open, prefix: /open, auth: none, origins: { production: "${origin.url}" } }`,
        '',
      ].join('\n'),
    );
    const env = { DATA_DIR: join(dir, 'data'), WAKEGATE_ADMIN_KEY: `svc_live_${newSecret()}` };
    // The start is refused, naming the setting and its bound, before anything listens.
    const refused = await spawnGateway(['serve', '--config', file], env).then(
      async (g) => {
        g.proc.kill('SIGKILL');
        await g.exited;
        return null;
      },
      (e: unknown) => String(e),
    );
    expect(refused).toMatch(/ratelimit\.max_buckets: must be at least 16/);
  });
});
