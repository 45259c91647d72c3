import type { DeliveryRecord } from '../store/webhooks.js';
import type { Coordinator } from './redis.js';
import { script } from './redis.js';

/*
 * Webhook dispatch shared by a fleet. Redis holds each unfinished delivery's current
 * state (wg:wh:d:<id>, JSON) and when it is due (the sorted set wg:wh:due); an attempt
 * is made under a lease (wg:wh:l:<id>, the owner's name, expiring), so one instance at a
 * time attempts a delivery, attempt numbers follow the state in Redis whoever made the
 * last one, and a killed instance's lease expires for another to take over.
 */

const DUE = 'wg:wh:due';
const stateKey = (id: string) => `wg:wh:d:${id}`;
const leaseKey = (id: string) => `wg:wh:l:${id}`;

/** ADD: KEYS = due, state keys…; ARGV = ids…, states…, due times… (never replaces a state Redis holds). */
const ADD = script(`
local n = #KEYS - 1
for i = 1, n do
  if redis.call('SET', KEYS[i + 1], ARGV[n + i], 'NX') then
    redis.call('ZADD', KEYS[1], ARGV[2 * n + i], ARGV[i])
  end
end
return n
`);

/** A finished delivery's state stays this long (ms), so no instance holding an old copy attempts it again. */
const ENDED_MS = 86_400_000;

/**
 * CLAIM: KEYS = state, lease, due; ARGV = owner, lease ms, now, the caller's copy, id.
 * Returns {verdict, state}: ok (leased to the caller), busy (another holds it), later
 * (not due: its state), gone (finished). A state Redis no longer holds (it restarted
 * empty) is put back from the caller's copy, so no retry is lost with it.
 */
const CLAIM = script(`
local cur = redis.call('GET', KEYS[1])
if not cur then
  cur = ARGV[4]
  redis.call('SET', KEYS[1], cur)
end
local st = cjson.decode(cur)
if st.next_attempt_at == cjson.null then return {'gone', ''} end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then return {'busy', cur} end
redis.call('ZADD', KEYS[3], 'NX', string.format('%.0f', st.next_attempt_at), ARGV[5])
if tonumber(st.next_attempt_at) > tonumber(ARGV[3]) then return {'later', cur} end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return {'ok', cur}
`);

/**
 * RELEASE: KEYS = state, lease, due; ARGV = owner, id, state, next due ('' when
 * finished), ms a finished state is kept. A delivery ended meanwhile (replayed by
 * hand) stays ended.
 */
const RELEASE = script(`
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[2])
local cur = redis.call('GET', KEYS[1])
if cur and cjson.decode(cur).next_attempt_at == cjson.null then return 1 end
if ARGV[4] == '' then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[5])
  redis.call('ZREM', KEYS[3], ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[3])
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[2])
end
return 1
`);

/** SCAN: KEYS = due; ARGV = until, most. The states of deliveries due by `until`. */
const SCAN = script(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local r = {}
for _, id in ipairs(ids) do
  local s = redis.call('GET', 'wg:wh:d:' .. id)
  if s then r[#r + 1] = s else redis.call('ZREM', KEYS[1], id) end
end
return r
`);

/** Set once the fleet's queue holds what storage holds of unfinished deliveries. */
const SEEDED = 'wg:wh:seeded';

export type Claim = { ok: true; d: DeliveryRecord } | { ok: false; next: DeliveryRecord | null };

const strip = (d: DeliveryRecord): string => {
  const { attempt_log: _, ...rest } = d;
  return JSON.stringify(rest);
};

/** The dispatcher's view of the fleet's delivery queue. */
export class DeliveryLeases {
  constructor(
    private readonly co: Coordinator,
    /** How long a lease holds: longer than any attempt (webhooks.timeout_ms) plus a margin. */
    private readonly leaseMs: number,
  ) {}

  async add(rows: DeliveryRecord[]): Promise<void> {
    for (let i = 0; i < rows.length; i += 500) {
      const part = rows.slice(i, i + 500);
      const keys = [DUE, ...part.map((d) => stateKey(d.id))];
      const args = [...part.map((d) => d.id), ...part.map(strip), ...part.map((d) => d.next_attempt_at ?? 0)];
      await this.co.run(ADD, keys, args, 'lease', 5000);
    }
  }

  async claim(d: DeliveryRecord, now: number): Promise<Claim> {
    const keys = [stateKey(d.id), leaseKey(d.id), DUE];
    const args = [this.co.owner, this.leaseMs, now, strip(d), d.id];
    const r = (await this.co.run(CLAIM, keys, args, 'lease', 5000)) as [string, string];
    const state = r[1] === '' ? null : (JSON.parse(r[1]) as DeliveryRecord);
    if (r[0] === 'ok' && state) return { ok: true, d: state };
    return { ok: false, next: r[0] === 'later' ? state : null };
  }

  /** Ends the lease with the attempt's outcome; false when the lease was lost (held too long). */
  async release(d: DeliveryRecord): Promise<boolean> {
    const next = d.status === 'failed' && d.next_attempt_at !== null ? String(d.next_attempt_at) : '';
    const r = await this.co.run(
      RELEASE,
      [stateKey(d.id), leaseKey(d.id), DUE],
      [this.co.owner, d.id, strip(d), next, ENDED_MS],
      'lease',
      5000,
    );
    return r === 1;
  }

  /** Ends a delivery for the whole fleet (replayed by hand): no instance attempts it again. */
  async cancel(id: string): Promise<void> {
    const ended = JSON.stringify({ id, next_attempt_at: null });
    await this.co.command(['SET', stateKey(id), ended, 'PX', String(ENDED_MS)], 'lease', 5000);
    await this.co.command(['ZREM', DUE, id], 'lease', 5000);
  }

  /** Deliveries due by `until` (any instance's). */
  async due(until: number, most = 1000): Promise<DeliveryRecord[]> {
    const r = (await this.co.run(SCAN, [DUE], [until, most], 'lease', 5000)) as string[];
    return r.map((s) => JSON.parse(s) as DeliveryRecord);
  }

  /** Whether the fleet's queue was never filled from storage (a fleet's first start, or Redis restarted empty). */
  async unseeded(): Promise<boolean> {
    return (await this.co.command(['EXISTS', SEEDED], 'lease', 5000)) === 0;
  }

  /** Marks the queue as filled from storage (after the deliveries are added). */
  async seeded(): Promise<void> {
    await this.co.command(['SET', SEEDED, this.co.owner], 'lease', 5000);
  }
}

/**
 * One instance of the fleet at a time turns recorded events into deliveries: the
 * holder of wg:fanout, renewed on every poll; another takes over when it expires.
 */
export class FanoutLeader {
  private held = false;
  constructor(
    private readonly co: Coordinator,
    private readonly ttlMs = 10_000,
  ) {}

  /** Takes or keeps the lead; true while this instance leads. Redis unreachable: not leading. */
  async lead(): Promise<{ leading: boolean; gained: boolean }> {
    let leading = false;
    try {
      const r = await this.co.run(LEAD, ['wg:fanout'], [this.co.owner, this.ttlMs], 'fanout', 2000);
      leading = r === 1;
    } catch {
      leading = false;
    }
    const gained = leading && !this.held;
    this.held = leading;
    return { leading, gained };
  }

  async resign(): Promise<void> {
    if (!this.held) return;
    this.held = false;
    await this.co.run(RESIGN, ['wg:fanout'], [this.co.owner], 'fanout', 1000).catch(() => {});
  }
}

const LEAD = script(`
local h = redis.call('GET', KEYS[1])
if h and h ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`);
const RESIGN = script(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
`);
