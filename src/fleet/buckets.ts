import { randomFillSync } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { bucketOf, type KeyRecord } from '../auth/key.js';
import type { Config } from '../config/index.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/index.js';
import { bucketHash, hashOut } from '../ratelimit/bucket-hash.js';
import { headersFor, type QuotaWarning, refusal, THRESHOLDS, WINDOW_NAME } from '../ratelimit/limiter.js';
import { type Choice, emptyChoice, type Policy, PolicySet } from '../ratelimit/policy.js';
import type { LimitDecision, RequestLimiter } from '../ratelimit/types.js';
import { type Coordinator, Unavailable } from './redis.js';
import { GIVE, QUOTA, TAKE } from './scripts.js';
import { type ShareBucket, shareDecision, shareOf } from './share.js';

/** A lease is spent within this locally; Redis holds it a little longer, so it never expires there first. */
export const LEASE_MS = 1000;
/** Long enough that a lease given back at the first sweep past LEASE_MS, on a loaded host, is still held in Redis. */
const LEASE_GRACE_MS = 500;
/** While tokens are out in leases, an empty bucket is asked again this often. */
const ASK_MS = 20;
/** After Redis failed to answer, decisions go straight to on_unavailable for this long before asking again. */
const PROBE_MS = 200;
/**
 * The most tokens one lease asks for (Redis grants at most an eighth of what the
 * bucket holds): a busy key's 256 decisions cost one round trip (bench:fleet).
 */
const MAX_BATCH = 256;
/** The first lease of a bucket asks for this many (the bucket's own eighth caps it). */
const FIRST_WANT = 4;
/**
 * Each instance's own ceiling on what Redis grants it may run ahead of Redis's clock by
 * this much refill: the two clocks start a lease's time at different instants.
 */
const CEILING_SLACK_MS = LEASE_MS;
/**
 * Idle buckets kept for what they still remember (a ceiling or an outage's share not yet
 * full again), at most: past this, the sweep evicts those that would be full soonest, so
 * many client addresses cannot grow memory without bound, Redis up or down. An evicted
 * ceiling is forgotten (it starts full if its bucket comes back: it only bounds what a
 * tampered Redis grants); an evicted share's debt goes into the sketch (SKETCH_CELLS).
 */
const CEILINGS_KEPT = 50_000;
/**
 * Cells of each of the two rows of the sketch of evicted shares (Float64: 2 MB, made at
 * the first eviction). Each cell holds the latest instant an evicted share hashed there
 * would be full again; a share made afterwards starts from the earlier of its two cells.
 */
const SKETCH_CELLS = 1 << 17;
/** Leases whose outage spending the sweep charges to Redis at most, each sweep (one TAKE for all of them). */
const DEBTS_PER_SWEEP = 64;
/** Added to when a lease owing a debt is full again (sweep): such leases are evicted last. */
const DEBT_LAST_MS = 1e15;
/** How often unspent leases are given back and quota counts sent. */
const SWEEP_MS = 100;
/** A lease no decision has drawn on for this long goes back early: its tokens are of more use elsewhere. */
const IDLE_MS = 100;
/**
 * A request that finds its bucket empty while tokens are out in leases waits at most
 * this for them (the lease return time): a lease not drawn on goes back within
 * IDLE_MS plus a sweep, and a spent one is reported with its holder's next call or sweep.
 */
export const RETURN_MS = IDLE_MS + SWEEP_MS + 150;
/**
 * A request waits on at most this many lease calls before it is refused: many
 * requests waiting on one bucket near empty share its grants one round trip at a
 * time (each call grants at least one token or says the bucket is empty).
 */
const MAX_TRIES = 64 + Math.ceil(RETURN_MS / ASK_MS);

