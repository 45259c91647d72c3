import { randomBytes } from 'node:crypto';
import type { RedisClientType } from '@redis/client';
import { redis } from '../lazy-require.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/index.js';
import { redisLate } from './lateness.js';
import type { Script } from './script.js';
import { type Announcement, channelKey, openAnnouncement, signAnnouncement } from './signed.js';

export type Reply = string | number | null | Reply[];

/** Raised instead of waiting when Redis is down or slower than the caller allows. */
export class Unavailable extends Error {
  constructor(why: string) {
    super(`redis unavailable: ${why}`);
    this.name = 'Unavailable';
  }
}

export interface CoordinatorOptions {
  url: string;
  /** What one call waits at most (coordination.timeout_ms for bucket decisions). */
  timeoutMs: number;
  log: Logger;
  metrics: Metrics;
  /** Names this process in leases (random unless given). */
  owner?: string;
  /** An edge thread's connection: its outages are the control thread's to log (one line per process). */
  quiet?: boolean;
  /** Begins every key and channel name (coordination.prefix): several fleets can share one Redis. */
  prefix?: string;
  /** Clock for the rate of warnings about rejected messages (tests inject one). */
  now?: () => number;
}

/** At most one warning line about rejected channel messages this often. */
const REJECTED_WARN_MS = 60_000;

/**
 * One gateway's connection to the fleet's Redis (or Valkey), through node-redis
 * (@redis/client, the client Redis itself maintains). Calls never queue while the
 * connection is down (offline queue disabled) and never wait past their timeout:
 * they fail with Unavailable, and the callers decide (on_unavailable). An outage is
 * logged once when it starts and once when it ends; `wakegate_coordination_up`
 * follows it. Every script runs atomically in Redis (EVALSHA, falling back to EVAL
 * once after a restart of Redis empties its script cache).
 */
export class Coordinator {
  readonly owner: string;
  private readonly client: RedisClientType;
  private sub: RedisClientType | null = null;
  private down = false;
  private closed = false;
  private readonly handlers = new Map<string, (message: string) => void>();
  private readonly subscribed = new Set<string>();
  /** Authenticates channel messages (authenticate()); null: no channel can be opened. */
  private channelKey: Buffer | null = null;
  private warnedAt = Number.NEGATIVE_INFINITY;
  readonly prefix: string;

