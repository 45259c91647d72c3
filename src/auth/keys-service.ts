import type { Clock } from '../clock.js';
import type { Config } from '../config/index.js';
import { GatewayError, missing, unprocessable } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import { newKeyId } from '../ids.js';
import { InTurn } from '../in-turn.js';
import type { Logger } from '../log.js';
import { rateLimitProblem } from '../ratelimit/policy.js';
import type { KeyTable } from '../store/keys.js';
import { EVENT_RETENTION_DAYS } from '../store/schema.js';
import { isRevoked } from './authorize.js';
import { activeBootstrapKeys, BOOTSTRAP_LABEL } from './bootstrap.js';
import { checkName, consumerFold, type KeyRateLimit, type KeyRecord, replacing } from './key.js';
import type { KeyRing } from './keyring.js';
import { knownScopes, MANAGEMENT_SCOPES } from './scopes.js';
import { hashSecret, newKeySecret, secretClass } from './secrets.js';

export interface CreateKeyInput {
  label: string;
  environment: string;
  scopes: string[];
  consumer?: string;
  rate_limit?: KeyRateLimit;
  replaces?: string;
  /** The client certificate (SHA-256, lower-case hex) that names the key on auth: mtls routes. */
  tls_fingerprint?: string | null;
}

/** The public shape of a key (DESIGN.md), with `secret` only on creation. */
export interface KeyView {
  id: string;
  object: 'api_key';
  label: string;
  consumer: string;
  environment: string;
  scopes: string[];
  rate_limit: KeyRateLimit | null;
  replaces: string | null;
  created_at: string;
  revoke_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
  /** The client certificate that names the key on auth: mtls routes (SHA-256, lower-case hex), or null. */
  tls_fingerprint: string | null;
  secret?: string;
}

const WINDOW_S = { second: 1, minute: 60, hour: 3600, day: 86_400 } as const;

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/**
 * A key's last use as shown, to the second, from this instance's memory and storage (either
 * may be absent): the later of the two, never later than `now`. Storage keeps the latest
 * time ever written (key_usage is replaced by the later last_used_at), so a use stamped
 * by a clock running ahead (this one's before NTP stepped it back, or another instance's)
 * stays later than now there: that use was made before now, and is shown as now, not as
 * an older use this instance remembers (which could be a day old while the fleet uses the
 * key: an operator waiting for last_used_at to stop moving must not see it stopped).
 */
export function lastUse(mem: number | undefined, stored: number | undefined, now: number): number | null {
  const t = Math.max(mem ?? -1, stored ?? -1);
  if (t < 0) return null;
  return t > now ? now - (now % 1000) : t;
}

/** A label or consumer as stored (NFC), or 400 naming `param`. */
function validName(value: string, param: 'label' | 'consumer'): string {
  const r = checkName(value);
  if ('problem' in r) throw new GatewayError('invalid_request', `${param} ${r.problem}`, param);
  return r.name;
}

/** Key lifecycle: issue, read, revoke (now or scheduled), and the scheduled-revocation sweep. */
export class KeyService {
  private readonly scopes: Set<string>;
  private timer: NodeJS.Timeout | null = null;
  /** Keys whose scheduled revocation has already been announced by this instance. */
  private readonly announced = new Set<string>();
  /** Tells the rest of a fleet of a key version this instance stored (coordination.redis_url). */
  private readonly announce: ((k: KeyRecord) => Promise<void>) | null;
  /**
   * Every write of a key waits for the one before it (this process): each reads the key
   * as the last write left it. Two at once each built a whole new version from what it
   * had read, so the later one undid the other (a revocation undone by a certificate
   * change, a revoke_at pushed back, one certificate on two keys, one consumer reserved twice).
   */
  private readonly writes = new InTurn();
  private readonly cfg: Pick<Config, 'environments' | 'routes' | 'rate_limits'>;
  private readonly table: KeyTable;
  private readonly ring: KeyRing;
  private readonly events: EventBus;
  private readonly clock: Clock;
  private readonly log: Logger;

