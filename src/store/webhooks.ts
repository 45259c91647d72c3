import type { SecretBox } from '../seal.js';
import type { AttemptLog, DeliveryRecord, DeliveryStatus, EndpointRecord } from '../webhooks/records.js';
import type { Store } from './store.js';
import { queryRows } from './store.js';

const ms = (v: string | null): number | null => (v === null ? null : Number(v));
const tsCol = (c: string) => `if(isNull(${c}), NULL, toUnixTimestamp64Milli(assumeNotNull(${c}))) AS ${c}_ms`;

/** Owns the webhook_endpoints and webhook_endpoint_deletions tables. Signing secrets are stored sealed, never in clear. */
export class EndpointTable {
  constructor(
    private readonly store: Store,
    private readonly box: SecretBox,
    /** Called with the id of a row whose sealed secret did not open (moved from another row, or altered); it is left out. */
    private readonly onUnsealable: (id: string) => void = () => {},
  ) {}

  async put(e: EndpointRecord): Promise<void> {
    // The delete first: a version stored without it (a crash between) is deleted all the same when read.
    if (e.status === 'deleted') {
      await this.store.client.insert({
        table: `${this.store.db}.webhook_endpoint_deletions`,
        format: 'JSONEachRow',
        values: [{ id: e.id, deleted_at: e.disabled_at ?? e.updated_at, written_at: e.updated_at }],
      });
    }
    await this.store.client.insert({
      table: `${this.store.db}.webhook_endpoints`,
      format: 'JSONEachRow',
      values: [
        {
          ...e,
          secret: this.box.seal(e.secret, e.id),
          previous_secret: e.previous_secret ? this.box.seal(e.previous_secret, e.id) : '',
        },
      ],
    });
    this.store.changes?.changed('webhook_endpoints');
  }

  /**
   * Every endpoint changed at or after `sinceMs` (all for 0), its latest version, and
   * those another instance deleted since: an endpoint with a stored delete reads deleted,
   * whatever later version an instance wrote from an older read.
   */
  async changedSince(sinceMs: number): Promise<EndpointRecord[]> {
    const changed = await this.versions(`updated_at >= fromUnixTimestamp64Milli({since:Int64}, 'UTC')`, {
      since: sinceMs,
    });
    const ids = changed.map((e) => e.id);
    // HAVING, not a subquery: on a cluster both would be Distributed tables, which ClickHouse refuses to nest.
    const deletes = await queryRows<{ id: string; deleted_ms: string; written_ms: string }>(
      this.store,
      `SELECT id, toUnixTimestamp64Milli(min(deleted_at)) AS deleted_ms, toUnixTimestamp64Milli(max(written_at)) AS written_ms
        FROM ${this.store.db}.webhook_endpoint_deletions GROUP BY id
        ${sinceMs === 0 ? '' : "HAVING id IN {ids:Array(String)} OR max(written_at) >= fromUnixTimestamp64Milli({since:Int64}, 'UTC')"}`,
      { ids, since: sinceMs },
    );
    const deleted = new Map(deletes.map((d) => [d.id, { at: Number(d.deleted_ms), written: Number(d.written_ms) }]));
    const seen = new Set(ids);
    const others = [...deleted.keys()].filter((id) => !seen.has(id));
    const all =
      others.length === 0
        ? changed
        : [...changed, ...(await this.versions('id IN {ids:Array(String)}', { ids: others }))];
    return all.map((e) => {
      const d = deleted.get(e.id);
      if (d === undefined || (e.status === 'deleted' && e.updated_at >= d.written)) return e;
      return {
        ...e,
        status: 'deleted' as const,
        disabled_at: e.status === 'deleted' ? e.disabled_at : d.at,
        updated_at: Math.max(e.updated_at, d.written),
      };
    });
  }

