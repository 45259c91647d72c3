import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateLimiter } from '../../src/ratelimit/limiter.js';
import { BUCKETS_FILE, encodeBuckets } from '../../src/ratelimit/persist.js';
import { allocateBuckets, seedOf } from '../../src/ratelimit/shared-buckets.js';
import { fillers, getFrom, loopback, oldHome, seededHome } from '../helpers/bucket-names.js';
import { spawnGateway } from '../helpers/child.js';
import { startGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

const SLOTS = 200_000; // ratelimit.max_buckets, the default
const WINDOW = 16;
const DRAIN_MS = 3_000;
const TIGHT = 'xtight\u0000';

const routes = (origin: string) => [
  { name: 'plain', prefix: '/plain', auth: 'none', origins: { production: origin } },
  { name: 'tight', prefix: '/tight', auth: 'none', rate_limit: 'tight', origins: { production: origin } },
];
// One token a day and then some: a bucket that served one request is draining for a long while.
const rateLimits = {
  default: { limit: 1000, burst: 1000, window: 'day' },
  tight: { limit: 1000, burst: 1000, window: 'day' },
};

/**
 * An attacker's plan against one window of the table, given how homes are computed:
 * an address `pivot` whose two buckets (its address's and its route policy's) have
 * overlapping windows, and one address per slot of both windows (those in both first),
 * so that both windows are full of draining buckets when the pivot comes.
 */
function plan(home: (tag: string, ip: string) => number) {
  for (let n = 0; n < 0x7fffff; n++) {
    const pivot = loopback(n);
    const ha = home('a', pivot);
    const hx = home(TIGHT, pivot);
    if (ha === hx || Math.abs(ha - hx) >= WINDOW || Math.min(ha, hx) + 2 * WINDOW > SLOTS) continue;
    const lo = Math.min(ha, hx);
    const hi = Math.max(ha, hx);
    const all = fillers((ip) => home('a', ip), lo, hi - lo + WINDOW, n + 1);
    // Both windows' common slots first: the first filled is the one evicted first.
    const common = all.slice(hi - lo, WINDOW);
    const rest = [...all.slice(0, hi - lo), ...all.slice(WINDOW)];
    return { pivot, common, rest };
  }
  throw new Error('no pivot');
}

async function flood(url: string, p: ReturnType<typeof plan>): Promise<number[]> {
  const statuses: number[] = [];
  for (const ip of p.common) statuses.push(await getFrom(`${url}/plain/fill`, ip, 5_000));
  await new Promise((r) => setTimeout(r, 5)); // the rest is filled a few milliseconds later
  for (const ip of p.rest) statuses.push(await getFrom(`${url}/plain/fill`, ip, 5_000));
  return statuses;
}

describe('bucket table under chosen names (issue #34, item 3)', () => {
  let origin: TestServer;
  let dir: string;

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end('ok');
    });
    dir = mkdtempSync(join(tmpdir(), 'wakegate-flood-'));
  });
  afterAll(async () => {
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('addresses colliding under the old unkeyed hash neither hang the gateway nor keep it from stopping on SIGTERM', async () => {
    const cfg = {
      server: { threads: 1, drain_timeout_ms: DRAIN_MS },
      routes: routes(origin.url),
      rate_limits: rateLimits,
      log: { level: 'info' },
    };
    // JSON is YAML: the config file as the gateway reads it.
    writeFileSync(join(dir, 'cfg.yaml'), JSON.stringify(cfg));
    const g = await spawnGateway(['serve', '--config', join(dir, 'cfg.yaml')], { DATA_DIR: join(dir, 'data') });
    try {
      const p = plan((tag, ip) => oldHome(tag, ip, SLOTS));
      const filled = await flood(g.url, p);
      expect(filled.every((s) => s === 200)).toBe(true);
      // The pivot draws two buckets whose windows are full: before the fix, each claim evicted the other, forever.
      const pivot = await getFrom(`${g.url}/tight/x`, p.pivot, 5_000);
      const after = await getFrom(`${g.url}/plain/after`, loopback(0x7ffff0), 5_000);
      const t0 = Date.now();
      g.proc.kill('SIGTERM');
      const bound = DRAIN_MS + 7_000;
      const exit = await Promise.race([g.exited, new Promise((r) => setTimeout(() => r(null), bound))]);
      // Before the fix: { pivot: 0, after: 0, stopped: false } (CPU pegged, SIGTERM unheard).
      expect({ pivot, after, stopped: exit !== null }).toEqual({ pivot: 200, after: 200, stopped: true });
      expect(Date.now() - t0).toBeLessThan(bound);
    } finally {
      g.proc.kill('SIGKILL');
    }
  }, 60_000);

  it('an attacker who knows the seed fills both windows: every request answered, promptly', async () => {
    const t = await startGateway({ routes: routes(origin.url), rate_limits: rateLimits });
    try {
      const seed = seedOf((t.gw.limiter as RateLimiter).layout);
      const p = plan((tag, ip) => seededHome(seed, tag, ip, SLOTS));
      const filled = await flood(t.url, p);
      expect(filled.every((s) => s === 200)).toBe(true);
      // The pivot, again and again, against windows kept full: each answered at once.
      for (let i = 0; i < 20; i++) {
        const t0 = Date.now();
        expect(await getFrom(`${t.url}/tight/x`, p.pivot, 5_000)).toBe(200);
        expect(Date.now() - t0).toBeLessThan(1_000);
      }
    } finally {
      await t.cleanup();
    }
  }, 60_000);

  it('a gateway process whose seed the attacker knows, under that load, stops on SIGTERM within the drain period', async () => {
    // The seed is the one the data directory holds (a saved table of no buckets): known to the test.
    const seed: [number, number] = [0x2468ace, -0x13579bd];
    const data = join(dir, 'seeded');
    mkdirSync(data, { recursive: true });
    writeFileSync(join(data, BUCKETS_FILE), encodeBuckets(allocateBuckets(SLOTS, 65_536, seed), Date.now()), {
      mode: 0o600,
    });
    const cfg = {
      server: { threads: 1, drain_timeout_ms: DRAIN_MS },
      routes: routes(origin.url),
      rate_limits: rateLimits,
      log: { level: 'info' },
    };
    writeFileSync(join(dir, 'seeded.yaml'), JSON.stringify(cfg));
    const g = await spawnGateway(['serve', '--config', join(dir, 'seeded.yaml')], { DATA_DIR: data });
    try {
      const p = plan((tag, ip) => seededHome(seed, tag, ip, SLOTS));
      expect((await flood(g.url, p)).every((st) => st === 200)).toBe(true);
      // Eight clients keep asking from the colliding addresses, the pivot among them, while the stop comes.
      const from = [p.pivot, ...p.common, ...p.rest];
      let stop = false;
      let answered = 0;
      const client = async (c: number) => {
        for (let i = c; !stop; i += 8) {
          const ip = from[i % from.length] as string;
          if ((await getFrom(`${g.url}/${i % 2 ? 'tight' : 'plain'}/load`, ip, 5_000)) !== 0) answered++;
        }
      };
      const load = Promise.all(Array.from({ length: 8 }, (_, c) => client(c)));
      await new Promise((r) => setTimeout(r, 1_000));
      const before = answered;
      const t0 = Date.now();
      g.proc.kill('SIGTERM');
      const bound = DRAIN_MS + 7_000;
      const exit = await Promise.race([g.exited, new Promise((r) => setTimeout(() => r(null), bound))]);
      stop = true;
      await load;
      expect(before).toBeGreaterThan(20);
      expect(exit).not.toBeNull();
      expect(Date.now() - t0).toBeLessThan(bound);
      // The process hashed with that seed: the table it saved at the stop carries it still.
      const saved = readFileSync(join(data, BUCKETS_FILE));
      expect([saved.readInt32LE(4), saved.readInt32LE(8)]).toEqual(seed);
    } finally {
      g.proc.kill('SIGKILL');
    }
  }, 60_000);
});