  constructor(o: {
    cfg: Pick<Config, 'environments' | 'routes' | 'rate_limits'>;
    table: KeyTable;
    ring: KeyRing;
    events: EventBus;
    clock: Clock;
    log: Logger;
    announce?: ((k: KeyRecord) => Promise<void>) | null;
  }) {
    this.cfg = o.cfg;
    this.table = o.table;
    this.ring = o.ring;
    this.events = o.events;
    this.clock = o.clock;
    this.log = o.log;
    this.announce = o.announce ?? null;
    this.scopes = knownScopes(o.cfg);
  }

  /**
   * A key's rate_limit as given: a policy name of the config (its own names only: never
   * `constructor` or `__proto__` of Object.prototype), or its own {limit, burst, window};
   * anything that is no policy to count with is 422 naming rate_limit.
   */
  ratePolicy(v: string | KeyRateLimit): KeyRateLimit {
    if (typeof v !== 'string') {
      const problem = rateLimitProblem(v);
      if (problem !== null) throw unprocessable('rate_limit', `rate_limit ${problem}`);
      return { limit: v.limit, burst: v.burst, window: v.window };
    }
    const p = Object.hasOwn(this.cfg.rate_limits, v) ? this.cfg.rate_limits[v] : undefined;
    if (!p) {
      const names = Object.keys(this.cfg.rate_limits).join(', ');
      throw unprocessable(
        'rate_limit',
        `unknown rate limit policy ${JSON.stringify(v)}; one of ${names}, or {limit, burst, window}`,
      );
    }
    return { limit: p.limit, burst: p.burst, window: p.window };
  }

  envClass(environment: string): 'live' | 'test' | null {
    // Own names only: `constructor` or `__proto__` is no environment.
    return Object.hasOwn(this.cfg.environments, environment)
      ? (this.cfg.environments[environment]?.class ?? null)
      : null;
  }

  view(k: KeyRecord, secret?: string): KeyView {
    const mem = this.ring.lastUsedInMemory(k.id);
    const v: KeyView = {
      id: k.id,
      object: 'api_key',
      label: k.label,
      consumer: k.consumer,
      environment: k.environment,
      scopes: [...k.scopes],
      rate_limit: k.rate_limit,
      replaces: k.replaces,
      created_at: iso(k.created_at) as string,
      revoke_at: iso(k.revoke_at),
      revoked_at: iso(k.revoked_at ?? (k.revoke_at !== null && k.revoke_at <= this.clock.now() ? k.revoke_at : null)),
      last_used_at: iso(lastUse(mem, undefined, this.clock.now())),
      tls_fingerprint: k.tls_fingerprint ?? null,
    };
    if (secret !== undefined) v.secret = secret;
    return v;
  }

  /**
   * The environment a caller of `callerEnv` acts in when it names `asked`: its own
   * by default; a live-class key may name any configured environment, a test-class
   * key none but its own (404, as for an id of another environment).
   */
  visibleEnvironment(callerEnv: string, asked: string | undefined, param = 'environment'): string {
    if (asked === undefined || asked === callerEnv) return callerEnv;
    if (this.envClass(callerEnv) === 'live' && this.envClass(asked) !== null) return asked;
    if (this.envClass(asked) === null && this.envClass(callerEnv) === 'live') {
      throw unprocessable(param, `unknown environment ${JSON.stringify(asked)}`);
    }
    throw new GatewayError(
      'resource_missing',
      `environment ${JSON.stringify(asked)} is not visible to this key`,
      param,
    );
  }

  /**
   * Validates values (shapes are the API's job) and issues a key; the secret is
   * returned once. With `caller` (a key asking through the API), the new key can do
   * nothing the caller cannot (scopes, rate limit, environment: `mayManage`), it
   * replaces only a key the caller may manage, and its consumer is no identity that
   * a key beyond the caller already speaks for (origins trust x-wakegate-consumer).
   */
  create(input: CreateKeyInput, callerEnv: string, caller?: KeyRecord): Promise<{ key: KeyRecord; secret: string }> {
    // The consumer check and the store that reserves it are one step: a create waits for
    // the one before it (this process; see docs for a fleet), else both could pass the check.
    return this.writes.run(() => this.createNow(input, callerEnv, caller));
  }