  /** The latest version of each endpoint `where` selects, its secrets opened (a row whose seal does not open is left out). */
  private async versions(where: string, params: Record<string, unknown>): Promise<EndpointRecord[]> {
    const sql = `SELECT id, environment, url, events, secret, status, previous_secret, ${tsCol('previous_secret_until')},
        toUnixTimestamp64Milli(created_at) AS created_ms, ${tsCol('first_410_at')}, ${tsCol('disabled_at')},
        toUnixTimestamp64Milli(updated_at) AS updated_ms
      FROM ${this.store.db}.webhook_endpoints FINAL
      WHERE ${where}`;
    type Row = Omit<
      EndpointRecord,
      'created_at' | 'first_410_at' | 'disabled_at' | 'updated_at' | 'previous_secret_until'
    > & {
      previous_secret_until_ms: string | null;
      created_ms: string;
      first_410_at_ms: string | null;
      disabled_at_ms: string | null;
      updated_ms: string;
    };
    const out: EndpointRecord[] = [];
    for (const r of await queryRows<Row>(this.store, sql, params)) {
      let secret: string;
      let previous = '';
      try {
        secret = this.box.open(r.secret, r.id);
        if (r.previous_secret) previous = this.box.open(r.previous_secret, r.id);
      } catch {
        // Sealed for another row, or altered: never sign with it.
        this.onUnsealable(r.id);
        continue;
      }
      out.push({
        id: r.id,
        environment: r.environment,
        url: r.url,
        events: r.events,
        secret,
        previous_secret: previous,
        previous_secret_until: ms(r.previous_secret_until_ms),
        status: r.status,
        created_at: Number(r.created_ms),
        first_410_at: ms(r.first_410_at_ms),
        disabled_at: ms(r.disabled_at_ms),
        updated_at: Number(r.updated_ms),
      });
    }
    return out;
  }
}

interface DeliveryRowOut
  extends Omit<DeliveryRecord, 'created_at' | 'next_attempt_at' | 'updated_at' | 'is_replay' | 'replay_of'> {
  is_replay: number;
  replay_of: string;
  created_ms: string;
  next_attempt_at_ms: string | null;
  updated_ms: string;
}

const DELIVERY_SELECT = `SELECT id, environment, endpoint_id, event_id, event_type, payload, attempt, max_attempts, status,
  response_status, response_body, duration_ms, is_replay, replay_of,
  toUnixTimestamp64Milli(created_at) AS created_ms, ${tsCol('next_attempt_at')}, toUnixTimestamp64Milli(updated_at) AS updated_ms`;

const fromDeliveryRow = (r: DeliveryRowOut): DeliveryRecord => ({
  id: r.id,
  environment: r.environment,
  endpoint_id: r.endpoint_id,
  event_id: r.event_id,
  event_type: r.event_type,
  payload: r.payload,
  attempt: Number(r.attempt),
  max_attempts: Number(r.max_attempts),
  status: r.status,
  response_status: Number(r.response_status),
  response_body: r.response_body,
  duration_ms: Number(r.duration_ms),
  is_replay: Number(r.is_replay) === 1,
  replay_of: r.replay_of || null,
  created_at: Number(r.created_ms),
  next_attempt_at: ms(r.next_attempt_at_ms),
  updated_at: Number(r.updated_ms),
});

export interface DeliveryFilter {
  environment: string;
  endpointId?: string;
  status?: DeliveryStatus;
  eventType?: string;
}

/** Owns the webhook_deliveries table. Each state change is a new row version. */
export class DeliveryTable {
  constructor(private readonly store: Store) {}

  async put(rows: readonly DeliveryRecord[]): Promise<void> {
    if (rows.length === 0) return;
    await this.store.client.insert({
      table: `${this.store.db}.webhook_deliveries`,
      format: 'JSONEachRow',
      values: rows.map(({ attempt_log: _, ...d }) => ({
        ...d,
        is_replay: d.is_replay ? 1 : 0,
        replay_of: d.replay_of ?? '',
      })),
    });
    // The attempts log: keyed by (delivery, attempt), so a batch written twice is stored once.
    const attempts = rows.filter((d) => d.attempt_log !== undefined);
    if (attempts.length === 0) return;
    await this.store.client.insert({
      table: `${this.store.db}.webhook_attempts`,
      format: 'JSONEachRow',
      values: attempts.map((d) => {
        const a = d.attempt_log as AttemptLog;
        return { environment: d.environment, delivery_id: d.id, ...a, error: a.error ?? '' };
      }),
    });
  }

  /** Every attempt of one delivery, in order. */
  async attempts(environment: string, id: string): Promise<AttemptLog[]> {
    const sql = `SELECT attempt, toUnixTimestamp64Milli(at) AS at_ms, response_status, duration_ms, error, response_body
      FROM ${this.store.db}.webhook_attempts FINAL
      WHERE environment = {env:String} AND delivery_id = {id:String} ORDER BY attempt`;
    type Row = {
      attempt: number;
      at_ms: string;
      response_status: number;
      duration_ms: number;
      error: string;
      response_body: string;
    };
    return (await queryRows<Row>(this.store, sql, { env: environment, id })).map((r) => ({
      attempt: Number(r.attempt),
      at: Number(r.at_ms),
      response_status: Number(r.response_status),
      duration_ms: Number(r.duration_ms),
      error: r.error === '' ? null : r.error,
      response_body: r.response_body,
    }));
  }