/** This instance's lease on one shared bucket. */
interface Lease {
  readonly name: string;
  readonly leases: string;
  policy: Policy;
  /** Tokens held, to spend before `until` (local monotonic ms). */
  held: number;
  until: number;
  /** When a decision last drew on this lease (local monotonic ms). */
  used: number;
  member: string;
  /** What the shared bucket held after the last grant, for the headers. */
  left: number;
  /** Redis said the bucket is empty: refused here, without asking, until then. */
  emptyUntil: number;
  /** When the shared bucket refills a whole token (local monotonic ms), for retry-after. */
  refillAt: number;
  /** Tokens the next lease asks for: doubles while leases are spent in time, halves when not. */
  want: number;
  /** Requests waiting for this bucket's next lease: the next one asks for at least as many. */
  waiting: number;
  fetching: Promise<void> | null;
  /** Redis said the bucket is empty but tokens are out in leases: ask again then (local monotonic ms). */
  askAt: number;
  /** The wait until askAt, shared by every request waiting on this bucket. */
  nap: Promise<void> | null;
  /** This instance's share of the bucket while Redis cannot answer (on_unavailable: local). */
  share: ShareBucket | null;
  /**
   * Tokens admitted from the share that Redis has not been charged for: the next TAKE
   * of this bucket (a request's, or the sweep's) charges them to the shared bucket
   * before anything is granted, so the spending of an outage or a stall counts there.
   */
  debt: number;
  /**
   * What this instance may still take from Redis, a bucket of the policy's own counted
   * here (tokens, at `ceilingAt` local monotonic ms): whatever Redis holds or answers,
   * this instance never holds more than one bucket would grant it.
   */
  ceiling: number;
  ceilingAt: number;
}

interface Give {
  lease: Lease;
  member: string;
  back: number;
}

const UNAVAILABLE_OPEN: LimitDecision = { allowed: true, headers: [], retryAfter: 0, policy: null };
const UNAVAILABLE_CLOSED: LimitDecision = {
  allowed: false,
  headers: ['retry-after', '1'],
  retryAfter: 1,
  policy: null,
  unavailable: true,
};

/**
 * Token buckets shared by every gateway of a fleet through Redis, exact: the fleet
 * never admits more than one bucket would. Each instance leases tokens from the
 * shared bucket (scripts.ts: TAKE) and spends them locally, so a busy key costs a
 * fraction of a round trip per request; grants shrink as the bucket drains, down to
 * one token at a time, and what a lease did not spend within LEASE_MS is given back
 * (GIVE) or, if the instance died, taken as spent when the lease expires in Redis.
 * A bucket Redis says is empty is refused here, without a call, until its next token;
 * one that is empty while tokens are out in leases is asked again until those leases
 * end (they may come back unspent), so nothing one bucket would admit is refused.
 * Redis late by more than coordination.timeout_ms (its own lateness, lateness.ts), or
 * down: on_unavailable decides (local enforces this instance's share of each bucket,
 * open admits, closed answers 503), counted in wakegate_coordination_unavailable_total;
 * what a share admitted is charged to the shared bucket by the next TAKE (Lease.debt),
 * so the fleet admits about one bucket over an outage or a stall and after it, not two.
 * Quota uses are counted in Redis (QUOTA), so a threshold is crossed once per fleet.
 * Redis is not trusted with the bound: a grant is cut to what was asked and to this
 * instance's own ceiling (a bucket of the same policy, refilled by the local clock, with
 * what leases give back), so someone writing to Redis (HSET, DEL, in a loop) makes an
 * instance admit at most its burst plus its refill (and CEILING_SLACK_MS of refill):
 * a fleet of N instances at most N buckets' worth, never unbounded.
 */
export class FleetLimiter implements RequestLimiter {
  private readonly set: PolicySet;
  /** Reused by every decision (read before any wait). */
  private readonly c: Choice;
  /** Leases by bucket kind (tag), then id: a decision finds its lease without making a string. */
  private readonly leases = new Map<string, Map<string, Lease>>();
  private readonly gives: Give[] = [];
  /** Uses per key bucket (bucketOf: a rotated key counts with the one it replaced) since the last sweep, for quotas. */
  private readonly uses = new Map<string, { key: KeyRecord; p: Policy; n: number; window: number }>();
  private seq = 0;
  /** Leases asked for in this turn of the event loop, sent together. */
  private asks: { need: Lease[]; resolve: () => void; reject: (e: unknown) => void }[] = [];
  private timer: NodeJS.Timeout | null = null;
  private sweeping: Promise<void> | null = null;
  private readonly mode: 'local' | 'open' | 'closed';
  /** Redis failed to answer: until then (local monotonic ms) decisions follow on_unavailable without asking. */
  private downUntil = 0;
  private readonly co: Coordinator;
  private readonly metrics: Metrics;
  private readonly log: Logger;
  private readonly onWarning: (w: QuotaWarning) => void;
  /** Instances of the fleet alive in the last minute (alive.ts), for the local share. */
  private readonly instances: () => number;
  /**
   * Debts of shares evicted under table pressure (two rows of SKETCH_CELLS, by a keyed
   * hash of the bucket's name; null until the first eviction): per cell, the latest
   * instant (local monotonic ms) an evicted share hashed there would be full again.
   */
  private sketch: Float64Array | null = null;
  /** The sketch's hash key, random per process: nobody can pick names that share cells. */
  private readonly seed = randomFillSync(new Int32Array(2));