  private async createNow(
    input: CreateKeyInput,
    callerEnv: string,
    caller?: KeyRecord,
  ): Promise<{ key: KeyRecord; secret: string }> {
    const label = validName(input.label, 'label');
    const asked = input.consumer === undefined ? undefined : validName(input.consumer, 'consumer');
    const env = this.visibleEnvironment(callerEnv, input.environment);
    // The caller's own environment is taken as it is above; with no caller (`keys create
    // --offline`) it is what the operator typed: an environment the config lacks is refused
    // as the API refuses it, never issued a key of no class.
    const cls = this.envClass(env);
    if (cls === null) throw unprocessable('environment', `unknown environment ${JSON.stringify(env)}`);
    if (input.scopes.length === 0) throw unprocessable('scopes', 'a key needs at least one scope');
    const seen = new Set<string>();
    for (const [i, s] of input.scopes.entries()) {
      if (!this.scopes.has(s)) throw unprocessable(`scopes[${i}]`, `unknown scope ${JSON.stringify(s)}`);
      if (seen.has(s)) throw unprocessable(`scopes[${i}]`, `duplicate scope ${JSON.stringify(s)}`);
      seen.add(s);
    }
    if (input.rate_limit !== undefined) {
      if (input.rate_limit.burst < 1) throw unprocessable('rate_limit.burst', 'must be at least 1');
      this.ratePolicy(input.rate_limit);
    }
    let replaced: KeyRecord | null = null;
    if (input.replaces !== undefined) {
      replaced = this.ring.get(input.replaces) ?? null;
      if (!replaced || replaced.environment !== env) throw missing('key', 'replaces');
      // Only an active key (DESIGN.md's statuses: active, scheduled, revoked) can be replaced.
      if (isRevoked(replaced, this.clock.now())) {
        throw new GatewayError(
          'conflict',
          `key ${replaced.id} is revoked; only an active key can be replaced`,
          'replaces',
        );
      }
      if (replaced.revoke_at !== null) {
        throw new GatewayError(
          'conflict',
          `key ${replaced.id} has its revocation scheduled; only an active key can be replaced`,
          'replaces',
        );
      }
      if ([...this.ring.all()].some((k) => k.replaces === replaced?.id)) {
        throw new GatewayError('conflict', `key ${replaced.id} has already been replaced`, 'replaces');
      }
    }
    const consumer = asked ?? replaced?.consumer ?? label;
    const rateLimit = input.rate_limit ?? replaced?.rate_limit ?? null;
    if (caller) {
      this.mustManage(caller, { scopes: input.scopes, rate_limit: rateLimit, environment: env }, 'issue');
      if (replaced) this.mustManage(caller, replaced, 'replace', 'replaces');
      // Compared folded: `Billing-Service` or a decomposed `é` is the same identity to an origin.
      const folded = consumerFold(consumer);
      const holder = [...this.ring.all()].find(
        (k) =>
          consumerFold(k.consumer) === folded && !isRevoked(k, this.clock.now()) && this.beyond(caller, k) !== null,
      );
      if (holder) {
        throw new GatewayError(
          'insufficient_scope',
          // The holder is not named: it may be in an environment this key cannot see.
          `consumer ${JSON.stringify(consumer)} is the identity of a key this key cannot manage; choose another consumer`,
          'consumer',
        );
      }
    }
    const fingerprint = input.tls_fingerprint ?? null;
    if (fingerprint !== null) this.certificateFree(fingerprint, null, env);
    const now = this.clock.now();
    const secret = newKeySecret(cls);
    const key: KeyRecord = {
      id: newKeyId(),
      environment: env,
      label,
      // A replacement carries the old key's identity on unless told otherwise.
      consumer,
      scopes: [...input.scopes],
      rate_limit: rateLimit,
      // It spends from the bucket of the key it replaces (the first of its chain).
      ...replacing(replaced),
      secret_hash: hashSecret(secret),
      created_at: now,
      revoke_at: null,
      revoked_at: null,
      updated_at: now,
      ...(fingerprint !== null ? { tls_fingerprint: fingerprint } : {}),
    };
    await this.save(key);
    if (replaced) {
      this.events.emit('key.rotated', key.environment, { key: this.view(key), replaces: this.view(replaced) }, now);
    }
    this.log.info('key issued', { key_id: key.id, environment: key.environment, scopes: key.scopes });
    return { key, secret };
  }

