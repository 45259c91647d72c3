import { script } from './script.js';

/*
 * The fleet's shared token buckets, one Redis hash each: tok (tokens in the bucket),
 * ts (ms of Redis's clock when tok was last brought up to date) and out (tokens handed
 * out in leases and not yet given back or expired). Leases are members of a sorted
 * set beside the hash, "<lease id>:<tokens>" scored by the instant they expire.
 *
 * A bucket refills at `rate` tokens a millisecond up to `cap - out`: tokens held in
 * leases count as still in the bucket, so the bucket plus every lease never holds more
 * than one bucket would. A lease's tokens that are neither spent nor given back by its
 * expiry are taken as spent. Time is Redis's own (TIME), so instances' clocks never
 * matter. Each script is atomic: no other command runs between its reads and writes.
 *
 * What the hash holds is read as untrusted (whoever can write to Redis can write it):
 * tok is kept within [0, cap - out], out within [0, cap], ts at most now; a value that
 * is not a finite number reads as the strict one (tok 0, out cap, ts now), a lease
 * member with no token count as 0 tokens. A missing hash is a fresh, full bucket, so one
 * write (HSET tok 1e12, DEL) is worth at most one bucket; a loop of them is bounded by
 * each instance's own ceiling (buckets.ts), not here.
 */

const COMMON = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A field as a number: absent reads as fresh, anything not a finite number as bad.
local function field(v, fresh, bad)
  if v == false or v == nil then return fresh end
  local x = tonumber(v)
  if x == nil or x ~= x or x == math.huge or x == -math.huge then return bad end
  return x
end
local function tokens(m)
  return tonumber(string.match(m, ':(%d+)$')) or 0
end
local function state(b, l, cap, rate)
  local h = redis.call('HMGET', b, 'tok', 'ts', 'out')
  local tok = field(h[1], cap, 0)
  local ts = math.min(now, field(h[2], now, now))
  local out = math.max(0, math.min(cap, field(h[3], 0, cap)))
  local gone = redis.call('ZRANGEBYSCORE', l, '-inf', now)
  if #gone > 0 then
    for _, m in ipairs(gone) do out = out - tokens(m) end
    redis.call('ZREMRANGEBYSCORE', l, '-inf', now)
    if out < 0 then out = 0 end
  end
  local room = cap - out
  if tok > room then tok = room end
  if tok < 0 then tok = 0 end
  if now > ts then
    if tok < room then tok = math.min(room, tok + (now - ts) * rate) end
    ts = now
  end
  return tok, ts, out
end
local function save(b, l, tok, ts, out, cap, rate)
  redis.call('HSET', b, 'tok', tostring(tok), 'ts', ts, 'out', out)
  -- Kept until it would be full again (and no lease is left), then it is a fresh bucket anyway.
  local ttl = math.ceil((cap - tok) / rate) + 2000
  redis.call('PEXPIRE', b, ttl)
  redis.call('PEXPIRE', l, ttl)
