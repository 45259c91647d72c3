import type { EventRecord, EventView } from '../events/event.js';
import type { Store } from './store.js';
import { queryRows } from './store.js';

/**
 * The fan-out's poll: by the sort key (recorded_at, id), so it reads only the
 * granules after the position, never the whole table (a test pins the plan).
 */
export const recordedAfterSql = (db: string): string =>
  `SELECT id, environment, type, toUnixTimestamp64Milli(created_at) AS created_ms, data,
      toUnixTimestamp64Milli(recorded_at) AS recorded_ms
    FROM ${db}.events
    WHERE recorded_at >= fromUnixTimestamp64Milli({rt:Int64}, 'UTC')
      AND (recorded_at, id) > (fromUnixTimestamp64Milli({rt:Int64}, 'UTC'), {rid:String})
    ORDER BY recorded_at, id LIMIT {lim:UInt32}`;

/** An event as list and since read it from storage. */
interface EventRow {
  id: string;
  environment: string;
  type: string;
  created_ms: string;
  data: string;
}

const viewsOf = (rows: readonly EventRow[]): EventView[] =>
  rows.map((r) => ({
    id: r.id,
    environment: r.environment,
    type: r.type,
    created_at: Number(r.created_ms),
    data: JSON.parse(r.data) as Record<string, unknown>,
  }));

/** Owns the events table: every event raised, which the webhook dispatcher fans out. */
export class EventTable {
  constructor(private readonly store: Store) {}

  async insert(events: readonly EventRecord[], token?: string): Promise<void> {
    if (events.length === 0) return;
    await this.store.client.insert({
      table: `${this.store.db}.events`,
      format: 'JSONEachRow',
      values: events.map((e) => ({
        id: e.id,
        environment: e.environment,
        type: e.type,
        created_at: e.created_at,
        // Serialized when raised (a batch adopted from a very old spool may still hold an object).
        data: typeof e.data === 'string' ? e.data : JSON.stringify(e.data),
      })),
      ...(token ? { clickhouse_settings: { insert_deduplication_token: token } } : {}),
    });
  }

  async list(filter: { type?: string; environment?: string } = {}, limit = 1000): Promise<EventView[]> {
    const where: string[] = ['1'];
    const params: Record<string, unknown> = { lim: limit };
    if (filter.type) {
      where.push('type = {type:String}');
      params.type = filter.type;
    }
    if (filter.environment) {
      where.push('environment = {env:String}');
      params.env = filter.environment;
    }
    const sql = `SELECT id, environment, type, toUnixTimestamp64Milli(created_at) AS created_ms, data
      FROM ${this.store.db}.events FINAL WHERE ${where.join(' AND ')} ORDER BY created_at, id LIMIT {lim:UInt32}`;
    return viewsOf(await queryRows<EventRow>(this.store, sql, params));
  }

  /** Events of `type` raised at or after `sinceMs`, oldest first (at most `limit`). */
  async since(type: string, sinceMs: number, limit = 1000): Promise<EventView[]> {
    const sql = `SELECT id, environment, type, toUnixTimestamp64Milli(created_at) AS created_ms, data
      FROM ${this.store.db}.events FINAL
      WHERE type = {type:String} AND created_at >= fromUnixTimestamp64Milli({since:Int64})
      ORDER BY created_at, id LIMIT {lim:UInt32}`;
    return viewsOf(await queryRows<EventRow>(this.store, sql, { type, since: Math.floor(sinceMs), lim: limit }));
  }

  /** The store's own clock (milliseconds); `recorded_at` is stamped by it. */
  async serverNow(): Promise<number> {
    const [row] = await queryRows<{ t: string }>(this.store, 'SELECT toUnixTimestamp64Milli(now64(3)) AS t');
    return Number(row?.t ?? Date.now());
  }

  /**
   * One page of events recorded (inserted) after the position (recordedMs, id),
   * in recording order. The fan-out reads by recording time, not by the event's own
   * time, so an event raised with a past timestamp is still seen.
   */
  async recordedAfter(
    recordedMs: number,
    afterId: string,
    limit = 2000,
  ): Promise<(EventRecord & { recorded_at: number })[]> {
    const sql = recordedAfterSql(this.store.db);
    const rows = await queryRows<{
      id: string;
      environment: string;
      type: string;
      created_ms: string;
      data: string;
      recorded_ms: string;
    }>(this.store, sql, { rt: recordedMs, rid: afterId, lim: limit });
    return rows.map((r) => ({
      id: r.id,
      environment: r.environment,
      type: r.type,
      created_at: Number(r.created_ms),
      recorded_at: Number(r.recorded_ms),
      data: r.data,
    }));
  }
}
