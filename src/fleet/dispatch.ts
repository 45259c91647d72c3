import type { DeliveryRecord } from '../webhooks/records.js';
import type { Coordinator } from './redis.js';
import { script } from './script.js';

/*
 * Webhook dispatch shared by a fleet. Redis holds, for each unfinished delivery, only
 * how far it got and when it is due (<prefix>wh:d:<id>: {"attempt","next_attempt_at"},
 * and after a failed attempt "wait", the wait its outcome was given),
 * the ids by due time (the sorted set <prefix>wh:due), and a lease per attempt
 * (<prefix>wh:l:<id>, the owner's name, expiring): one instance at a time attempts a
 * delivery, attempt numbers follow whoever made the last one, and a killed instance's
 * lease expires for another to take over.
 *
 * Redis is not trusted with what is sent: the payload, the endpoint (so its URL and
 * signing secret) and the attempt limit always come from storage or this instance's
 * own attempts. What Redis says can only delay an attempt, end it, or repeat one: an
 * attempt number from Redis is taken only between what the caller holds and the last
 * allowed, so resetting it never numbers attempts back.
 */

const DUE = 'wh:due';
const STATE = 'wh:d:';
const stateKey = (id: string) => `${STATE}${id}`;
const leaseKey = (id: string) => `wh:l:${id}`;
/** Delivery ids as the gateway makes them; anything else in the queue is not ours. */
const DELIVERY_ID = /^[A-Za-z0-9_]{1,64}$/;

/** Lua: a state Redis holds, or nil when it is not one (altered, or not JSON). */
const DECODE = `
local function decode(s)
  if not s then return nil end
  local ok, st = pcall(cjson.decode, s)
  if not ok or type(st) ~= 'table' then return nil end
  -- A due time is a finite number, as the JS side reads it (withState): a numeric string or
  -- 1e400 here was "later" to this script and "now" to the dispatcher, which claimed again at once.
  local n = st.next_attempt_at
  if n ~= cjson.null and (type(n) ~= 'number' or n ~= n or n == math.huge or n == -math.huge) then return nil end
  return st
end
`;

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

/**
 * CANCEL: KEYS = due, state keys…; ARGV = the ended state, how long it stays (ms), ids….
 * Each delivery's state ended and its place in the due set gone at once: no scan sees one
 * without the other.
 */
const CANCEL = script(`
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  redis.call('ZREM', KEYS[1], ARGV[i + 1])
end
return #KEYS - 1
`);

/** A finished delivery's state stays this long (ms), so no instance holding an old copy attempts it again. */
const ENDED_MS = 86_400_000;
const ENDED = JSON.stringify({ next_attempt_at: null });

/**
 * CLAIM: KEYS = state, lease, due; ARGV = owner, lease ms, now, the caller's state, id.
 * Returns {verdict, state}: ok (leased to the caller), busy (another holds it), later
 * (not due: its state), gone (finished). A state Redis no longer holds (it restarted
 * empty) or that is not one is put back from the caller's, so no retry is lost with it.
 */
const CLAIM = script(`${DECODE}
local cur = redis.call('GET', KEYS[1])
local st = decode(cur)
if not st then
  cur = ARGV[4]
  st = cjson.decode(cur)
  redis.call('SET', KEYS[1], cur)
end
if st.next_attempt_at == cjson.null then return {'gone', ''} end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then return {'busy', cur} end
local due = tonumber(st.next_attempt_at)
redis.call('ZADD', KEYS[3], 'NX', string.format('%.0f', due), ARGV[5])
if due > tonumber(ARGV[3]) then return {'later', cur} end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return {'ok', cur}
`);

/**
 * RELEASE: KEYS = state, lease, due; ARGV = owner, id, state, next due ('' when
 * finished), ms a finished state is kept. A delivery ended meanwhile (sent again by
 * hand) stays ended.
 */
const RELEASE = script(`${DECODE}
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[2])
local cur = decode(redis.call('GET', KEYS[1]))
if cur and cur.next_attempt_at == cjson.null then return 1 end
if ARGV[4] == '' then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[5])
  redis.call('ZREM', KEYS[3], ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[3])
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[2])
end
return 1
`);

