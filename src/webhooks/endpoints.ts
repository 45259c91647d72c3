import { newSigningSecret } from '../auth/secrets.js';
import type { Clock } from '../clock.js';
import type { Config } from '../config/index.js';
import { GatewayError, missing, unprocessable } from '../errors.js';
import { EVENT_TYPES, type EventBus } from '../events/bus.js';
import { newEndpointId } from '../ids.js';
import { InTurn } from '../in-turn.js';
import type { Logger } from '../log.js';
import { follow, type TableChanges } from '../store/changes.js';
import type { EndpointTable } from '../store/webhooks.js';
import { hostIsReachable, type Resolver, systemResolver } from './address.js';
import type { EndpointRecord } from './records.js';
import { MAX_RETIRED_SECRETS, rotation, SECRET_OVERLAP_MS } from './secrets.js';

export { SECRET_OVERLAP_MS };

const DAY_MS = 86_400_000;
const POLL_OVERLAP_MS = 5_000;

export interface EndpointView {
  id: string;
  object: 'webhook_endpoint';
  url: string;
  events: string[];
  environment: string;
  status: 'enabled' | 'disabled' | 'deleted';
  created_at: string;
  disabled_at: string | null;
  /**
   * Until when a secret rotated away still signs alongside (after rotate-secret), else
   * null: the latest end when several do (each signs for 24 h from its own rotation).
   */
  previous_secret_expires_at: string | null;
  secret?: string;
}

export const endpointView = (e: EndpointRecord, withSecret = false): EndpointView => ({
  id: e.id,
  object: 'webhook_endpoint',
  url: e.url,
  events: [...e.events],
  environment: e.environment,
  status: e.status,
  created_at: new Date(e.created_at).toISOString(),
  disabled_at: e.disabled_at === null ? null : new Date(e.disabled_at).toISOString(),
  previous_secret_expires_at:
    e.previous_secret && e.previous_secret_until !== null ? new Date(e.previous_secret_until).toISOString() : null,
  ...(withSecret ? { secret: e.secret } : {}),
});

/**
 * An endpoint's URL as told to anyone but its authorized callers: scheme, host and port,
 * then `/…` (`https://hooks.slack.com/services/T0/B0/XXXX?token=y` is `https://hooks.slack.com/…`).
 * Its path, query, fragment and any credentials are never shown: they are often the
 * capability itself (a Slack hook's path, a `?token=`). `…` when it is no URL at all.
 */
