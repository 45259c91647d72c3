import { Readable } from 'node:stream';
import type { Store } from './client.js';
import { queryRows } from './client.js';
import type { StoredBody, WakeDetail } from './detail-types.js';

/** One captured request: SPEC.md's wake plus what the gateway knows about it. */
export interface Wake {
  id: string;
  method: string;
  path: string;
  /**
   * The gateway answered without asking the origin (a refused key, scope, limit,
   * route or path). Not stored; the SLO rules leave such wakes out of an origin's
   * objective.
   */
  refused?: boolean;
  /** Days the wake is kept (its environment's retention), set when it is recorded. */
  retention_days?: number;
  /** A replay's wake: the id of the wake it replays. */
  replay_of?: string;
  /** The exchange, redacted (absent when the route keeps none, or the budget was spent). */
  detail?: WakeDetail;
  /** The path was longer than the stored cap and was cut (absent: false). */
  path_truncated?: boolean;
  route: string;
  status: number;
  latency_ms: number;
  consumer: string;
  key_id: string;
  environment: string;
  region: string;
  /** Milliseconds since the epoch; the same millisecond as the id's time part. */
  captured_at: number;
  request_bytes: number;
  response_bytes: number;
  client_ip: string;
  user_agent: string;
}

const COLUMNS = [
  'id',
  'environment',
  'captured_at',
  'method',
  'path',
  'route',
  'status',
  'latency_ms',
  'consumer',
  'key_id',
  'region',
  'request_bytes',
  'response_bytes',
  'client_ip',
  'user_agent',
  'retention_days',
  'path_truncated',
  'replay_of',
] as const;

const DETAIL_COLUMNS = [
  'id',
  'environment',
  'captured_at',
  'query',
  'request_headers',
  'response_headers',
  'request_body',
  'request_body_bytes',
  'request_body_state',
  'request_body_encoding',
  'response_body',
  'response_body_bytes',
  'response_body_state',
  'response_body_encoding',
  'diff',
  'retention_days',
] as const;

/** A body in its own columns, not JSON inside JSON (state: -1 none kept, 0 whole, 1 cut). */
const bodyCols = (b: StoredBody | null): [string, number, number, string] =>
  b === null ? ['', 0, -1, ''] : [b.body, b.bytes, b.truncated ? 1 : 0, b.encoding];
const bodyFrom = (body: string, bytes: number | string, state: number | string, encoding: string): StoredBody | null =>
  Number(state) < 0
    ? null
    : {
        body,
        bytes: Number(bytes),
        truncated: Number(state) === 1,
        encoding: encoding === 'base64' ? 'base64' : 'utf8',
      };

const json = (v: unknown): string => (v === null || v === undefined ? '' : JSON.stringify(v));

const TSV_SPECIAL_ALL = /[\\\t\n\r\0]/g;
const TSV_ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r', '\0': '\\0' };
/** A TabSeparated value: backslash, tab, newline, CR and NUL escaped; everything else as it is. */
const tsvEscape = (s: string): string =>
  // indexOf of one character is a fast scan; a character class regex is not.
  s.indexOf('\\') === -1 &&
  s.indexOf('\t') === -1 &&
  s.indexOf('\n') === -1 &&
  s.indexOf('\r') === -1 &&
  s.indexOf('\0') === -1
    ? s
    : s.replace(TSV_SPECIAL_ALL, (c) => TSV_ESCAPES[c] as string);
/** DateTime64(3, 'UTC') in TabSeparated: 2026-11-22 10:00:00.123. */
const tsvTime = (ms: number): string => new Date(ms).toISOString().slice(0, 23).replace('T', ' ');

/** A wake's row in the table's column order (COLUMNS), as JSONCompactEachRow takes it. */
function row(w: Wake, retention: number): unknown[] {
  return [
    w.id,
    w.environment,
    w.captured_at,
    w.method,
    w.path,
    w.route,
    w.status,
    w.latency_ms,
    w.consumer,
    w.key_id,
    w.region,
    w.request_bytes,
    w.response_bytes,
    w.client_ip,
    w.user_agent,
    retention,
    w.path_truncated ? 1 : 0,
    w.replay_of ?? '',
  ];
}