  /**
   * The limit a key is held to, as the limiter chooses it: a test-class key's is the
   * `sandbox` policy (every such key shares its one bucket, whatever its own rate_limit);
   * any other's its rate_limit, else the `default` policy (also for a stored rate_limit
   * that makes no policy, such as `{}`).
   */
  private ownLimit(k: Pick<KeyRecord, 'rate_limit' | 'environment'>): KeyRateLimit {
    if (this.envClass(k.environment) === 'test') return this.ratePolicy('sandbox');
    return k.rate_limit && rateLimitProblem(k.rate_limit) === null ? k.rate_limit : this.ratePolicy('default');
  }

  /** An admin key (DESIGN.md): all six management scopes, in a live-class environment. */
  isAdmin(k: Pick<KeyRecord, 'scopes' | 'environment'>): boolean {
    return this.envClass(k.environment) === 'live' && MANAGEMENT_SCOPES.every((s) => k.scopes.includes(s));
  }

  /**
   * What `target` could do that `caller` cannot, or null when nothing: a scope the
   * caller lacks, a higher rate (per second) or burst, an environment the caller may
   * not name. A key may issue, replace and revoke only keys it could be (DESIGN.md).
   */
  beyond(
    caller: KeyRecord,
    target: Pick<KeyRecord, 'scopes' | 'rate_limit' | 'environment'>,
  ): { what: string; param: string } | null {
    const lacking = target.scopes.find((s) => !caller.scopes.includes(s));
    if (lacking !== undefined) return { what: `the scope ${lacking}`, param: 'scopes' };
    const a = this.ownLimit(caller);
    const above = (b: KeyRateLimit) => b.limit / WINDOW_S[b.window] > a.limit / WINDOW_S[a.window] || b.burst > a.burst;
    // The limit the target is held to, and the one it names (a test-class key's is not the
    // one it is held to, but it is what its record says): neither may be above the caller's.
    const named = target.rate_limit && rateLimitProblem(target.rate_limit) === null ? target.rate_limit : null;
    // An admin key is bound by none of the rate-limit rule: it issues the high-volume keys.
    if (!this.isAdmin(caller) && (above(this.ownLimit(target)) || (named !== null && above(named))))
      return { what: `a rate limit above its own (${a.limit}/${a.window}, burst ${a.burst})`, param: 'rate_limit' };
    if (target.environment !== caller.environment && this.envClass(caller.environment) !== 'live')
      return { what: `the environment ${target.environment}`, param: 'environment' };
    return null;
  }

  /** Throws 403 unless `caller` may manage `target`; `param` names an existing key's field (else the one it lacks). */
  private mustManage(
    caller: KeyRecord,
    target: Pick<KeyRecord, 'scopes' | 'rate_limit' | 'environment'> & { id?: string },
    act: string,
    param?: string,
  ): void {
    const why = this.beyond(caller, target);
    if (why === null) return;
    const what = target.id ? `key ${target.id}, which has ${why.what}` : `a key with ${why.what}`;
    throw new GatewayError(
      'insufficient_scope',
      `this key cannot ${act} ${what}: it lacks that itself`,
      param ?? why.param,
    );
  }

  /** A key of this environment, or 404. */
  get(id: string, env: string): KeyRecord {
    const k = this.ring.get(id);
    if (!k || k.environment !== env) throw missing('key', 'key_id');
    return k;
  }

  /**
   * Views of these keys, each with its last use: the later of this instance's memory
   * and storage (other instances, earlier runs), read in one query for all (lastUse).
   */
  async views(keys: readonly KeyRecord[]): Promise<KeyView[]> {
    const stored = await this.table.lastUsedMany(keys.map((k) => k.id));
    const now = this.clock.now();
    return keys.map((k) => {
      const v = this.view(k);
      v.last_used_at = iso(lastUse(this.ring.lastUsedInMemory(k.id), stored.get(k.id), now));
      return v;
    });
  }