  constructor(o: {
    cfg: Pick<Config, 'rate_limits' | 'environments' | 'coordination'>;
    co: Coordinator;
    metrics: Metrics;
    log: Logger;
    /** Hears each quota threshold crossed (consumer.quota.warning). */
    onWarning?: (w: QuotaWarning) => void;
    instances?: () => number;
  }) {
    const cfg = o.cfg;
    this.co = o.co;
    this.metrics = o.metrics;
    this.log = o.log;
    this.onWarning = o.onWarning ?? (() => {});
    this.instances = o.instances ?? (() => 1);
    this.set = new PolicySet(cfg);
    this.c = emptyChoice(this.set.def);
    this.mode = cfg.coordination.on_unavailable;
  }

  check(
    key: KeyRecord | null,
    clientIp: string,
    extraPolicy: string | null,
    now: number,
  ): LimitDecision | Promise<LimitDecision> {
    const c = this.set.choose(key, clientIp, extraPolicy, this.c);
    const l1 = this.lease(c.tag1, c.id1, c.p1);
    const l2 = c.p2 === null ? null : this.lease(c.tag2, c.id2, c.p2);
    const d = this.local(l1, l2, key, c.p1, now);
    if (d !== null) return d;
    // Redis just failed to answer: on_unavailable decides at once, without a promise.
    if (performance.now() < this.downUntil) return this.unavailable(l1, l2, key, c.p1, now);
    return this.remote(l1, l2, key, c.p1, now);
  }

  refused(clientIp: string, now: number): LimitDecision | Promise<LimitDecision> {
    const l = this.lease('r', clientIp, this.set.unauth);
    const d = this.local(l, null, null, null, now) ?? this.soon(l, now);
    return d ?? this.remote(l, null, null, null, now);
  }

  private lease(tag: string, id: string, p: Policy): Lease {
    let kind = this.leases.get(tag);
    if (kind === undefined) {
      kind = new Map();
      this.leases.set(tag, kind);
    }
    let l = kind.get(id);
    if (l === undefined) {
      const b = `wg:b:${tag}:${id}`;
      l = {
        name: b,
        leases: `${b}:l`,
        policy: p,
        held: 0,
        until: 0,
        used: 0,
        member: '',
        left: p.burst,
        emptyUntil: 0,
        refillAt: 0,
        want: FIRST_WANT,
        waiting: 0,
        fetching: null,
        askAt: 0,
        nap: null,
        share: null,
        debt: 0,
        ceiling: p.burst,
        ceilingAt: performance.now(),
      };
      kind.set(id, l);
    } else if (l.policy !== p) {
      l.policy = p;
    }
    return l;
  }

  /** A decision from the leases held, or null when a lease must be taken first. */
  private local(
    l1: Lease,
    l2: Lease | null,
    key: KeyRecord | null,
    p1: Policy | null,
    now: number,
  ): LimitDecision | null {
    const t = performance.now();
    const ok1 = l1.held >= 1 && t < l1.until;
    const ok2 = l2 === null || (l2.held >= 1 && t < l2.until);
    if (ok1 && ok2) {
      l1.held--;
      l1.used = t;
      if (l2 !== null) {
        l2.held--;
        l2.used = t;
      }
      if (key !== null && p1 !== null) this.count(key, p1, now);
      const tok1 = l1.left + l1.held;
      if (l2 === null)
        return { allowed: true, headers: headersFor(l1.policy, tok1, null, 0, false), retryAfter: 0, policy: null };
      const tok2 = l2.left + l2.held;
      return {
        allowed: true,
        headers: headersFor(l1.policy, tok1, l2.policy, tok2, tok2 < tok1),
        retryAfter: 0,
        policy: null,
      };
    }
    const e1 = !ok1 && t < l1.emptyUntil;
    const e2 = l2 !== null && !ok2 && t < l2.emptyUntil;
    if (!e1 && !e2) return null;
    // Headers tell the refill's wait (tokens that may come back from leases are not promised).
    const w1 = e1 ? 1 - Math.max(0, l1.refillAt - t) * l1.policy.rate : l1.left + l1.held;
    if (l2 === null) return refusal(l1.policy, w1, null, 0, false);
    const w2 = e2 ? 1 - Math.max(0, l2.refillAt - t) * l2.policy.rate : l2.left + l2.held;
    return refusal(l1.policy, w1, l2.policy, w2, !e1 || (e2 && l2.refillAt > l1.refillAt));
  }

