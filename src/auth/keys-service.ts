import type { Clock } from '../clock.js';
import type { Config } from '../config/index.js';
import { GatewayError, missing, unprocessable } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import { newKeyId } from '../ids.js';
import type { Logger } from '../log.js';
import type { KeyRateLimit, KeyRecord, KeyTable } from '../store/keys.js';
import { isRevoked } from './authorize.js';
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
  secret?: string;
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** Key lifecycle: issue, read, revoke (now or scheduled), and the scheduled-revocation sweep. */
export class KeyService {
  private readonly scopes: Set<string>;
  private timer: NodeJS.Timeout | null = null;
  /** Keys whose scheduled revocation has already been announced by this instance. */
  private readonly announced = new Set<string>();

  constructor(
    private readonly cfg: Pick<Config, 'environments' | 'routes'>,
    private readonly table: KeyTable,
    private readonly ring: KeyRing,
    private readonly events: EventBus,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {
    this.scopes = knownScopes(cfg);
  }

  envClass(environment: string): 'live' | 'test' | null {
    return this.cfg.environments[environment]?.class ?? null;
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
      last_used_at: iso(mem ?? null),
    };
    if (secret !== undefined) v.secret = secret;
    return v;
  }

  /** Validates values (shapes are the API's job) and issues a key; the secret is returned once. */
  async create(input: CreateKeyInput, callerEnv: string): Promise<{ key: KeyRecord; secret: string }> {
    const cls = this.envClass(input.environment);
    if (!cls) throw unprocessable('environment', `unknown environment ${JSON.stringify(input.environment)}`);
    if (input.environment !== callerEnv) {
      throw new GatewayError(
        'resource_missing',
        `environment ${JSON.stringify(input.environment)} is not visible to this key`,
        'environment',
      );
    }
    if (input.scopes.length === 0) throw unprocessable('scopes', 'a key needs at least one scope');
    const seen = new Set<string>();
    for (const [i, s] of input.scopes.entries()) {
      if (!this.scopes.has(s)) throw unprocessable(`scopes[${i}]`, `unknown scope ${JSON.stringify(s)}`);
      if (seen.has(s)) throw unprocessable(`scopes[${i}]`, `duplicate scope ${JSON.stringify(s)}`);
      seen.add(s);
    }
    if (input.rate_limit && input.rate_limit.burst < 1) throw unprocessable('rate_limit.burst', 'must be at least 1');
    let replaced: KeyRecord | null = null;
    if (input.replaces !== undefined) {
      replaced = this.ring.get(input.replaces) ?? null;
      if (!replaced || replaced.environment !== input.environment) throw missing('key', 'replaces');
    }
    const now = this.clock.now();
    const secret = newKeySecret(cls);
    const key: KeyRecord = {
      id: newKeyId(),
      environment: input.environment,
      label: input.label,
      consumer: input.consumer ?? input.label,
      scopes: [...input.scopes],
      rate_limit: input.rate_limit ?? null,
      replaces: replaced?.id ?? null,
      secret_hash: hashSecret(secret),
      created_at: now,
      revoke_at: null,
      revoked_at: null,
      updated_at: now,
    };
    await this.table.put(key);
    this.ring.apply(key);
    if (replaced) {
      this.events.emit('key.rotated', key.environment, { key: this.view(key), replaces: this.view(replaced) }, now);
    }
    this.log.info('key issued', { key_id: key.id, environment: key.environment, scopes: key.scopes });
    return { key, secret };
  }

  /** A key of this environment, or 404. */
  get(id: string, env: string): KeyRecord {
    const k = this.ring.get(id);
    if (!k || k.environment !== env) throw missing('key');
    return k;
  }

  async lastUsed(k: KeyRecord): Promise<number | null> {
    return this.ring.lastUsedInMemory(k.id) ?? (await this.table.lastUsed(k.id));
  }