/**
 * How a wake is written to the write-ahead log: its table row as a JSON array (the
 * insert sends the lines as they are, JSONCompactEachRow), then, after a tab, what
 * the table does not hold (detail, refused) as JSON. JSON never holds a raw tab, so
 * the tab always ends the row.
 */
export const wakeLogCodec = (retentionDays: (environment: string) => number) => ({
  encode(w: Wake): string {
    const base = JSON.stringify(row(w, w.retention_days ?? retentionDays(w.environment)));
    if (!w.detail && !w.refused) return base;
    // After the row: the refused flag, then the detail's cells exactly as its
    // TabSeparated insert takes them, so the detail too is serialized once.
    return `${base}\t${w.refused ? 1 : 0}${w.detail ? `\t${detailCells(w.detail)}` : ''}`;
  },
  decode(line: string): Wake {
    const tab = line.indexOf('\t');
    const r = JSON.parse(tab === -1 ? line : line.slice(0, tab)) as unknown[];
    const rest = tab === -1 ? '' : line.slice(tab + 1);
    const extra =
      rest === '' ? {} : { r: rest[0] === '1', d: rest.length > 1 ? detailFromCells(rest.slice(2)) : undefined };
    const w: Wake = {
      id: r[0] as string,
      environment: r[1] as string,
      captured_at: r[2] as number,
      method: r[3] as string,
      path: r[4] as string,
      route: r[5] as string,
      status: r[6] as number,
      latency_ms: r[7] as number,
      consumer: r[8] as string,
      key_id: r[9] as string,
      region: r[10] as string,
      request_bytes: r[11] as number,
      response_bytes: r[12] as number,
      client_ip: r[13] as string,
      user_agent: r[14] as string,
      retention_days: r[15] as number,
      path_truncated: r[16] === 1,
    };
    if (r[17]) w.replay_of = r[17] as string;
    if (extra.d) w.detail = extra.d;
    if (extra.r !== undefined) w.refused = extra.r;
    return w;
  },
});

/** A detail as the TabSeparated cells of wake_details after id, environment and time (DETAIL_COLUMNS). */
function detailCells(d: WakeDetail): string {
  const cells: (string | number)[] = [
    d.query,
    json(d.request_headers),
    json(d.response_headers),
    ...bodyCols(d.request_body),
    ...bodyCols(d.response_body),
    json(d.diff),
  ];
  let out = '';
  for (let i = 0; i < cells.length; i++) {
    const c = cells[i] as string | number;
    if (i > 0) out += '\t';
    out += typeof c === 'number' ? String(c) : tsvEscape(c);
  }
  return out;
}

const TSV_UNESCAPES: Record<string, string> = { '\\': '\\', t: '\t', n: '\n', r: '\r', '0': '\0' };
const tsvUnescape = (s: string): string =>
  s.indexOf('\\') === -1 ? s : s.replace(/\\(.)/g, (_m, c: string) => TSV_UNESCAPES[c] ?? c);

/** The detail back from its cells (a wake recovered from the log). */
function detailFromCells(text: string): WakeDetail {
  const c = text.split('\t').map(tsvUnescape);
  const parse = <T>(v: string | undefined): T | null => (v ? (JSON.parse(v) as T) : null);
  return {
    query: c[0] ?? '',
    request_headers: parse(c[1]),
    response_headers: parse(c[2]),
    request_body: bodyFrom(c[3] ?? '', c[4] ?? 0, c[5] ?? -1, c[6] ?? ''),
    response_body: bodyFrom(c[7] ?? '', c[8] ?? 0, c[9] ?? -1, c[10] ?? ''),
    diff: parse(c[11]),
  };
}

/** The table rows of a segment's lines: each line up to its tab (the lines themselves when none has one). */
function rowsOnly(lines: readonly string[]): readonly string[] {
  let out: string[] | null = null;
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i] as string;
    const tab = l.indexOf('\t');
    if (tab === -1) {
      if (out) out.push(l);
      continue;
    }
    out ??= lines.slice(0, i);
    out.push(`${l.slice(0, tab)}\n`);
  }
  return out ?? lines;
}

/** Lets the event loop breathe while a large batch is prepared, so requests never wait on it for long. */
const breathe = () => new Promise<void>((r) => setImmediate(r));
const SLICE = 500;