  constructor(private readonly o: CoordinatorOptions) {
    this.owner = o.owner ?? randomBytes(6).toString('hex');
    this.prefix = o.prefix ?? 'wakegate:';
    this.client = redis().createClient({
      url: o.url,
      disableOfflineQueue: true,
      socket: {
        connectTimeout: Math.max(1000, o.timeoutMs),
        // Back off to at most a second between attempts, forever: Redis coming back is noticed within 1 s.
        reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 1000),
      },
    }) as RedisClientType;
    this.client.on('error', (e: Error) => {
      this.outage(e.message);
      // Still 'ready' after an error: a reply the client could not read (one too long for a
      // string, a type it does not know), not a socket that failed. From then on replies no
      // longer line up with commands (a TAKE would be answered with another call's reply),
      // and node-redis never reconnects by itself: the connection is made again.
      if (this.client.isReady) this.remake();
    });
    this.client.on('ready', () => this.recovered());
    o.metrics.coordinationUp.set(0);
  }

  private remaking = false;

  /** Drops the connection (every call waiting on it fails, as Unavailable) and connects again. */
  private remake(): void {
    if (this.remaking || this.closed) return;
    this.remaking = true;
    this.client.destroy();
    void this.client
      .connect()
      .catch(() => {})
      .finally(() => {
        this.remaking = false;
      });
  }

  /** Starts connecting; resolves when connected or after `waitMs` (the gateway starts either way). */
  async start(waitMs = 2000): Promise<void> {
    const connecting = this.client.connect().catch(() => {});
    await Promise.race([connecting, new Promise((r) => setTimeout(r, waitMs).unref())]);
    if (!this.client.isReady) this.outage('not connected at start');
    else if (!this.o.quiet) this.o.log.info('coordination: joined the fleet', { owner: this.owner });
  }

  get ready(): boolean {
    return this.client.isReady;
  }

  /** Connected and answering in time (an outage, lost connection or late answers, is not over). */
  get answering(): boolean {
    return this.client.isReady && !this.down;
  }

  private outage(why: string): void {
    this.o.metrics.coordinationUp.set(0);
    if (this.down || this.closed) return;
    this.down = true;
    const msg = 'coordination: Redis is unavailable; following coordination.on_unavailable until it is back';
    if (this.o.quiet) this.o.log.debug(msg, { reason: why });
    else this.o.log.warn(msg, { reason: why });
  }

  private recovered(): void {
    this.o.metrics.coordinationUp.set(1);
    if (!this.down) return;
    this.down = false;
    if (this.o.quiet) this.o.log.debug('coordination: Redis is back');
    else this.o.log.info('coordination: Redis is back');
  }

  /** A Redis key's (or channel's) full name: the fleet's prefix, then `name`. */
  key(name: string): string {
    return this.prefix + name;
  }

  /**
   * Runs a script; `op` names it in wakegate_coordination_round_trips_total. Every name
   * in `keys` is given the prefix here (callers name keys without it).
   */
  async run(
    s: Script,
    keys: string[],
    args: (string | number)[],
    op: string,
    timeoutMs = this.o.timeoutMs,
  ): Promise<Reply> {
    if (!this.client.isReady) throw new Unavailable('not connected');
    this.o.metrics.coordinationRoundTrips.labels(op).inc();
    const tail: string[] = [String(keys.length)];
    for (const k of keys) tail.push(this.prefix + k);
    for (const a of args) tail.push(String(a));
    try {
      return this.answered(await this.send(['EVALSHA', s.sha, ...tail], timeoutMs));
    } catch (e) {
      if (!(e instanceof Error) || !e.message.startsWith('NOSCRIPT')) throw this.failed(e);
      try {
        return this.answered(await this.send(['EVAL', s.source, ...tail], timeoutMs));
      } catch (e2) {
        throw this.failed(e2);
      }
    }
  }

  /**
   * One plain command on one key or channel, named first (SET k …, ZREM k …, PUBLISH c …):
   * that name is given the prefix here.
   */
  async command(args: string[], op: string, timeoutMs = this.o.timeoutMs): Promise<Reply> {
    if (!this.client.isReady) throw new Unavailable('not connected');
    this.o.metrics.coordinationRoundTrips.labels(op).inc();
    const named = args.length > 1 ? [args[0] as string, this.prefix + args[1], ...args.slice(2)] : args;
    try {
      return this.answered(await this.send(named, timeoutMs));
    } catch (e) {
      throw this.failed(e);
    }
  }

  /** An answer in time ends an outage that was Redis being slow (a lost connection ends at 'ready'). */
  private answered(r: Reply): Reply {
    if (this.down) this.recovered();
    return r;
  }

  /**
   * One command, given up on when Redis itself is late: `timeoutMs` is measured from
   * the command's write to the socket to its reply being read, never the gateway's
   * event-loop lag (see lateness.ts). Its answer, if it comes later, is dropped: a
   * lease granted too late is never spent, and expires in Redis as spent: never over.
   */
  private send(args: string[], timeoutMs: number): Promise<Reply> {
    return redisLate(this.client.sendCommand(args) as Promise<Reply>, timeoutMs);
  }

  private failed(e: unknown): Error {
    const msg = e instanceof Error ? e.message : String(e);
    // A script's own error (a bug, or a wrong type) is not an outage.
    if (e instanceof Error && /^(ERR|WRONGTYPE|NOSCRIPT)/.test(msg)) return e;
    // Gone, or slower than the caller allows: an outage either way (logged once).
    this.outage(this.client.isReady ? `no answer within the timeout (${msg})` : msg);
    return new Unavailable(msg);
  }

  /**
   * Calls `handler` with each message published on channel `name` (given the prefix
   * here) through a second connection, as pub/sub needs; the fleet's own channels are
   * opened with channel(). A channel not yet subscribed (Redis was down) is subscribed
   * when the connection is ready; node-redis subscribes again by itself after a reconnect.
   */
  async subscribe(name: string, handler: (message: string) => void): Promise<void> {
    this.handlers.set(this.prefix + name, handler);
    if (!this.sub) {
      const sub = this.client.duplicate() as RedisClientType;
      this.sub = sub;
      sub.on('error', () => {});
      sub.on('ready', () => void this.subscribeAll());
      void sub.connect().catch(() => {});
    }
    const wait = Date.now() + 2000;
    while (!this.sub.isReady && Date.now() < wait) await new Promise((r) => setTimeout(r, 20));
    await this.subscribeAll();
  }

  private async subscribeAll(): Promise<void> {
    const sub = this.sub;
    if (!sub?.isReady) return;
    for (const channel of this.handlers.keys()) {
      if (this.subscribed.has(channel)) continue;
      try {
        await sub.subscribe(channel, (m: string) => this.handlers.get(channel)?.(m));
        this.subscribed.add(channel);
      } catch {
        // Not ready after all: the next 'ready' tries again.
      }
    }
  }

  /**
   * Lets this instance open channels: their messages are authenticated with a key
   * derived from the sealing key (storage.encryption_key), which Redis never sees.
   */
  authenticate(sealingKey: Buffer): void {
    this.channelKey = channelKey(sealingKey);
  }

  /**
   * A channel the fleet shares, carrying announcements only: an id and a version
   * (and whether that version revokes it), with a MAC. What one instance publishes
   * reaches `heard` on every other (an instance never hears itself); the receiver
   * re-reads what it names from storage. A message that fails its check is dropped
   * and counted in wakegate_coordination_rejected_total{channel}, with one warning a
   * minute at most. Publishing fails like any call when Redis cannot answer.
   */
  async channel(name: string, heard: (a: Announcement) => void): Promise<(a: Announcement) => Promise<void>> {
    const key = this.channelKey;
    if (!key) throw new Error('coordination channels need the sealing key (Coordinator.authenticate)');
    const full = this.key(name);
    this.o.metrics.coordinationRejected.labels(name).inc(0);
    await this.subscribe(name, (m) => {
      const a = openAnnouncement(key, full, m);
      if (a === null) this.rejected(name);
      else if (a.owner !== this.owner) heard(a);
    });
    return this.publisher(name);
  }

  /**
   * Publishes announcements on channel `name` (see channel()), for a part that must
   * be built before the part that hears that channel exists.
   */
  publisher(name: string): (a: Announcement) => Promise<void> {
    const key = this.channelKey;
    if (!key) throw new Error('coordination channels need the sealing key (Coordinator.authenticate)');
    const full = this.key(name);
    return async (a) => {
      await this.command(['PUBLISH', name, signAnnouncement(key, full, this.owner, a)], 'publish', 1000);
    };
  }

  private rejected(channel: string): void {
    this.o.metrics.coordinationRejected.labels(channel).inc();
    const now = (this.o.now ?? Date.now)();
    if (now - this.warnedAt < REJECTED_WARN_MS) return;
    this.warnedAt = now;
    this.o.log.warn(
      'coordination: a message that fails its check was dropped (someone else writes to Redis, or instances differ in storage.encryption_key)',
      { channel },
    );
  }

  /** True for the first instance of the fleet to ask for `name` within `ttlMs`; Redis unreachable: true (rather twice than never). */
  async once(name: string, ttlMs: number): Promise<boolean> {
    try {
      return (
        (await this.command(['SET', `once:${name}`, this.owner, 'NX', 'PX', String(ttlMs)], 'once', 2000)) === 'OK'
      );
    } catch {
      return true;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const c of [this.sub, this.client]) {
      if (!c) continue;
      try {
        if (c.isOpen) await c.close();
        else c.destroy();
      } catch {
        c.destroy();
      }
    }
  }
}