  private async remote(
    l1: Lease,
    l2: Lease | null,
    key: KeyRecord | null,
    p1: Policy | null,
    now: number,
  ): Promise<LimitDecision> {
    l1.waiting++;
    if (l2 !== null) l2.waiting++;
    let giveUp = 0;
    try {
      for (let i = 0; i < MAX_TRIES; i++) {
        if (performance.now() < this.downUntil) return this.unavailable(l1, l2, key, p1, now);
        const pending = l1.fetching ?? l2?.fetching ?? null;
        try {
          await (pending ?? this.take(l1, l2));
        } catch (e) {
          // Redis answered, but not as a bucket does (a key of another type, a reply that is
          // not one): what it holds is not to be trusted, and Redis is not down. Decided by
          // this instance's share whatever on_unavailable says, so `open` lifts no limit.
          if (!(e instanceof Unavailable)) return this.byShare(l1, l2, key, p1, now);
          this.downUntil = performance.now() + PROBE_MS;
          return this.unavailable(l1, l2, key, p1, now);
        }
        const d = this.local(l1, l2, key, p1, now);
        if (d) return d;
        // Empty, but tokens are out in leases that may come back unspent: one bucket
        // might still admit this request, so it waits for them (never refused early).
        const l = l2 !== null && l2.askAt > l1.askAt ? l2 : l1;
        const t = performance.now();
        if (l.askAt > t) {
          if (giveUp === 0) giveUp = t + RETURN_MS;
          else if (t >= giveUp) break;
          await this.nap(l, t);
        }
      }
    } finally {
      l1.waiting--;
      if (l2 !== null) l2.waiting--;
    }
    // Others kept spending each grant first: refuse rather than wait on (never over-admit).
    const t = performance.now();
    const w = (l: Lease) => 1 - Math.max(0, l.refillAt - t) * l.policy.rate;
    if (l2 === null) return refusal(l1.policy, w(l1), null, 0, false);
    return refusal(l1.policy, w(l1), l2.policy, w(l2), l2.refillAt > l1.refillAt);
  }

  /** While Redis just failed to answer, the on_unavailable decision for an unauthenticated address; else null. */
  private soon(l: Lease, now: number): LimitDecision | null {
    return performance.now() < this.downUntil ? this.unavailable(l, null, null, null, now) : null;
  }

  /** The wait until a bucket is worth asking again, one timer for all its waiting requests. */
  private nap(l: Lease, t: number): Promise<void> {
    if (l.nap === null) {
      l.nap = new Promise<void>((resolve) => {
        setTimeout(() => {
          l.nap = null;
          resolve();
        }, l.askAt - t);
      });
    }
    return l.nap;
  }

  /** A decision while Redis cannot answer: on_unavailable (local: this instance's share of each bucket). */
  private unavailable(
    l1: Lease,
    l2: Lease | null,
    key: KeyRecord | null,
    p1: Policy | null,
    now: number,
  ): LimitDecision {
    if (this.mode !== 'local') {
      this.metrics.coordinationUnavailable.labels(this.mode === 'open' ? 'admitted' : 'refused').inc();
      return this.mode === 'open' ? UNAVAILABLE_OPEN : UNAVAILABLE_CLOSED;
    }
    return this.byShare(l1, l2, key, p1, now);
  }

  /** This instance's share of each bucket (and its ceiling) decides, as on_unavailable: local does. */
  private byShare(l1: Lease, l2: Lease | null, key: KeyRecord | null, p1: Policy | null, now: number): LimitDecision {
    const t = performance.now();
    const n = Math.max(1, this.instances());
    // Tokens still held in a lease are spent from it (local()) until it ends: the share is of the rest.
    l1.share = this.shareFor(l1, n, t);
    if (l2 !== null) l2.share = this.shareFor(l2, n, t);
    let d = shareDecision(l1.share, l2?.share ?? null);
    // What the share admits counts under the ceiling too: Redis failing on purpose lifts nothing.
    if (d.allowed && !this.spendCeilings(l1, l2, t)) d = refusal(l1.policy, Math.max(0, l1.ceiling), null, 0, false);
    if (d.allowed) {
      // Redis never heard of it: charged to the shared bucket at the next TAKE.
      l1.debt++;
      if (l2 !== null) l2.debt++;
    }
    this.metrics.coordinationUnavailable.labels(d.allowed ? 'admitted' : 'refused').inc();
    if (d.allowed && key !== null && p1 !== null) this.count(key, p1, now);
    return d;
  }

