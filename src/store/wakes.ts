import { open, readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { bodyFrom, type WakeDetail } from '../capture/detail-types.js';
import type { Wake } from '../capture/wake.js';
import type { WakeFilter } from '../capture/wake-filter.js';
import type { LineParts } from '../capture/wake-log.js';
import { refusalMarked } from './refusal.js';
import type { Store } from './store.js';
import { queryRows } from './store.js';
import {
  DETAIL_COLUMNS,
  LOG_COLUMN_NAMES,
  LOG_INSERT_SETTINGS,
  logSegmentInsert,
  SEGMENT_INSERT_SETTINGS,
  segmentInserts,
  splitLog,
  WAKE_COLUMNS,
} from './wake-log-table.js';

/**
 * What the inserter needs of the log's line format (capture/wake-log.ts): the line
 * of a wake held in memory, and the tag that names a segment written in it.
 */
export interface WakeLines {
  encode(w: Wake): string | LineParts;
  readonly segmentTag: string;
}

const lineText = (e: string | LineParts): string =>
  typeof e === 'string'
    ? `${e}\n`
    : Buffer.concat(e.map((p) => (typeof p === 'string' ? Buffer.from(p) : p))).toString();

/** Owns every write to the wakes table (and its detail). */
export class WakeInserter {
  constructor(
    private readonly store: Store,
    private readonly lines: WakeLines,
  ) {}

  /**
   * Inserts one batch. `token` makes the insert idempotent: a batch retried after an
   * ambiguous failure (or replayed from the log) is stored once. `file` is the
   * batch's sealed segment of the write-ahead log, which holds exactly its wakes
   * (`wakes` is empty when they were not kept in memory).
   */
  insert(wakes: readonly Wake[], token: string, file: string | null = null): Promise<void> {
    return refusalMarked(() => this.insertOnce(wakes, token, file));
  }

  private async insertOnce(wakes: readonly Wake[], token: string, file: string | null): Promise<void> {
    if (wakes.length === 0 && file === null) return;
    // Wakes not kept in memory may have detail: an earlier version's segment then takes both inserts.
    let detail = wakes.length === 0;
    for (const w of wakes) if (w.detail || w.detail_in_log) detail = true;
    const tagged = file !== null && basename(file).endsWith(`.${this.lines.segmentTag}.wal`);
    if (file && this.store.readsFiles) {
      // The embedded engine reads the segment itself: nothing is serialized again.
      if (tagged) {
        await this.command(logSegmentInsert(this.store.db, file), token, LOG_INSERT_SETTINGS);
        return;
      }
      const q = segmentInserts(this.store.db, file);
      await this.command(q.wakes, token);
      if (detail) await this.command(q.details, `${token}:d`);
      return;
    }
    if (file && tagged) {
      // A ClickHouse server gets the segment's file as the body of one insert into the
      // log table: nothing read into memory or cut into lines here. Opened first, so a
      // file that is gone rejects this insert (kept, retried, logged) rather than a
      // stream's open error reaching no listener, which would end the process.
      const fh = await open(file, 'r');
      const values = fh.createReadStream();
      // A read error fails the request the client pipes it into; never an unhandled 'error'.
      values.on('error', () => {});
      try {
        await this.store.client.insert({
          table: `${this.store.db}.wake_log`,
          columns: LOG_COLUMN_NAMES as [string, ...string[]],
          format: 'TabSeparated',
          values,
          clickhouse_settings: { ...LOG_INSERT_SETTINGS, insert_deduplication_token: token, insert_deduplicate: 1 },
        });
      } finally {
        // Its file is closed whatever became of the request (a stream never read keeps it open).
        values.destroy();
      }
      return;
    }
    const text = file ? await readFile(file, 'utf8') : wakes.map((w) => lineText(this.lines.encode(w))).join('');
    const cut = splitLog(text);
    await this.store.insertBytes('wakes', WAKE_COLUMNS, 'TabSeparated', Buffer.from(cut.wakes), token);
    if (cut.details !== '')
      await this.store.insertBytes(
        'wake_details',
        DETAIL_COLUMNS,
        'TabSeparated',
        Buffer.from(cut.details),
        `${token}:d`,
      );
  }

  private async command(query: string, token: string, settings: Record<string, number> = {}): Promise<void> {
    await this.store.client.command({
      query,
      clickhouse_settings: {
        ...SEGMENT_INSERT_SETTINGS,
        ...settings,
        insert_deduplication_token: token,
        insert_deduplicate: 1,
      },
    });
  }
}

/** One route's traffic in one minute (GET /v2/stats). */
export interface StatsRow {
  route: string;
  minute: number;
  requests: number;
  errors: number;
  p50: number;
  p95: number;
  p99: number;
}

/** Keyset position: the last row of the previous page. */
export interface WakePosition {
  t: number;
  id: string;
}

interface WakeRowOut
  extends Omit<Wake, 'captured_at' | 'request_bytes' | 'response_bytes' | 'path_truncated' | 'detail'> {
  path_truncated: number | string;
  captured_ms: string | number;
  request_bytes: string | number;
  response_bytes: string | number;
}

const SELECT = `SELECT id, method, path, route, status, latency_ms, consumer, key_id, environment, region,
  toUnixTimestamp64Milli(captured_at) AS captured_ms, request_bytes, response_bytes, client_ip, user_agent,
  path_truncated, replay_of, protocol, tls_subject, tls_fingerprint, trace_id, span_id`;

const fromRow = (r: WakeRowOut): Wake => ({
  id: r.id,
  method: r.method,
  path: r.path,
  path_truncated: Number(r.path_truncated) === 1,
  ...(r.replay_of ? { replay_of: r.replay_of } : {}),
  ...(r.protocol && r.protocol !== 'http/1.1' ? { protocol: r.protocol } : {}),
  ...(r.tls_fingerprint ? { tls_subject: r.tls_subject ?? '', tls_fingerprint: r.tls_fingerprint } : {}),
  ...(r.trace_id ? { trace_id: r.trace_id, span_id: r.span_id ?? '' } : {}),
  route: r.route,
  status: Number(r.status),
  latency_ms: Number(r.latency_ms),
  consumer: r.consumer,
  key_id: r.key_id,
  environment: r.environment,
  region: r.region,
  captured_at: Number(r.captured_ms),
  request_bytes: Number(r.request_bytes),
  response_bytes: Number(r.response_bytes),
  client_ip: r.client_ip,
  user_agent: r.user_agent,
});

/** Owns every read of the wakes table. */
export class WakeQuerier {
  constructor(private readonly store: Store) {}

  /**
   * Newest first; returns up to `limit` rows and whether more exist after them.
   * Reading newest-first merges every daily part, so a selective filter would read
   * a block of each day; the query first looks at the last day, then the last 7,
   * then everything. Each window holds exactly the newest rows up to its bound, so
   * the first one that yields a full page gives the right page.
   */
  async list(
    filter: WakeFilter,
    limit: number,
    after: WakePosition | null,
    now: number = Date.now(),
  ): Promise<{ rows: Wake[]; hasMore: boolean }> {
    const top = Math.min(after ? after.t : now, filter.until ?? Number.POSITIVE_INFINITY);
    for (const days of [1, 7, null]) {
      const since = days === null ? null : top - days * 86_400_000;
      const rows = await this.listWindow(filter, limit, after, since);
      if (rows.length > limit || since === null) {
        const hasMore = rows.length > limit;
        return { rows: hasMore ? rows.slice(0, limit) : rows, hasMore };
      }
    }
    throw new Error('unreachable');
  }

  private async listWindow(
    filter: WakeFilter,
    limit: number,
    after: WakePosition | null,
    since: number | null,
  ): Promise<Wake[]> {
    const where = ['environment = {env:String}'];
    const params: Record<string, unknown> = { env: filter.environment, lim: limit + 1 };
    if (since !== null) {
      where.push("captured_at >= fromUnixTimestamp64Milli({since:Int64}, 'UTC')");
      params.since = since;
    }
    if (filter.status !== undefined) {
      where.push('status = {status:UInt16}');
      params.status = filter.status;
    }
    if (filter.statusClass !== undefined) {
      where.push('status >= {slo:UInt16} AND status <= {shi:UInt16}');
      params.slo = filter.statusClass * 100;
      params.shi = filter.statusClass * 100 + 99;
    }
    if (filter.pathExact !== undefined) {
      where.push('path = {path_eq:String}');
      params.path_eq = filter.pathExact;
    } else if (filter.pathPattern !== undefined) {
      if (filter.pathPrefix) {
        where.push('startsWith(path, {path_pre:String})');
        params.path_pre = filter.pathPrefix;
      }
      where.push('match(path, {path_re:String})');
      params.path_re = filter.pathPattern;
    }
    if (filter.consumer !== undefined) {
      where.push('consumer = {consumer:String}');
      params.consumer = filter.consumer;
    }
    if (filter.minLatencyMs !== undefined) {
      where.push('latency_ms > {min_lat:UInt32}');
      params.min_lat = filter.minLatencyMs;
    }
    if (filter.keyId !== undefined) {
      where.push('key_id = {key_id:String}');
      params.key_id = filter.keyId;
    }
    if (filter.traceId !== undefined) {
      // Read through the bloom index on trace_id (migration 16).
      where.push('trace_id = {trace_id:String}');
      params.trace_id = filter.traceId;
    }
    if (filter.since !== undefined) {
      where.push("captured_at >= fromUnixTimestamp64Milli({f_since:Int64}, 'UTC')");
      params.f_since = filter.since;
    }
    if (filter.until !== undefined) {
      where.push("captured_at < fromUnixTimestamp64Milli({f_until:Int64}, 'UTC')");
      params.f_until = filter.until;
    }
    if (filter.method !== undefined) {
      where.push('method = {method:String}');
      params.method = filter.method;
    }
    if (filter.route !== undefined) {
      where.push('route = {route:String}');
      params.route = filter.route;
    }
    if (filter.excludeRoutes !== undefined && filter.excludeRoutes.length > 0) {
      where.push('route NOT IN {mgmt:Array(String)}');
      params.mgmt = filter.excludeRoutes;
    }
    if (after) {
      // Keyset on (captured_at, id): rows sharing a millisecond are ordered by id,
      // so none is skipped or repeated across pages.
      where.push(
        "(captured_at < fromUnixTimestamp64Milli({ct:Int64}, 'UTC') OR (captured_at = fromUnixTimestamp64Milli({ct:Int64}, 'UTC') AND id < {cid:String}))",
      );
      params.ct = after.t;
      params.cid = after.id;
    }
    const sql = `${SELECT} FROM ${this.store.db}.wakes WHERE ${where.join(' AND ')}
      ORDER BY captured_at DESC, id DESC LIMIT {lim:UInt32}`;
    return (await queryRows<WakeRowOut>(this.store, sql, params)).map(fromRow);
  }

  /** One wake by id in one environment; the id's time part narrows the scan to one millisecond. */
  async get(environment: string, id: string, capturedAt: number): Promise<Wake | null> {
    const sql = `${SELECT} FROM ${this.store.db}.wakes
      WHERE environment = {env:String} AND captured_at = fromUnixTimestamp64Milli({t:Int64}, 'UTC') AND id = {id:String}
      LIMIT 1`;
    const rows = await queryRows<WakeRowOut>(this.store, sql, { env: environment, t: capturedAt, id });
    return rows[0] ? fromRow(rows[0]) : null;
  }

  /**
   * Per route and minute over [since, until): requests, 5xx, and p50/p95/p99 of
   * latency. Reads the environment's rows in the time range only (sort key prefix).
   */
  async stats(
    environment: string,
    since: number,
    until: number,
    route?: string,
    excludeRoutes: readonly string[] = [],
  ): Promise<StatsRow[]> {
    const params: Record<string, unknown> = { env: environment, since, until };
    let extra = '';
    if (route !== undefined) {
      extra = ' AND route = {route:String}';
      params.route = route;
    }
    if (excludeRoutes.length > 0) {
      extra += ' AND route NOT IN {mgmt:Array(String)}';
      params.mgmt = excludeRoutes;
    }
    const sql = `SELECT route, toUnixTimestamp64Milli(toDateTime64(toStartOfMinute(captured_at), 3, 'UTC')) AS minute_ms,
        count() AS requests, countIf(status >= 500) AS errors,
        quantilesTDigest(0.5, 0.95, 0.99)(latency_ms) AS q
      FROM ${this.store.db}.wakes
      WHERE environment = {env:String}
        AND captured_at >= fromUnixTimestamp64Milli({since:Int64}, 'UTC')
        AND captured_at < fromUnixTimestamp64Milli({until:Int64}, 'UTC')${extra}
      GROUP BY route, minute_ms ORDER BY route, minute_ms`;
    type Row = { route: string; minute_ms: string; requests: string; errors: string; q: number[] };
    return (await queryRows<Row>(this.store, sql, params)).map((r) => ({
      route: r.route,
      minute: Number(r.minute_ms),
      requests: Number(r.requests),
      errors: Number(r.errors),
      p50: Math.round(Number(r.q[0] ?? 0)),
      p95: Math.round(Number(r.q[1] ?? 0)),
      p99: Math.round(Number(r.q[2] ?? 0)),
    }));
  }

  /** The detail of one wake (null when it kept none). */
  async detail(environment: string, id: string, capturedAt: number): Promise<WakeDetail | null> {
    const sql = `SELECT query, request_headers, response_headers, request_body, request_body_bytes, request_body_state,
        request_body_encoding, response_body, response_body_bytes, response_body_state, response_body_encoding, diff
      FROM ${this.store.db}.wake_details
      WHERE environment = {env:String} AND captured_at = fromUnixTimestamp64Milli({t:Int64}, 'UTC') AND id = {id:String}
      LIMIT 1`;
    type Row = Record<string, string>;
    const [r] = await queryRows<Row>(this.store, sql, { env: environment, t: capturedAt, id });
    if (!r) return null;
    const parse = <T>(v: string): T | null => (v === '' ? null : (JSON.parse(v) as T));
    return {
      query: r.query as string,
      request_headers: parse(r.request_headers as string),
      response_headers: parse(r.response_headers as string),
      request_body: bodyFrom(
        r.request_body as string,
        r.request_body_bytes as string,
        r.request_body_state as string,
        r.request_body_encoding as string,
      ),
      response_body: bodyFrom(
        r.response_body as string,
        r.response_body_bytes as string,
        r.response_body_state as string,
        r.response_body_encoding as string,
      ),
      diff: parse(r.diff as string),
    };
  }

  async count(environment?: string): Promise<number> {
    const sql = environment
      ? `SELECT count() AS c FROM ${this.store.db}.wakes WHERE environment = {env:String}`
      : `SELECT count() AS c FROM ${this.store.db}.wakes`;
    const [row] = await queryRows<{ c: string }>(this.store, sql, environment ? { env: environment } : {});
    return Number(row?.c ?? 0);
  }
}