  /**
   * Revokes now (no revokeAt) or at a future instant. Revocation cannot be undone:
   * a key already revoked is returned unchanged, and a scheduled one can be brought
   * forward (now, or an earlier revokeAt) but never pushed back: the same instant
   * again returns it unchanged, a later one is 409 conflict naming revoke_at.
   */
  revoke(id: string, env: string, revokeAt?: number, caller?: KeyRecord): Promise<KeyRecord> {
    return this.writes.run(() => this.revokeNow(id, env, revokeAt, caller));
  }

  private async revokeNow(id: string, env: string, revokeAt?: number, caller?: KeyRecord): Promise<KeyRecord> {
    const k = this.get(id, env);
    if (caller && caller.id !== k.id) this.mustManage(caller, k, 'revoke', 'key_id');
    const now = this.clock.now();
    // Deleting a revoked key returns it unchanged (DESIGN.md), whatever revoke_at says: revocation is idempotent.
    if (isRevoked(k, now)) return k;
    if (revokeAt !== undefined && revokeAt <= now) throw unprocessable('revoke_at', 'revoke_at must be in the future');
    let next: KeyRecord;
    if (revokeAt === undefined) {
      next = { ...k, revoked_at: now, updated_at: Math.max(now, k.updated_at + 1) };
    } else {
      // A scheduled key can be brought forward (revoke now, or sooner), never pushed back.
      if (k.revoke_at === revokeAt) return k;
      if (k.revoke_at !== null && k.revoke_at < revokeAt)
        throw new GatewayError(
          'conflict',
          `the revocation of key ${k.id} is already scheduled at ${iso(k.revoke_at)}; it can only be brought forward (an earlier revoke_at, or none to revoke now)`,
          'revoke_at',
        );
      next = { ...k, revoke_at: revokeAt, updated_at: Math.max(now, k.updated_at + 1) };
    }
    await this.save(next);
    if (revokeAt === undefined) {
      this.events.emit('key.revoked', k.environment, { key: this.view(next), scheduled: false }, now, `${k.id}`);
      this.announced.add(k.id);
    }
    this.log.info(revokeAt === undefined ? 'key revoked' : 'key revocation scheduled', { key_id: k.id });
    return next;
  }

  /**
   * Raises key.revoked for scheduled revocations whose instant has come (idempotent
   * across instances: the event's id is the key's), and, once the event is written,
   * marks it in the key's record (revoked_at = revoke_at): a later start then knows it
   * was raised, and one whose instant passed while no instance ran raises it.
   */
  sweepScheduled(): void {
    const now = this.clock.now();
    for (const k of this.ring.all()) {
      if (k.revoke_at === null || k.revoke_at > now || this.announced.has(k.id)) continue;
      this.announced.add(k.id);
      // Revoked at once before its instant (raised then), or marked by an earlier sweep.
      if (k.revoked_at !== null) continue;
      this.events.emit('key.revoked', k.environment, { key: this.view(k), scheduled: true }, k.revoke_at, `${k.id}`);
      this.markRaised(k.id).catch((e: Error) =>
        // Not marked: the next start raises it again, under the same id (one event, one delivery per endpoint).
        this.log.warn('key.revoked raised, but not yet marked on the key', { key_id: k.id, err: e.message }),
      );
    }
  }

  private async markRaised(id: string): Promise<void> {
    await this.events.flush();
    await this.writes.run(async () => {
      const k = this.ring.get(id);
      if (k === undefined || k.revoked_at !== null || k.revoke_at === null) return;
      await this.save({ ...k, revoked_at: k.revoke_at, updated_at: Math.max(this.clock.now(), k.updated_at + 1) });
    });
  }