/** Owns every write to the wakes table. */
export class WakeInserter {
  constructor(
    private readonly store: Store,
    private readonly retentionDays: (environment: string) => number,
  ) {}

  /**
   * Inserts one batch. `token` makes the insert idempotent: a batch retried after an
   * ambiguous failure (or replayed from the spool) is stored once.
   */
  async insert(wakes: readonly Wake[], token: string, raw: readonly string[] = []): Promise<void> {
    if (wakes.length === 0) return;
    // The batch as the write-ahead log holds it (wakeLogCodec): each wake serialized once.
    const body =
      raw.length > 0
        ? rowsOnly(raw)
        : wakes.map((w) => `${JSON.stringify(row(w, this.retentionDays(w.environment)))}\n`);
    const r = await this.store.client.exec({
      query: `INSERT INTO ${this.store.db}.wakes (${COLUMNS.join(', ')}) FORMAT JSONCompactEachRow`,
      // One chunk: the connection gathers a stream chunk by chunk, one await each.
      values: Readable.from([body.join('')], { objectMode: false }),
      clickhouse_settings: { insert_deduplication_token: token, insert_deduplicate: 1 },
    });
    r.stream.resume();
    await this.insertDetails(wakes, token, raw);
  }
  /** The details of a batch, in their own table, under a token derived from the batch's. */
  private async insertDetails(wakes: readonly Wake[], token: string, raw: readonly string[] = []): Promise<void> {
    // Details go as TabSeparated: a body needs escaping only where it holds a
    // backslash, tab, newline or NUL (a scan that mostly finds none), where JSON would
    // escape every quote of every JSON body.
    const chunks: string[] = [];
    let tsv = '';
    let n = 0;
    const aligned = raw.length === wakes.length;
    for (let i = 0; i < wakes.length; i++) {
      const w = wakes[i] as Wake;
      const d = w.detail;
      if (!d) continue;
      if (++n % SLICE === 0) {
        chunks.push(tsv);
        tsv = '';
        await breathe();
      }
      // The detail's cells as the log line holds them (serialized when the wake was recorded).
      const line = aligned ? (raw[i] as string) : '';
      const at = line.indexOf('\t');
      const cells = at !== -1 && line.length > at + 3 ? line.slice(at + 3, line.length - 1) : detailCells(d);
      tsv += `${tsvEscape(w.id)}\t${tsvEscape(w.environment)}\t${tsvTime(w.captured_at)}\t${cells}\t${this.retentionDays(w.environment)}\n`;
    }
    if (tsv !== '') chunks.push(tsv);
    if (chunks.length === 0) return;
    // Its own token, derived from the batch's: a retried batch stores its details once too.
    await this.store.client.insert({
      table: `${this.store.db}.wake_details`,
      columns: [...DETAIL_COLUMNS],
      values: Readable.from(chunks, { objectMode: false }),
      format: 'TabSeparated',
      clickhouse_settings: { insert_deduplication_token: `${token}:d`, insert_deduplicate: 1 },
    });
  }
}

export interface WakeFilter {
  environment: string;
  status?: number;
  /** 2..5 for 2xx..5xx. */
  statusClass?: number;
  /** An RE2 pattern the whole path must match (built from a path template). */
  pathPattern?: string;
  /** A literal start every matching path has (narrows before the regex runs). */
  pathPrefix?: string;
  /** The exact path (a template with no placeholder). */
  pathExact?: string;
  consumer?: string;
  minLatencyMs?: number;
  keyId?: string;
  /** Captured at or after (ms). */
  since?: number;
  /** Captured before (ms). */
  until?: number;
  method?: string;
  route?: string;
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
  path_truncated, replay_of`;

const fromRow = (r: WakeRowOut): Wake => ({
  id: r.id,
  method: r.method,
  path: r.path,
  path_truncated: Number(r.path_truncated) === 1,
  ...(r.replay_of ? { replay_of: r.replay_of } : {}),
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
  async stats(environment: string, since: number, until: number, route?: string): Promise<StatsRow[]> {
    const params: Record<string, unknown> = { env: environment, since, until };
    let extra = '';
    if (route !== undefined) {
      extra = ' AND route = {route:String}';
      params.route = route;
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