/** SCAN: KEYS = due; ARGV = until, most, the state keys' full prefix. The ids due by `until` that have a state. */
const SCAN = script(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', tonumber(ARGV[4]), tonumber(ARGV[2]))
local r = {}
for _, id in ipairs(ids) do
  if redis.call('EXISTS', ARGV[3] .. id) == 1 then r[#r + 1] = id else redis.call('ZREM', KEYS[1], id) end
end
return r
`);

/**
 * RETIME: KEYS = due; ARGV = the caller's now, the longest wait the schedule gives (ms),
 * most, the state keys' full prefix, the lease keys' full prefix, then ids (none: those
 * the due set has furthest ahead). A due time is a time of day: one set while a clock
 * ran ahead (a VM started with it days out, then put right) is further ahead than any
 * wait from now, and would hold its retry back as long. Now is the later of the caller's
 * clock and Redis's (TIME): a clock behind, the caller's or Redis's, moves nothing that
 * a correct one set, nor anything sooner. Each delivery due after now + the longest wait,
 * not leased, is due again now + the wait its last outcome was given (none before a first
 * attempt; the longest when Redis was not given it, as after a fill from storage).
 * Without ids: the first `most` due after that (one look at the far end of the due set
 * while none is); a due time the state no longer has is put back where the state says.
 * Returns now, then id and state of each moved, and with ids of each within that.
 */
const RETIME = script(`${DECODE}
local t = redis.call('TIME')
local now = math.max(tonumber(ARGV[1]), tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local longest = tonumber(ARGV[2])
local limit = now + longest
local asked = #ARGV > 5
local ids = {}
if asked then
  for i = 6, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', limit), '+inf', 'LIMIT', 0, tonumber(ARGV[3]))
end
local r = {string.format('%.0f', now)}
for _, id in ipairs(ids) do
  local key = ARGV[4] .. id
  local cur = redis.call('GET', key)
  local st = decode(cur)
  if not cur then
    if not asked then redis.call('ZREM', KEYS[1], id) end
  elseif st and st.next_attempt_at ~= cjson.null and redis.call('EXISTS', ARGV[5] .. id) == 0 then
    local due = st.next_attempt_at
    if due > limit then
      local wait = longest
      local w = st.wait
      if st.attempt == 0 then
        wait = 0
      elseif type(w) == 'number' and w >= 0 and w < longest then
        wait = math.ceil(w)
      end
      st.next_attempt_at = now + wait
      cur = cjson.encode(st)
      redis.call('SET', key, cur)
      redis.call('ZADD', KEYS[1], string.format('%.0f', now + wait), id)
      r[#r + 1] = id
      r[#r + 1] = cur
    elseif asked then
      r[#r + 1] = id
      r[#r + 1] = cur
    else
      redis.call('ZADD', KEYS[1], string.format('%.0f', due), id)
    end
  end
end
return r
`);

/** Set once the fleet's queue holds what storage holds of unfinished deliveries. */
const SEEDED = 'wh:seeded';

export type Claim = { ok: true; d: DeliveryRecord } | { ok: false; next: DeliveryRecord | null };

/** What Redis is given of a delivery: its attempt count and due time, nothing it could send. */
const stateOf = (d: DeliveryRecord): string =>
  JSON.stringify({ attempt: d.attempt, next_attempt_at: d.next_attempt_at });

/**
 * What Redis is given of an attempt's outcome: its state, and for a retry the wait it was
 * given (its due time less the attempt's time, both read from one clock: the dispatcher's),
 * by which any instance puts it back within the schedule after a clock step (RETIME).
 */
function outcomeState(d: DeliveryRecord): string {
  const log = d.attempt_log;
  if (d.status !== 'failed' || d.next_attempt_at === null || log === undefined || log.attempt !== d.attempt)
    return stateOf(d);
  return JSON.stringify({
    attempt: d.attempt,
    next_attempt_at: d.next_attempt_at,
    wait: Math.max(0, d.next_attempt_at - log.at),
  });
}

/** What RETIME answers: the fleet's now, and the states of the deliveries it names. */
export interface Retimed {
  /** The later of the caller's clock and Redis's, as it ran. */
  now: number;
  /** Each delivery moved (and with ids, each asked for that is not leased), by id: its state. */
  states: Map<string, string>;
}

/**
 * The caller's copy of a delivery (from storage, or this instance's own attempts) with
 * what Redis says of it: its attempt count only between the copy's and the last allowed
 * (never back: resetting it in Redis repeats no attempt number), and its due time. Any
 * other field Redis holds is ignored; anything not a state leaves the copy as it is.
 */
export function withState(local: DeliveryRecord, raw: unknown): DeliveryRecord {
  let st: unknown;
  try {
    st = typeof raw === 'string' ? JSON.parse(raw) : null;
  } catch {
    return local;
  }
  if (typeof st !== 'object' || st === null || Array.isArray(st)) return local;
  const { attempt, next_attempt_at: next } = st as Record<string, unknown>;
  const last = Math.max(local.attempt, local.max_attempts - 1);
  const n = Number.isSafeInteger(attempt) ? Math.min(last, Math.max(local.attempt, attempt as number)) : local.attempt;
  const at = typeof next === 'number' && Number.isFinite(next) ? next : local.next_attempt_at;
  return n === local.attempt && at === local.next_attempt_at ? local : { ...local, attempt: n, next_attempt_at: at };
}

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
      const args = [...part.map((d) => d.id), ...part.map(stateOf), ...part.map((d) => d.next_attempt_at ?? 0)];
      await this.co.run(ADD, keys, args, 'lease', 5000);
    }
  }

  /** Leases `d` (the caller's copy) for an attempt; what it gets back is that copy, numbered as the fleet has it. */
  async claim(d: DeliveryRecord, now: number): Promise<Claim> {
    const keys = [stateKey(d.id), leaseKey(d.id), DUE];
    const args = [this.co.owner, this.leaseMs, now, stateOf(d), d.id];
    const r = await this.co.run(CLAIM, keys, args, 'lease', 5000);
    const [verdict, state] = Array.isArray(r) ? r : [];
    if (verdict === 'ok') return { ok: true, d: withState(d, state) };
    return { ok: false, next: verdict === 'later' ? withState(d, state) : null };
  }

  /** Ends the lease with the attempt's outcome; false when the lease was lost (held too long). */
  async release(d: DeliveryRecord): Promise<boolean> {
    const next = d.status === 'failed' && d.next_attempt_at !== null ? String(d.next_attempt_at) : '';
    const r = await this.co.run(
      RELEASE,
      [stateKey(d.id), leaseKey(d.id), DUE],
      [this.co.owner, d.id, outcomeState(d), next, ENDED_MS],
      'lease',
      5000,
    );
    return r === 1;
  }

  /**
   * Ends deliveries for the whole fleet (sent again by hand, or their endpoint deleted): no
   * instance attempts them again. 500 a call, one call after another, so a large backlog
   * does not queue thousands of calls ahead of the rate limiter's on the connection.
   */
  async cancel(ids: readonly string[]): Promise<void> {
    for (let i = 0; i < ids.length; i += 500) {
      const part = ids.slice(i, i + 500);
      await this.co.run(CANCEL, [DUE, ...part.map(stateKey)], [ENDED, ENDED_MS, ...part], 'lease', 5000);
    }
  }

  /** The ids of deliveries due by `until` (any instance's), the most overdue first, `most` from `from` on: what they are is read from storage. */
  async due(until: number, most = 1000, from = 0): Promise<string[]> {
    const r = await this.co.run(SCAN, [DUE], [until, most, this.co.key(STATE), from], 'lease', 5000);
    return Array.isArray(r) ? r.filter((id): id is string => typeof id === 'string' && DELIVERY_ID.test(id)) : [];
  }

  /**
   * Puts back within the schedule what is due further ahead than `longestMs` from now (the
   * later of `now`, the caller's clock, and Redis's): `ids`, or else the first `most` the
   * due set has that far ahead. See RETIME.
   */
  async retime(now: number, longestMs: number, most: number, ids: readonly string[] = []): Promise<Retimed> {
    const r = await this.co.run(
      RETIME,
      [DUE],
      [now, longestMs, most, this.co.key(STATE), this.co.key(leaseKey('')), ...ids],
      'lease',
      5000,
    );
    const out: Retimed = { now, states: new Map() };
    if (!Array.isArray(r)) return out;
    const at = Number(r[0]);
    if (Number.isFinite(at)) out.now = at;
    for (let i = 1; i + 1 < r.length; i += 2) {
      const id = r[i];
      const state = r[i + 1];
      if (typeof id === 'string' && DELIVERY_ID.test(id) && typeof state === 'string') out.states.set(id, state);
    }
    return out;
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
 * holder of <prefix>fanout, renewed on every poll; another takes over when it expires.
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
      const r = await this.co.run(LEAD, ['fanout'], [this.co.owner, this.ttlMs], 'fanout', 2000);
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
    await this.co.run(RESIGN, ['fanout'], [this.co.owner], 'fanout', 1000).catch(() => {});
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