export function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}/…`;
  } catch {
    return '…';
  }
}

/**
 * An endpoint as an event about it shows it to the environment's other endpoints
 * (webhook.disabled; possibly third-party receivers): its view, never its secret, and
 * its URL shortened by shownUrl.
 */
export const endpointEventView = (e: EndpointRecord): EndpointView => ({ ...endpointView(e), url: shownUrl(e.url) });

/** Checks a subscription: known types (or "*" alone), no duplicates. */
function checkEvents(events: string[]): string[] {
  if (events.length === 0) throw unprocessable('events', 'subscribe to at least one event type, or ["*"]');
  const seen = new Set<string>();
  for (const [i, t] of events.entries()) {
    if (t !== '*' && !(EVENT_TYPES as readonly string[]).includes(t)) {
      throw unprocessable(`events[${i}]`, `unknown event type ${JSON.stringify(t)}`);
    }
    if (seen.has(t)) throw unprocessable(`events[${i}]`, `duplicate event type ${JSON.stringify(t)}`);
    seen.add(t);
  }
  if (seen.has('*') && seen.size > 1) throw unprocessable('events', '"*" already means every type; send it alone');
  return [...events];
}

/**
 * Webhook endpoints: registration (https only, public addresses only, unless the
 * `allow_` settings say otherwise), an in-memory mirror kept fresh by a poll, and
 * endpoint health: an endpoint that has answered 410 for `disable_after_410_days`
 * in a row (any other answer resets the count) is disabled.
 */
export interface EndpointServiceOptions {
  cfg: Pick<Config, 'webhooks'>;
  table: Pick<EndpointTable, 'put' | 'changedSince'>;
  /** Where webhook.disabled is raised. */
  events: Pick<EventBus, 'emit'>;
  clock: Clock;
  log: Logger;
  /** Tells the rest of a fleet that an endpoint changed here (its id and version: they read it from storage); null: alone. */
  announce: ((e: EndpointRecord) => Promise<void>) | null;
  /** How registration resolves a url's host (the system's, bounded at DNS_TIMEOUT_MS, unless given). */
  resolver?: Resolver;
}

export class EndpointService {
  private readonly byId = new Map<string, EndpointRecord>();
  private maxUpdated = 0;
  private unfollow: (() => void) | null = null;
  private readonly cfg: Pick<Config, 'webhooks'>;
  private readonly table: EndpointServiceOptions['table'];
  private readonly events: EndpointServiceOptions['events'];
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly announce: EndpointServiceOptions['announce'];
  private readonly resolver: Resolver;

  constructor(o: EndpointServiceOptions) {
    this.cfg = o.cfg;
    this.table = o.table;
    this.events = o.events;
    this.clock = o.clock;
    this.log = o.log;
    this.announce = o.announce;
    this.resolver = o.resolver ?? systemResolver;
  }

  async load(): Promise<void> {
    for (const e of await this.table.changedSince(0)) this.apply(e);
  }

  apply(e: EndpointRecord): void {
    const held = this.byId.get(e.id);
    if (held && held.updated_at > e.updated_at) return;
    // Deleting is final: no later version (one built before the delete was seen) brings it back.
    if (held?.status === 'deleted' && e.status !== 'deleted') return;
    this.byId.set(e.id, e);
    if (e.updated_at > this.maxUpdated) this.maxUpdated = e.updated_at;
  }

  async poll(): Promise<void> {
    await this.read();
  }

  /** Reads the endpoints changed since the last read; false when it failed. */
  private async read(): Promise<boolean> {
    try {
      for (const e of await this.table.changedSince(this.maxUpdated - POLL_OVERLAP_MS)) this.apply(e);
      return true;
    } catch (e) {
      this.log.warn('endpoint poll failed', { err: e as Error });
      return false;
    }
  }

  /**
   * Keeps the mirror fresh: every `everyMs` from a ClickHouse server (`changes` null,
   * other instances write it too); from the embedded store (written only by this
   * process) when an endpoint is written here, and again every `everyMs` while that
   * read fails.
   */
  start(everyMs: number, changes: TableChanges | null = null): void {
    this.unfollow = follow({ table: 'webhook_endpoints', changes, everyMs, read: () => this.read() });
  }

  stop(): void {
    this.unfollow?.();
    this.unfollow = null;
  }

  get(id: string): EndpointRecord | undefined {
    return this.byId.get(id);
  }

  /** An endpoint of this environment, or 404 (a deleted one is gone). */
  inEnvironment(id: string, env: string, param = 'endpoint_id'): EndpointRecord {
    const e = this.byId.get(id);
    if (!e || e.environment !== env || e.status === 'deleted') throw missing('webhook endpoint', param);
    return e;
  }

  /**
   * An endpoint of this environment, deleted ones included (their deliveries stay
   * listed by its id), or 404: an id never seen here, or another environment's.
   */
  everInEnvironment(id: string, env: string, param = 'endpoint_id'): EndpointRecord {
    const e = this.byId.get(id);
    if (!e || e.environment !== env) throw missing('webhook endpoint', param);
    return e;
  }

  list(env: string): EndpointRecord[] {
    return [...this.byId.values()]
      .filter((e) => e.environment === env && e.status !== 'deleted')
      .sort((a, b) => (a.id < b.id ? -1 : 1));
  }

  /**
   * Every change of an existing endpoint waits for the one before it (this process), and
   * reads the endpoint as that one left it: two at once each built a whole new version
   * from what it had read, so the later undid the other (a delete undone by a PATCH or by
   * an attempt's 410, a rotated secret that never signed, a disable lost).
   */
  private readonly changes = new InTurn();

  private async save(e: EndpointRecord, next: Partial<EndpointRecord>): Promise<EndpointRecord> {
    const now = this.clock.now();
    const r: EndpointRecord = { ...e, ...next, updated_at: Math.max(now, e.updated_at + 1) };
    await this.table.put(r);
    this.apply(r);
    await this.announce?.(r);
    return r;
  }

  /**
   * PATCH: `events` replaces the subscription; `status` enables or disables.
   * Re-enabling clears the run of 410 answers, so a recovered receiver starts afresh.
   */
  update(
    id: string,
    env: string,
    patch: { events?: string[]; status?: 'enabled' | 'disabled' },
  ): Promise<EndpointRecord> {
    return this.changes.run(() => this.updateNow(id, env, patch));
  }

  private async updateNow(
    id: string,
    env: string,
    patch: { events?: string[]; status?: 'enabled' | 'disabled' },
  ): Promise<EndpointRecord> {
    const e = this.inEnvironment(id, env, 'endpoint_id');
    const next: Partial<EndpointRecord> = {};
    if (patch.events !== undefined) next.events = checkEvents(patch.events);
    if (patch.status === 'enabled' && e.status !== 'enabled') {
      Object.assign(next, { status: 'enabled', disabled_at: null, first_410_at: null });
    } else if (patch.status === 'disabled' && e.status !== 'disabled') {
      Object.assign(next, { status: 'disabled', disabled_at: this.clock.now() });
    }
    if (Object.keys(next).length === 0) return e;
    const r = await this.save(e, next);
    this.log.info('webhook endpoint updated', { endpoint_id: id, status: r.status, events: r.events });
    return r;
  }

  /** Deletes the endpoint: it is gone from lists and lookups; the caller cancels its pending deliveries. */
  remove(id: string, env: string): Promise<EndpointRecord> {
    return this.changes.run(async () => {
      const e = this.inEnvironment(id, env, 'endpoint_id');
      const r = await this.save(e, { status: 'deleted', disabled_at: this.clock.now() });
      this.log.info('webhook endpoint deleted', { endpoint_id: id });
      return r;
    });
  }

  /**
   * A new signing secret, returned once. The one it replaces keeps signing alongside
   * for 24 h, and so does each one rotated away before it until its own 24 h end (a
   * receiver may still know only the first after two quick rotations): at most
   * MAX_RETIRED_SECRETS of them, the newest.
   */
  rotateSecret(id: string, env: string): Promise<EndpointRecord> {
    return this.changes.run(() => this.rotateSecretNow(id, env));
  }

  private async rotateSecretNow(id: string, env: string): Promise<EndpointRecord> {
    const e = this.inEnvironment(id, env, 'endpoint_id');
    const { droppedEarly, ...next } = rotation(e, newSigningSecret(), this.clock.now());
    const r = await this.save(e, next);
    this.log.info('webhook signing secret rotated', { endpoint_id: id });
    if (droppedEarly > 0)
      this.log.warn('webhook secrets rotated away less than 24 h ago stopped signing early', {
        endpoint_id: id,
        stopped: droppedEarly,
        most_signing_alongside: MAX_RETIRED_SECRETS,
      });
    return r;
  }

  /**
   * Enabled endpoints of `environment` subscribed to `type` (or to "*") that existed when
   * the event was raised (`raised`, the event's own time): an endpoint is sent only events
   * raised at or after its creation, as Svix's are. The fan-out may read an event late (a
   * loaded host, a batch recorded after an outage), and whoever registers an endpoint does
   * not expect events from before it existed. Both times are the gateway clock's, as
   * stored. An endpoint stamped after `now` (made while the clock ran ahead, since put
   * back) cannot be ordered against the events that follow: it gets them, rather than
   * nothing until the clock passes its stamp again.
   */
  subscribers(q: {
    environment: string;
    type: string;
    raised: number;
    now: number;
    except?: string | undefined;
  }): EndpointRecord[] {
    const { type, raised, now } = q;
    const out: EndpointRecord[] = [];
    for (const e of this.byId.values()) {
      if (e.environment !== q.environment || e.status !== 'enabled' || e.id === q.except) continue;
      if (raised < e.created_at && e.created_at <= now) continue;
      if (e.events.includes('*') || e.events.includes(type)) out.push(e);
    }
    return out;
  }

  async create(input: { url: string; events: string[] }, env: string): Promise<EndpointRecord> {
    const w = this.cfg.webhooks;
    let url: URL;
    try {
      url = new URL(input.url);
    } catch {
      throw unprocessable('url', 'url must be an absolute URL');
    }
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && w.allow_insecure_http)) {
      throw unprocessable(
        'url',
        'url must be https:// (redirects are not followed, so register the final URL); for local testing, webhooks.allow_insecure_http: true allows http://',
      );
    }
    if (url.username || url.password) throw unprocessable('url', 'url must not carry credentials');
    // As stored and sent (percent-encoded: one 'é' is six characters), not only as given.
    if (input.url.length > 2048 || url.toString().length > 2048)
      throw unprocessable('url', 'url is longer than 2048 characters (as sent, percent-encoded)');
    const reach = await hostIsReachable(url.hostname, w.allow_private_networks, this.resolver);
    if (reach.timedOut) {
      // Nothing is known of the host: not refused as private, not taken either. Retry shortly.
      throw new GatewayError(
        'service_unavailable',
        `url host could not be checked: ${reach.reason}; try again shortly`,
        'url',
        Math.max(1, Math.ceil(this.resolver.timeoutMs / 1000)),
      );
    }
    if (!reach.ok) {
      throw unprocessable(
        'url',
        `url host is not allowed: ${reach.reason}; for local testing, webhooks.allow_private_networks: true allows it`,
      );
    }
    checkEvents(input.events);
    const now = this.clock.now();
    const e: EndpointRecord = {
      id: newEndpointId(),
      environment: env,
      url: url.toString(),
      events: [...input.events],
      secret: newSigningSecret(),
      previous_secret: '',
      previous_secret_until: null,
      status: 'enabled',
      created_at: now,
      first_410_at: null,
      disabled_at: null,
      updated_at: now,
    };
    await this.table.put(e);
    this.apply(e);
    await this.announce?.(e);
    this.log.info('webhook endpoint registered', { endpoint_id: e.id, environment: env, events: e.events });
    return e;
  }

  /**
   * Records how an endpoint answered an attempt. `status` 0 (timeout, refused) is
   * no answer and changes nothing; 410 starts or continues the run; any other
   * answer ends it. Returns true when this answer disabled the endpoint.
   */
  recordAnswer(id: string, status: number, now: number): Promise<boolean> {
    if (status === 0) return Promise.resolve(false);
    return this.changes.run(() => this.recordAnswerNow(id, status, now));
  }

  private async recordAnswerNow(id: string, status: number, now: number): Promise<boolean> {
    const e = this.byId.get(id);
    if (e?.status !== 'enabled') return false;
    let next: EndpointRecord | null = null;
    let disabled = false;
    if (status === 410) {
      if (e.first_410_at === null) next = { ...e, first_410_at: now };
      else if (now - e.first_410_at >= this.cfg.webhooks.disable_after_410_days * DAY_MS) {
        next = { ...e, status: 'disabled', disabled_at: now };
        disabled = true;
      }
    } else if (e.first_410_at !== null) {
      next = { ...e, first_410_at: null };
    }
    if (!next) return false;
    next.updated_at = Math.max(now, e.updated_at + 1);
    this.apply(next);
    try {
      await this.table.put(next);
    } catch (err) {
      this.log.error('could not record endpoint state', { endpoint_id: id, err: err as Error });
    }
    if (disabled) {
      const reason = `answered 410 Gone for ${this.cfg.webhooks.disable_after_410_days} consecutive days`;
      this.log.warn('webhook endpoint disabled; tell the account owner', {
        endpoint_id: id,
        url: shownUrl(e.url),
        reason,
      });
      this.events.emit('webhook.disabled', e.environment, { endpoint: endpointEventView(next), reason }, now);
    }
    return disabled;
  }
}