  /**
   * Revokes now (no revokeAt) or at a future instant. Revocation cannot be undone:
   * a key already revoked, or already scheduled, is returned unchanged.
   */
  async revoke(id: string, env: string, revokeAt?: number): Promise<KeyRecord> {
    const k = this.get(id, env);
    const now = this.clock.now();
    if (revokeAt !== undefined && revokeAt <= now) throw unprocessable('revoke_at', 'revoke_at must be in the future');
    if (isRevoked(k, now)) return k;
    let next: KeyRecord;
    if (revokeAt === undefined) {
      next = { ...k, revoked_at: now, updated_at: Math.max(now, k.updated_at + 1) };
    } else {
      // A scheduled key can be brought forward (revoke now, or sooner), never pushed back.
      if (k.revoke_at !== null && k.revoke_at <= revokeAt) return k;
      next = { ...k, revoke_at: revokeAt, updated_at: Math.max(now, k.updated_at + 1) };
    }
    await this.table.put(next);
    this.ring.apply(next);
    if (revokeAt === undefined) {
      this.events.emit('key.revoked', k.environment, { key: this.view(next), scheduled: false }, now, `${k.id}`);
      this.announced.add(k.id);
    }
    this.log.info(revokeAt === undefined ? 'key revoked' : 'key revocation scheduled', { key_id: k.id });
    return next;
  }

  /** Raises key.revoked for scheduled revocations whose instant has come (idempotent across instances). */
  sweepScheduled(): void {
    const now = this.clock.now();
    for (const k of this.ring.all()) {
      if (k.revoke_at === null || k.revoke_at > now || this.announced.has(k.id)) continue;
      if (k.revoked_at !== null && k.revoked_at < k.revoke_at) continue;
      this.announced.add(k.id);
      this.events.emit('key.revoked', k.environment, { key: this.view(k), scheduled: true }, k.revoke_at, `${k.id}`);
    }
  }

  start(everyMs = 250): void {
    // Keys revoked before this start were announced by whoever revoked them.
    const now = this.clock.now();
    for (const k of this.ring.all()) if (isRevoked(k, now)) this.announced.add(k.id);
    this.timer = setInterval(() => this.sweepScheduled(), everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /**
   * Installs the bootstrap admin key: the operator's WAKEGATE_ADMIN_KEY if no key
   * has that secret yet, or, on a first start with no keys at all, a generated
   * one whose secret is returned so the caller can print it once.
   */
  async bootstrap(adminSecret: string | null): Promise<{ created: KeyRecord | null; secret: string | null }> {
    const env = Object.entries(this.cfg.environments).find(([, e]) => e.class === 'live')?.[0] as string;
    if (adminSecret) {
      if (secretClass(adminSecret) !== 'live') throw new Error('WAKEGATE_ADMIN_KEY must be a svc_live_ secret');
      const hash = hashSecret(adminSecret);
      if (this.ring.byHashValue(hash) || (await this.table.byHash(hash))) return { created: null, secret: null };
      const now = this.clock.now();
      const key = this.adminRecord(env, hash, now);
      await this.table.put(key);
      this.ring.apply(key);
      return { created: key, secret: null };
    }
    if (this.ring.size > 0 || (await this.table.count()) > 0) return { created: null, secret: null };
    const secret = newKeySecret('live');
    const key = this.adminRecord(env, hashSecret(secret), this.clock.now());
    await this.table.put(key);
    this.ring.apply(key);
    return { created: key, secret };
  }

  private adminRecord(env: string, hash: string, now: number): KeyRecord {
    return {
      id: newKeyId(),
      environment: env,
      label: 'bootstrap admin',
      consumer: 'admin',
      scopes: [...MANAGEMENT_SCOPES],
      rate_limit: null,
      replaces: null,
      secret_hash: hash,
      created_at: now,
      revoke_at: null,
      revoked_at: null,
      updated_at: now,
    };
  }
}