  /**
   * `l`'s share, brought up to `t`. A new one starts at most where the sketch says an
   * evicted share of this bucket would be now: the sweep evicting a share under table
   * pressure (its debt folded into the sketch) never hands the bucket a fresh one.
   */
  private shareFor(l: Lease, n: number, t: number): ShareBucket {
    if (l.share !== null) return shareOf(l.share, l.policy, n, l.left, t);
    const s = shareOf(null, l.policy, n, l.left, t);
    if (this.sketch !== null) {
      const owed = this.owed(l.name);
      if (owed > t) s.tokens = Math.max(0, Math.min(s.tokens, s.policy.burst - (owed - t) * s.policy.rate));
    }
    return s;
  }

  /** The sketch's two cells for bucket `name` (the sketch made). */
  private cells(name: string): [number, number] {
    bucketHash(this.seed[0] as number, this.seed[1] as number, 'f', name);
    return [(hashOut.h1 >>> 0) % SKETCH_CELLS, SKETCH_CELLS + ((hashOut.h2 >>> 1) % SKETCH_CELLS)];
  }

  /** When an evicted share of bucket `name` is full again, at the latest (the earlier of its two cells). */
  private owed(name: string): number {
    const sk = this.sketch as Float64Array;
    const [c1, c2] = this.cells(name);
    return Math.min(sk[c1] as number, sk[c2] as number);
  }

  /** Remembers that a share of bucket `name`, evicted, is full again at `fullAt`. */
  private fold(name: string, fullAt: number): void {
    if (this.sketch === null) this.sketch = new Float64Array(2 * SKETCH_CELLS).fill(Number.NEGATIVE_INFINITY);
    const sk = this.sketch;
    for (const c of this.cells(name)) if (fullAt > (sk[c] as number)) sk[c] = fullAt;
  }

  /**
   * Takes a lease on whichever of the buckets holds no usable token. The requests of
   * one turn of the event loop share one call (one round trip for all of them).
   */
  private take(l1: Lease, l2: Lease | null): Promise<void> {
    const t = performance.now();
    const need = [l1, l2].filter((l): l is Lease => l !== null && !(l.held >= 1 && t < l.until));
    for (const l of need) this.retire(l);
    const p = new Promise<void>((resolve, reject) => {
      this.asks.push({ need, resolve, reject });
    });
    if (this.asks.length === 1) setImmediate(() => this.flush());
    const done = p.finally(() => {
      for (const l of need) if (l.fetching === done) l.fetching = null;
    });
    for (const l of need) l.fetching = done;
    return done;
  }