  start(everyMs = 250): void {
    const now = this.clock.now();
    for (const k of this.ring.all()) {
      if (!isRevoked(k, now)) continue;
      // Revoked at once (announced by whoever revoked it), or a scheduled revocation marked
      // raised; one that came while no instance ran is the sweep's to raise, unless it came
      // before the events it would join are kept (EVENT_RETENTION_DAYS: a month-old fact).
      const tooOld = k.revoke_at !== null && k.revoke_at < now - EVENT_RETENTION_DAYS * 86_400_000;
      if (k.revoked_at !== null || tooOld) this.announced.add(k.id);
    }
    this.timer = setInterval(() => this.sweepScheduled(), everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Sets (or with null clears) the client certificate that names a key on auth: mtls routes. */
  setCertificate(id: string, env: string, fingerprint: string | null, caller?: KeyRecord): Promise<KeyRecord> {
    return this.writes.run(() => this.setCertificateNow(id, env, fingerprint, caller));
  }

  private async setCertificateNow(
    id: string,
    env: string,
    fingerprint: string | null,
    caller?: KeyRecord,
  ): Promise<KeyRecord> {
    const k = this.get(id, env);
    if (caller && caller.id !== k.id) this.mustManage(caller, k, 'change', 'key_id');
    const now = this.clock.now();
    if (isRevoked(k, now)) throw new GatewayError('conflict', `key ${k.id} is revoked`, 'key_id');
    if ((k.tls_fingerprint ?? null) === fingerprint) return k;
    if (fingerprint !== null) this.certificateFree(fingerprint, k.id, k.environment);
    const { tls_fingerprint: _old, ...rest } = k;
    const next: KeyRecord = {
      ...rest,
      ...(fingerprint !== null ? { tls_fingerprint: fingerprint } : {}),
      updated_at: Math.max(now, k.updated_at + 1),
    };
    await this.save(next);
    this.log.info('key certificate set', { key_id: k.id, tls_fingerprint: fingerprint });
    return next;
  }

  /**
   * One live key per certificate: a certificate naming two keys would be either. The
   * holder is named only when it is of `env` (the key being set's environment): one of
   * another environment may be one the caller cannot see.
   */
  private certificateFree(fingerprint: string, self: string | null, env: string): void {
    const holder = this.ring.byCertificate(fingerprint);
    if (holder && holder.id !== self && !isRevoked(holder, this.clock.now()))
      throw new GatewayError(
        'conflict',
        holder.environment === env
          ? `this certificate already names key ${holder.id}`
          : 'this certificate already names a key of another environment',
        'tls_fingerprint',
      );
  }

  private async save(k: KeyRecord): Promise<void> {
    await this.table.put(k);
    this.ring.apply(k);
    await Promise.all([this.ring.published(), this.announce?.(k)]);
  }

  /**
   * Installs the bootstrap admin key, of which one is active at a time. With
   * WAKEGATE_ADMIN_KEY: the key with that secret if there is one (given the config's
   * scopes; it becomes the bootstrap key), else a new key that replaces the bootstrap
   * key in force, which is revoked (`key.rotated`, `key.revoked`). Without: on a first
   * start with no keys at all, a generated one whose secret is returned so the caller
   * can print it once.
   */
  bootstrap(adminSecret: string | null, o: { generate?: boolean } = {}): ReturnType<KeyService['bootstrapNow']> {
    return this.writes.run(() => this.bootstrapNow(adminSecret, o.generate !== false));
  }

  private async bootstrapNow(
    adminSecret: string | null,
    generate: boolean,
  ): Promise<{
    created: KeyRecord | null;
    secret: string | null;
    /** The keys revoked because this one replaced them; `current` is the bootstrap key in force. */
    replaced: KeyRecord[];
    current?: KeyRecord;
    /** No key exists and none was generated (`generate` false: its secret could not be shown). */
    unseen?: boolean;
  }> {
    const env = Object.entries(this.cfg.environments).find(([, e]) => e.class === 'live')?.[0] as string;
    if (!adminSecret) {
      if (this.ring.size > 0 || (await this.table.count()) > 0) return { created: null, secret: null, replaced: [] };
      if (!generate) return { created: null, secret: null, replaced: [], unseen: true };
      const secret = newKeySecret('live');
      const key = this.adminRecord(env, hashSecret(secret), this.clock.now());
      await this.save(key);
      return { created: key, secret, replaced: [] };
    }
    if (secretClass(adminSecret) !== 'live') throw new Error('WAKEGATE_ADMIN_KEY must be a svc_live_ secret');
    const hash = hashSecret(adminSecret);
    const held = this.ring.byHashValue(hash);
    const existing = held ?? (await this.table.byHash(hash));
    if (existing && held === undefined) {
      // Stored by another instance of the fleet after this ring was loaded: in force here
      // now, not at the next poll (widen below saves only what it changes).
      this.ring.apply(existing, true);
      await this.ring.published();
    }
    const now = this.clock.now();
    if (existing && isRevoked(existing, now)) {
      // A deploy rolled back to an old variable: the bootstrap key in force stays.
      this.log.warn('WAKEGATE_ADMIN_KEY is the secret of a revoked key; the bootstrap admin key in force is kept', {
        key_id: existing.id,
      });
      return { created: null, secret: null, replaced: [] };
    }
    // Two instances of a fleet that started at once with a new value may both have stored
    // it: a key of the same secret is never revoked (the secret would be refused).
    const others = activeBootstrapKeys(this.ring.all(), now).filter((k) => k.secret_hash !== hash);
    if (existing) {
      await this.widen(existing, env);
      // A store from before the marker, or a start that stopped midway: the others go.
      await this.retire(existing, others, now);
      return { created: null, secret: null, replaced: others, current: existing };
    }
    const key = { ...this.adminRecord(env, hash, now), ...replacing(others[0] ?? null) };
    await this.save(key);
    await this.retire(key, others, now);
    return { created: key, secret: null, replaced: others };
  }

  /**
   * Revokes the bootstrap keys `current` replaces: `key.rotated` names the newest, and
   * each gets `key.revoked`. The caller logs the one line; secrets are never logged.
   */
  private async retire(current: KeyRecord, old: readonly KeyRecord[], now: number): Promise<void> {
    for (const [i, k] of old.entries()) {
      const next = { ...k, revoked_at: now, updated_at: Math.max(now, k.updated_at + 1) };
      await this.save(next);
      this.announced.add(k.id);
      if (i === 0) {
        this.events.emit(
          'key.rotated',
          current.environment,
          { key: this.view(current), replaces: this.view(next) },
          now,
        );
      }
      this.events.emit('key.revoked', k.environment, { key: this.view(next), scheduled: false }, now, `${k.id}`);
    }
  }

  /**
   * The operator's WAKEGATE_ADMIN_KEY holds every scope the config knows, so it can
   * issue keys for routes added since it was installed (a key only issues scopes it
   * holds). Only that key is widened (and marked), never one issued through the API.
   */
  /**
   * Gives the bootstrap key every scope of the config, and moves it to `env` (the first live
   * environment) when its own was removed from the config or is no longer live: a key
   * whose environment does not stand is refused (auth/authorize.ts stands()), and the
   * operator's WAKEGATE_ADMIN_KEY must keep working across such a change.
   */
  private async widen(k: KeyRecord, env: string): Promise<void> {
    const missingScopes = [...this.scopes].filter((s) => !k.scopes.includes(s));
    const moved = this.envClass(k.environment) !== 'live';
    if ((missingScopes.length === 0 && k.bootstrap === true && !moved) || isRevoked(k, this.clock.now())) return;
    const next = {
      ...k,
      environment: moved ? env : k.environment,
      scopes: [...k.scopes, ...missingScopes],
      bootstrap: true,
      updated_at: Math.max(this.clock.now(), k.updated_at + 1),
    };
    await this.save(next);
    if (missingScopes.length > 0) {
      this.log.info('bootstrap admin key given the scopes of the config', { key_id: k.id, scopes: missingScopes });
    }
    if (moved) {
      this.log.warn('bootstrap admin key moved to the first live environment: its own is no longer a live one', {
        key_id: k.id,
        from: k.environment,
        to: env,
      });
    }
  }

  private adminRecord(env: string, hash: string, now: number): KeyRecord {
    return {
      id: newKeyId(),
      environment: env,
      label: BOOTSTRAP_LABEL,
      consumer: 'admin',
      // Every management scope and every route scope of the config: the admin issues all keys.
      scopes: [...new Set([...MANAGEMENT_SCOPES, ...this.scopes])],
      rate_limit: null,
      replaces: null,
      secret_hash: hash,
      created_at: now,
      revoke_at: null,
      revoked_at: null,
      updated_at: now,
      bootstrap: true,
    };
  }
}