  /** Deliveries still owed an attempt (pending or failed with a next attempt), for resuming after a restart. */
  async unfinished(): Promise<DeliveryRecord[]> {
    const sql = `${DELIVERY_SELECT} FROM ${this.store.db}.webhook_deliveries FINAL
      WHERE status IN ('pending', 'failed') AND next_attempt_at IS NOT NULL`;
    return (await queryRows<DeliveryRowOut>(this.store, sql)).map(fromDeliveryRow);
  }

  /** The unfinished deliveries among these ids (a fleet's queue in Redis names them; storage says what they are). */
  async unfinishedAmong(ids: readonly string[]): Promise<DeliveryRecord[]> {
    if (ids.length === 0) return [];
    const sql = `${DELIVERY_SELECT} FROM ${this.store.db}.webhook_deliveries FINAL
      WHERE id IN {ids:Array(String)} AND status IN ('pending', 'failed') AND next_attempt_at IS NOT NULL`;
    return (await queryRows<DeliveryRowOut>(this.store, sql, { ids: [...ids] })).map(fromDeliveryRow);
  }

  /** (event_id, endpoint_id) pairs that already have a delivery, among these events. */
  async existingPairs(eventIds: readonly string[]): Promise<Set<string>> {
    if (eventIds.length === 0) return new Set();
    const sql = `SELECT DISTINCT event_id, endpoint_id FROM ${this.store.db}.webhook_deliveries
      WHERE event_id IN {ids:Array(String)} AND is_replay = 0`;
    const rows = await queryRows<{ event_id: string; endpoint_id: string }>(this.store, sql, { ids: eventIds });
    return new Set(rows.map((r) => `${r.event_id}|${r.endpoint_id}`));
  }

  async get(environment: string, id: string): Promise<DeliveryRecord | null> {
    const sql = `${DELIVERY_SELECT} FROM ${this.store.db}.webhook_deliveries FINAL
      WHERE environment = {env:String} AND id = {id:String}`;
    const [row] = await queryRows<DeliveryRowOut>(this.store, sql, { env: environment, id });
    return row ? fromDeliveryRow(row) : null;
  }

  /** Newest first, keyset on id (ids sort by creation time). */
  async list(
    f: DeliveryFilter,
    limit: number,
    beforeId: string | null,
  ): Promise<{ rows: DeliveryRecord[]; hasMore: boolean }> {
    const where = ['environment = {env:String}'];
    const params: Record<string, unknown> = { env: f.environment, lim: limit + 1 };
    if (f.endpointId !== undefined) {
      where.push('endpoint_id = {ep:String}');
      params.ep = f.endpointId;
    }
    if (f.status !== undefined) {
      where.push('status = {st:String}');
      params.st = f.status;
    }
    if (f.eventType !== undefined) {
      where.push('event_type = {et:String}');
      params.et = f.eventType;
    }
    if (beforeId !== null) {
      where.push('id < {before:String}');
      params.before = beforeId;
    }
    const sql = `${DELIVERY_SELECT} FROM ${this.store.db}.webhook_deliveries FINAL
      WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT {lim:UInt32}`;
    const rows = (await queryRows<DeliveryRowOut>(this.store, sql, params)).map(fromDeliveryRow);
    const hasMore = rows.length > limit;
    return { rows: hasMore ? rows.slice(0, limit) : rows, hasMore };
  }
}

/** Owns the fan-out cursor: how far each instance has turned recorded events into deliveries. */
export class FanoutCursorTable {
  constructor(private readonly store: Store) {}

  async get(instance: number): Promise<number | null> {
    const sql = `SELECT toUnixTimestamp64Milli(recorded_at) AS t FROM ${this.store.db}.webhook_fanout_cursor FINAL
      WHERE instance = {i:UInt16}`;
    const [row] = await queryRows<{ t: string }>(this.store, sql, { i: instance });
    return row ? Number(row.t) : null;
  }

  async set(instance: number, recordedMs: number, nowMs: number): Promise<void> {
    await this.store.client.insert({
      table: `${this.store.db}.webhook_fanout_cursor`,
      format: 'JSONEachRow',
      values: [{ instance, recorded_at: recordedMs, updated_at: nowMs }],
    });
  }
}

/** Keeps deliveries (dead-lettered ones included) for the retention window. */
export async function applyDeliveryRetention(store: Store, days: number): Promise<void> {
  const n = Math.max(1, Math.floor(days));
  await store.client.command({
    query: `ALTER TABLE ${store.db}.${store.cluster === null ? 'webhook_deliveries' : `webhook_deliveries_local ON CLUSTER ${store.cluster}`} MODIFY TTL toDateTime(updated_at) + toIntervalDay(${n})`,
  });
}