  private flush(): void {
    const asks = this.asks.splice(0);
    const id = `${this.co.owner}.${(++this.seq).toString(36)}`;
    const keys: string[] = [];
    const args: (string | number)[] = [id, LEASE_MS + LEASE_GRACE_MS, asks.length];
    /** Per bucket asked, the most Redis may grant: what was asked. */
    const asked: number[] = [];
    /** Per bucket asked, the debt it pays first (Lease.debt, as sent). */
    const paying: number[] = [];
    for (const a of asks) {
      args.push(a.need.length);
      for (const l of a.need) {
        keys.push(l.name, l.leases);
        // Needed now: the debt, then a token for each request waiting (the sweep's call: the debt only).
        const debt = Math.floor(l.debt);
        const need = Math.max(1, l.waiting + debt);
        args.push(l.policy.burst, l.policy.rate, l.want, need);
        asked.push(Math.max(l.want, need));
        paying.push(debt);
      }
    }
    // Leases ended here go back in the same write, ahead of the take: Redis counts out only what is still out.
    const gives = this.gives.splice(0);
    if (gives.length > 0) void this.sendGives(gives);
    // Sent now: each lease is spent within LEASE_MS of this, before Redis (whose clock starts later) expires it.
    const t = performance.now();
    this.co.run(TAKE, keys, args, 'take').then(
      (r) => {
        if (!Array.isArray(r) || r.length < asked.length * 4) {
          const e = new Error('a bucket lease reply that is not one');
          for (const ask of asks) ask.reject(e);
          return;
        }
        const a = r as unknown[];
        let k = 0;
        for (const ask of asks) {
          for (const l of ask.need) {
            const at = performance.now();
            const granted = Math.floor(bounded(a[k * 4], 0, asked[k] as number));
            // The debt is paid first, out of the grant: those tokens are spent already (by the share).
            const paid = Math.min(granted, paying[k] as number);
            l.debt = Math.max(0, l.debt - paid);
            const redisGrant = granted - paid;
            const grant = this.underCeiling(l, redisGrant, at);
            l.left = bounded(a[k * 4 + 1], 0, l.policy.burst);
            // Redis answers: what was decided locally while it could not is over.
            l.share = null;
            if (grant > 0 && grant === redisGrant) {
              l.held = grant;
              l.until = t + LEASE_MS;
              l.used = t;
              // Redis's member names the whole grant: given back, what is unspent of `grant` counts again.
              l.member = `${id}:${k + 1}:${granted}`;
              l.emptyUntil = 0;
              l.askAt = 0;
            } else if (redisGrant === 0 && paid > 0) {
              // All of it paid the debt: the lease goes back at once, nothing unspent; ask again.
              this.gives.push({ lease: l, member: `${id}:${k + 1}:${granted}`, back: 0 });
              l.emptyUntil = 0;
              l.askAt = 0;
            } else if (grant > 0) {
              // More than this instance's ceiling: hold what it allows, let Redis's lease expire.
              l.held = grant;
              l.until = t + LEASE_MS;
              l.used = t;
              l.member = '';
              l.emptyUntil = 0;
              l.askAt = 0;
            } else {
              const oneToken = Math.ceil(1 / l.policy.rate) + 1;
              const ceilingMs = redisGrant >= 1 ? Math.ceil((1 - l.ceiling) / l.policy.rate) : 0;
              const waitMs = Math.max(bounded(a[k * 4 + 2], 0, oneToken), ceilingMs);
              const outMs = redisGrant >= 1 ? 0 : bounded(a[k * 4 + 3], 0, LEASE_MS + LEASE_GRACE_MS);
              l.refillAt = at + waitMs;
              if (outMs > 0) {
                // Tokens out in leases: ask again soon (sooner than a refill, never after the leases end).
                l.askAt = at + Math.min(ASK_MS, outMs, Math.max(1, waitMs));
                l.emptyUntil = 0;
              } else {
                l.askAt = 0;
                if (waitMs > 0) l.emptyUntil = at + waitMs;
              }
            }
            k++;
          }
          ask.resolve();
        }
      },
      (e: unknown) => {
        // Written and not answered in time, on a connection still up: Redis runs it when it
        // catches up (a stall), so the debt it carried counts as paid; charged again with each
        // probe of a stall, it would drain the bucket several times over. Not sent (not
        // connected), lost with the connection, or refused by the script: still owed.
        if (e instanceof Unavailable && this.co.ready) {
          let k = 0;
          for (const ask of asks)
            for (const l of ask.need) {
              l.debt = Math.max(0, l.debt - (paying[k] as number));
              k++;
            }
        }
        for (const ask of asks) ask.reject(e);
      },
    );
  }

  /**
   * The end of a lease: at the next sweep Redis hears of it (its unspent tokens go
   * back, and the bucket stops counting it as held); the next lease is sized by how it went.
   */
  private retire(l: Lease): void {
    if (l.member === '' && l.held === 0) return;
    const back = Math.floor(l.held);
    // What was not spent counts again under this instance's ceiling, as Redis counts it again.
    this.refillCeiling(l, performance.now());
    l.ceiling = Math.min(l.policy.burst, l.ceiling + back);
    if (l.member !== '') this.gives.push({ lease: l, member: l.member, back });
    if (back >= 1) {
      l.want = Math.max(1, l.want >> 1);
    } else {
      l.want = Math.min(MAX_BATCH, l.want * 2);
    }
    l.held = 0;
    l.member = '';
  }

  /** Brings `l`'s ceiling up to `t` (local monotonic ms). */
  private refillCeiling(l: Lease, t: number): void {
    const p = l.policy;
    if (t > l.ceilingAt) {
      l.ceiling = Math.min(p.burst, l.ceiling + (t - l.ceilingAt) * p.rate);
      l.ceilingAt = t;
    } else if (l.ceiling > p.burst) l.ceiling = p.burst;
  }