end
`;

/**
 * TAKE: leases for the requests of one moment, in groups (a request's one or two
 * buckets). KEYS = bucket, leases, … for every bucket of every group in order;
 * ARGV = lease id, lease ms, group count, then per group its bucket count and per
 * bucket: cap, rate (tokens/ms), tokens wanted ahead, tokens needed now (requests
 * waiting). All or nothing within a group: when any of its buckets holds less than
 * one token, none of them gives one. What is needed now is granted as far as the
 * bucket holds; what is wanted ahead shrinks as the bucket drains, to at most an
 * eighth of what it holds.
 * Returns per bucket: tokens granted, tokens left (a string: a fraction), ms until a
 * whole token refills (0 when granted), and, when none was granted but tokens are out
 * in leases (they may come back unspent), ms until the last of those leases ends (0
 * otherwise): until then one bucket might still admit, so the caller asks again rather
 * than refuse. A lease is "<id>:<bucket's place>:<tokens>".
 */
export const TAKE = script(`${COMMON}
local id = ARGV[1]
local lease = tonumber(ARGV[2])
local groups = tonumber(ARGV[3])
local a = 4
local b = 0
local r = {}
for g = 1, groups do
  local n = tonumber(ARGV[a])
  a = a + 1
  local s = {}
  local short = false
  for i = 1, n do
    local cap, rate, want, need = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    a = a + 4
    local k = b + i
    local tok, ts, out = state(KEYS[2 * k - 1], KEYS[2 * k], cap, rate)
    s[i] = { cap, rate, math.max(need, math.min(want, math.floor(tok / 8))), tok, ts, out }
    if tok < 1 - 1e-9 then short = true end
  end
  for i = 1, n do
    local cap, rate, want, tok, ts, out = unpack(s[i])
    local k = b + i
    local grant = 0
    if not short then
      grant = math.max(1, math.min(want, math.floor(tok + 1e-9)))
      tok = tok - grant
      out = out + grant
      redis.call('ZADD', KEYS[2 * k], now + lease, id .. ':' .. k .. ':' .. grant)
    end
    save(KEYS[2 * k - 1], KEYS[2 * k], tok, ts, out, cap, rate)
    local waitMs = 0
    local outMs = 0
    if grant == 0 and tok < 1 - 1e-9 then
      waitMs = math.ceil((1 - tok) / rate)
      -- Tokens out in leases are spent or come back by the time their leases end: one
      -- bucket might still admit, so the caller waits (at most until the last one ends).
      if out >= 1 then
        local last = redis.call('ZRANGE', KEYS[2 * k], -1, -1, 'WITHSCORES')
        if #last == 2 then outMs = math.max(1, math.min(lease, tonumber(last[2]) - now)) end
      end
    end
    r[#r + 1] = grant
    r[#r + 1] = tostring(tok)
    r[#r + 1] = waitMs
    r[#r + 1] = outMs
  end
  b = b + n
end
return r
`);

/**
 * GIVE: gives back what leases did not spend. KEYS = bucket, leases, … (pairs);
 * ARGV = per bucket: lease member, tokens unspent, cap, rate. A lease Redis already
 * expired gives nothing back (its tokens were taken as spent). Returns nothing.
 */
export const GIVE = script(`${COMMON}
for i = 1, #KEYS / 2 do
  local b, l = KEYS[2 * i - 1], KEYS[2 * i]
  local member = ARGV[(i - 1) * 4 + 1]
  local back = tonumber(ARGV[(i - 1) * 4 + 2])
  local cap = tonumber(ARGV[(i - 1) * 4 + 3])
  local rate = tonumber(ARGV[(i - 1) * 4 + 4])
  if redis.call('ZREM', l, member) == 1 then
    local tok, ts, out = state(b, l, cap, rate)
    out = out - tokens(member)
    if out < 0 then out = 0 end
    tok = math.min(cap - out, tok + math.max(0, back))
    save(b, l, tok, ts, out, cap, rate)
  end
end
return 0
`);

/**
 * QUOTA: counts uses against quota windows. KEYS = one counter per key and window;
 * ARGV = per key: uses to add, window ms. Returns each counter's total after adding:
 * exactly one caller sees a threshold crossed, however many instances count.
 */
export const QUOTA = script(`
local r = {}
for i = 1, #KEYS do
  local v = redis.call('INCRBY', KEYS[i], ARGV[2 * i - 1])
  if v == tonumber(ARGV[2 * i - 1]) then redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[2 * i]) * 2) end
  r[i] = v
end
return r
`);

/**
 * ALIVE: marks an instance alive and counts the fleet. KEYS = the set of instances;
 * ARGV = this instance's id, the window (ms) within which an instance counts as alive.
 * Scores are Redis's clock, so instances' clocks never matter. Returns the count.
 */
export const ALIVE = script(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('PEXPIRE', KEYS[1], window)
return redis.call('ZCARD', KEYS[1])
`);