  /** Of `grant` tokens Redis granted, what `l`'s ceiling allows (taken from it). */
  private underCeiling(l: Lease, grant: number, t: number): number {
    this.refillCeiling(l, t);
    const room = Math.floor(l.ceiling + CEILING_SLACK_MS * l.policy.rate + 1e-9);
    const g = Math.max(0, Math.min(grant, room));
    l.ceiling -= g;
    return g;
  }

  /** Takes one token from each lease's ceiling if each has one (within the slack); else takes none. */
  private spendCeilings(l1: Lease, l2: Lease | null, t: number): boolean {
    const room = (l: Lease) => {
      this.refillCeiling(l, t);
      return l.ceiling + CEILING_SLACK_MS * l.policy.rate + 1e-9 >= 1;
    };
    if (!room(l1) || (l2 !== null && !room(l2))) return false;
    l1.ceiling--;
    if (l2 !== null) l2.ceiling--;
    return true;
  }

  /** When `l`'s share (while Redis is away) is full again: `t` if it has none or it is full. */
  private shareFullAt(l: Lease, t: number): number {
    if (l.share === null) return t;
    const s = shareOf(l.share, l.policy, l.share.of, l.left, t);
    return s.tokens >= s.policy.burst ? t : t + (s.policy.burst - s.tokens) / s.policy.rate;
  }

  /**
   * When `l` remembers nothing one would miss (its ceiling and its share full again):
   * at `t` or before, forgetting it loses nothing.
   */
  private fullAt(l: Lease, t: number): number {
    this.refillCeiling(l, t);
    const c = l.ceiling >= l.policy.burst ? t : t + (l.policy.burst - l.ceiling) / l.policy.rate;
    // A debt not yet charged to Redis is lost with the lease: never free to forget, evicted last.
    return Math.max(c, this.shareFullAt(l, t)) + (l.debt >= 1 ? DEBT_LAST_MS : 0);
  }

  /** Whether the sweep may forget `l` (idle, holding no lease), given what it remembers. */
  private static idle(l: Lease, t: number): boolean {
    return (
      l.fetching === null && l.member === '' && l.held === 0 && l.waiting === 0 && t >= l.emptyUntil && t >= l.askAt
    );
  }

  /**
   * Evicts the `excess` idle buckets that would be full soonest (the fewest tokens owed).
   * Evicting a share must never make the limit laxer: a lease made again for the bucket
   * during the outage starts from `left` = burst (it has heard nothing from Redis), so
   * its new share would start full, handing the address another share of its bucket.
   * The share's debt (when it is full again) is folded into the sketch, and shareFor()
   * starts a new share from it: an address evicted and back admits no more than if it
   * had stayed; a sketch cell shared with another bucket can only make a limit stricter.
   * Evicting those full soonest keeps that strictness (and the ceilings forgotten) small.
   * Leases still owing Redis a debt (Lease.debt) go last: evicted, the share's debt stays
   * here (sketch) but Redis is no longer charged for it, so after the outage that bucket
   * may admit up to the share it spent again (at most one share per evicted bucket).
   */
  private evict(excess: number, t: number): void {
    const at: number[] = [];
    for (const kind of this.leases.values())
      for (const l of kind.values()) if (FleetLimiter.idle(l, t)) at.push(this.fullAt(l, t));
    const sorted = Float64Array.from(at).sort();
    const cut = sorted[Math.min(excess, sorted.length) - 1] as number;
    // Those full before the cut, then as many full at it as still needed.
    let left = excess;
    for (const strictly of [true, false]) {
      for (const kind of this.leases.values()) {
        for (const [id, l] of kind) {
          if (left === 0) return;
          if (!FleetLimiter.idle(l, t)) continue;
          const f = this.fullAt(l, t);
          if (strictly ? !(f < cut) : f !== cut) continue;
          const s = this.shareFullAt(l, t);
          if (s > t) this.fold(l.name, s);
          kind.delete(id);
          left--;
        }
      }
    }
  }

  private count(key: KeyRecord, p: Policy, now: number): void {
    const window = now - (now % p.windowMs);
    const id = bucketOf(key);
    const u = this.uses.get(id);
    if (u === undefined || u.window !== window) {
      if (u !== undefined) void this.sendQuota([[id, u]]);
      this.uses.set(id, { key, p, n: 1, window });
    } else u.n++;
  }

  /** Gives back leases past their time, drops idle ones, sends the quota counts. */
  sweep(): Promise<void> {
    if (this.sweeping) return this.sweeping;
    const t = performance.now();
    let kept = 0;
    let paying = 0;
    for (const kind of this.leases.values()) {
      for (const [id, l] of kind) {
        if (l.fetching !== null) continue;
        if ((l.member !== '' || l.held > 0) && (t >= l.until || t - l.used >= IDLE_MS)) this.retire(l);
        if (!FleetLimiter.idle(l, t)) continue;
        // What the share admitted while Redis was away is charged to it now, whichever
        // instance the bucket's requests go to next (a TAKE of the debt; what it grants
        // beyond goes back with the next sweeps).
        if (l.debt >= 1 && paying < DEBTS_PER_SWEEP && t >= this.downUntil && this.co.ready) {
          paying++;
          kept++;
          this.take(l, null).catch((e: unknown) => {
            // A bucket Redis holds as something else (remote()) is that bucket's matter, not an outage.
            if (e instanceof Unavailable) this.downUntil = performance.now() + PROBE_MS;
          });
          continue;
        }
        // Full again (ceiling and share, kept while Redis is away): a fresh one is the same.
        if (this.fullAt(l, t) <= t) kind.delete(id);
        else kept++;
      }
    }
    // Shares count against the bound too: during an outage every address still refilling
    // holds one, and many addresses must not grow memory without bound.
    if (kept > CEILINGS_KEPT) this.evict(kept - CEILINGS_KEPT, t);
    const gives = this.gives.splice(0);
    const uses = [...this.uses];
    this.uses.clear();
    this.sweeping = Promise.all([this.sendGives(gives), this.sendQuota(uses)])
      .then(() => {})
      .finally(() => {
        this.sweeping = null;
      });
    return this.sweeping;
  }

  private async sendGives(gives: Give[]): Promise<void> {
    for (let i = 0; i < gives.length; i += 500) {
      const keys: string[] = [];
      const args: (string | number)[] = [];
      for (const g of gives.slice(i, i + 500)) {
        keys.push(g.lease.name, g.lease.leases);
        args.push(g.member, g.back, g.lease.policy.burst, g.lease.policy.rate);
      }
      // Not given back (Redis down): the lease expires there, the tokens counted as spent. Never over.
      await this.co.run(GIVE, keys, args, 'give', 1000).catch(() => {});
    }
  }

  private async sendQuota(uses: [string, { key: KeyRecord; p: Policy; n: number; window: number }][]): Promise<void> {
    if (uses.length === 0) return;
    const keys = uses.map(([id, u]) => `wg:q:${id}:${u.window}`);
    const args = uses.flatMap(([, u]) => [u.n, u.p.windowMs]);
    let totals: number[];
    try {
      const r = await this.co.run(QUOTA, keys, args, 'quota', 1000);
      if (!Array.isArray(r) || r.length < uses.length) throw new Error('a quota reply that is not one');
      totals = r as number[];
    } catch (e) {
      this.log.debug('quota counts not sent (Redis unavailable)', { err: e as Error });
      return;
    }
    uses.forEach(([, u], i) => {
      const total = Number(totals[i]);
      const before = total - u.n;
      for (const th of THRESHOLDS) {
        const at = Math.ceil(th * u.p.limit);
        if (before < at && total >= at)
          this.onWarning({
            key: u.key,
            threshold: th,
            limit: u.p.limit,
            used: total,
            window: WINDOW_NAME[u.p.windowMs] ?? `${u.p.windowMs}ms`,
            windowStart: u.window,
          });
      }
    });
  }

  get size(): number {
    let n = 0;
    for (const kind of this.leases.values()) n += kind.size;
    return n;
  }

  start(everyMs = SWEEP_MS): void {
    this.timer = setInterval(() => void this.sweep(), everyMs);
    this.timer.unref();
  }

  /** Gives back every lease held, so a stopping instance leaves its tokens to the others. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (this.sweeping) await this.sweeping;
    for (const kind of this.leases.values()) for (const l of kind.values()) this.retire(l);
    await this.sweep();
  }
}

/** `v` as a finite number within [lo, hi]; lo when it is not one (a reply is not trusted). */
function bounded(v: unknown, lo: number, hi: number): number {
  const x = typeof v === 'number' ? v : typeof v === 'string' ? Number(v) : Number.NaN;
  if (!Number.isFinite(x) || x < lo) return lo;
  return Math.min(x, hi);
}
