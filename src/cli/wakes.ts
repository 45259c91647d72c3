import { type Args, onlyFlags, operands, timeOption, UsageError } from './args.js';
import { type ApiClient, ApiError, Unreachable } from './client.js';
import { fields, printable, printableLines, table } from './table.js';

/** The filters of GET /v2/wakes, as options (src/api/wakes.ts listWakesQuery). */
export const WAKE_FILTERS: Record<string, string> = {
  environment: 'environment',
  status: 'status',
  'status-class': 'status_class',
  path: 'path',
  consumer: 'consumer',
  'key-id': 'key_id',
  'trace-id': 'trace_id',
  'min-latency-ms': 'min_latency_ms',
  since: 'since',
  until: 'until',
  method: 'method',
  route: 'route',
  management: 'management',
};
const FILTER_OPTIONS = Object.keys(WAKE_FILTERS);
const COLUMNS = ['captured_at', 'id', 'method', 'status', 'latency_ms', 'route', 'consumer', 'path'];

export interface WakeRow {
  id: string;
  captured_at: string;
  [k: string]: unknown;
}
interface Page {
  data: WakeRow[];
  has_more: boolean;
  next_cursor: string | null;
}

type Out = (s: string) => void;

/**
 * The filters as the API's query. --since and --until are checked first (ISO 8601 with
 * a zone): a usage error naming the option, never an instant read in the local zone.
 */
function filterQuery(args: Args): Record<string, string | undefined> {
  timeOption(args, 'since');
  timeOption(args, 'until');
  return Object.fromEntries(FILTER_OPTIONS.map((o) => [WAKE_FILTERS[o] as string, args.flags.get(o)]));
}

/** A whole number option within bounds, or a usage error naming it. */
export function intOption(args: Args, name: string, o: { min: number; max: number; fallback: number }): number {
  const v = args.flags.get(name);
  if (v === undefined) return o.fallback;
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < o.min || n > o.max)
    throw new UsageError(`--${name} must be a whole number from ${o.min} to ${o.max}`);
  return n;
}

/** wakes list: one page, newest first. */
export async function wakesList(args: Args, api: () => ApiClient, out: Out): Promise<void> {
  onlyFlags(args, [...FILTER_OPTIONS, 'limit', 'cursor']);
  operands(args, 2, null);
  const q = { ...filterQuery(args), limit: args.flags.get('limit'), cursor: args.flags.get('cursor') };
  const page = (await api().call('GET', '/v2/wakes', q)) as Page;
  if (args.bools.has('json')) return out(`${JSON.stringify(page, null, 2)}\n`);
  out(table(page.data, COLUMNS) + (page.has_more ? `(more: --cursor ${page.next_cursor})\n` : ''));
}

/** wakes show: the summary, then the request and the response as the API keeps them. */
export async function wakesShow(args: Args, api: () => ApiClient, out: Out): Promise<void> {
  onlyFlags(args, ['environment']);
  const id = operands(args, 2, 'WAKE_ID') as string;
  const w = (await api().call('GET', `/v2/wakes/${encodeURIComponent(id)}`, {
    environment: args.flags.get('environment'),
  })) as Record<string, unknown>;
  if (args.bools.has('json')) return out(`${JSON.stringify(w, null, 2)}\n`);
  const { request, response, diff, ...summary } = w as Record<string, unknown> & {
    request: Exchange | null;
    response: Exchange | null;
    diff: unknown;
  };
  let s = fields(summary);
  if (request === null) s += '\n(no request or response detail was kept for this wake)\n';
  else {
    s += `\nRequest\n  ${printable(`${w.method} ${w.path}${request.query ?? ''}`)}\n${exchange(request)}`;
    s += `\nResponse\n  ${w.status}\n${response ? exchange(response) : ''}`;
  }
  if (diff) s += `\nDiff against ${w.replay_of}\n${diffText(diff as Diff)}`;
  out(s);
}

interface Exchange {
  query?: string;
  headers: [string, string][] | null;
  body: string | null;
  body_bytes: number | null;
  body_truncated: boolean | null;
  body_encoding: string | null;
  body_sha256?: string | null;
  body_omitted_reason?: string | null;
}

function exchange(x: Exchange): string {
  let s = '';
  for (const [k, v] of x.headers ?? []) s += `  ${printable(k)}: ${printable(v)}\n`;
  if (x.headers === null) s += '  (headers not kept)\n';
  if (x.body_encoding === null) return `${s}  (body not kept)\n`;
  if (x.body_bytes === 0) return s;
  if (x.body_encoding === 'omitted')
    return `${s}\n  (body of ${x.body_bytes} bytes kept as size and SHA-256 only: ${x.body_omitted_reason ?? '-'}; sha256 ${x.body_sha256 ?? '-'})\n`;
  const note = `${x.body_encoding === 'base64' ? 'base64 of ' : ''}${x.body_bytes} bytes${x.body_truncated ? ', cut at the capture limit' : ''}`;
  // Its lines as lines (pretty JSON, HTML), each indented; every other control character escaped.
  return `${s}\n${printableLines(x.body ?? '').replace(/^/gm, '  ')}\n  (${note})\n`;
}

export interface Diff {
  identical: boolean;
  status: { before: unknown; after: unknown } | null;
  headers: { name: string; before: unknown; after: unknown }[];
  body: { path: string; before: unknown; after: unknown }[];
  ignored: string[];
}

const shown = (v: unknown): string => (v === undefined || v === null ? '(none)' : printable(JSON.stringify(v)));

/** A replay's diff for people: `identical`, or each changed status, header and body path. */
export function diffText(d: Diff): string {
  let s = d.identical ? 'identical: the origin answered as it did the first time\n' : 'changed:\n';
  if (d.status) s += `  status  ${shown(d.status.before)} -> ${shown(d.status.after)}\n`;
  for (const h of d.headers) s += `  header  ${printable(h.name)}: ${shown(h.before)} -> ${shown(h.after)}\n`;
  for (const b of d.body) s += `  body    ${printable(b.path)}: ${shown(b.before)} -> ${shown(b.after)}\n`;
  if (d.ignored.length) s += `ignored (changed, not compared): ${printable(d.ignored.join(', '))}\n`;
  return s;
}

const tailLine = (w: WakeRow): string =>
  printable(
    [
      w.captured_at,
      w.id,
      String(w.method).padEnd(7),
      w.status,
      `${w.latency_ms}ms`,
      w.route ?? '-',
      w.consumer ?? '-',
      w.path,
    ]
      .map(String)
      .join('  '),
  );

/** How far back each poll looks, so a wake written late (its batch flushed after a newer one) is still seen. */
const LOOKBACK_MS = 15_000;
const MAX_PAGES = 20;

/**
 * wakes tail: polls GET /v2/wakes every --interval-ms (1000) with the list's filters
 * and prints each wake it had not seen, oldest first, until Ctrl-C or --max wakes.
 * Wakes already stored when it starts are not printed. The gateway's own traffic (its
 * /v2 calls, this command's polls among them) is left out unless --management include.
 */
export async function wakesTail(
  args: Args,
  api: () => ApiClient,
  out: Out,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
): Promise<void> {
  onlyFlags(args, [...FILTER_OPTIONS, 'max', 'interval-ms']);
  operands(args, 2, null);
  const max = intOption(args, 'max', { min: 1, max: 1_000_000_000, fallback: 0 });
  const interval = intOption(args, 'interval-ms', { min: 100, max: 3_600_000, fallback: 1000 });
  const base: Record<string, string | undefined> = {
    ...filterQuery(args),
    management: args.flags.get('management') ?? 'exclude',
  };
  const userSince = timeOption(args, 'since')?.ms ?? null;
  const client = api();
  const seen = new Map<string, number>();
  let newest: number | null = null;
  let printed = 0;
  const poll = async (): Promise<WakeRow[]> => {
    const floor = newest === null ? userSince : Math.max(newest - LOOKBACK_MS, userSince ?? 0);
    const q = { ...base, since: floor === null ? base.since : new Date(floor).toISOString(), limit: '100' };
    const rows: WakeRow[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < MAX_PAGES; i++) {
      const page = (await client.call('GET', '/v2/wakes', { ...q, cursor })) as Page;
      rows.push(...page.data);
      // The first poll only learns what is already there: one page is enough.
      if (!page.has_more || newest === null || page.next_cursor === null) break;
      cursor = page.next_cursor;
    }
    const fresh = rows.filter((w) => !seen.has(w.id));
    for (const w of fresh) {
      const t = Date.parse(w.captured_at);
      seen.set(w.id, t);
      newest = Math.max(newest ?? t, t);
    }
    if (newest !== null) for (const [id, t] of seen) if (t < newest - 2 * LOOKBACK_MS) seen.delete(id);
    return fresh.sort((a, b) => a.captured_at.localeCompare(b.captured_at) || a.id.localeCompare(b.id));
  };
  // The first poll learns the newest wake; the second, every wake of the window before it.
  // When there is none yet, no time of this machine's is taken for the gateway's (their
  // clocks may differ): every wake found from then on is new.
  await poll();
  if (newest !== null) await poll();
  process.stderr.write(`wakegate: tailing wakes every ${interval} ms (Ctrl-C stops)\n`);
  let outage: string | null = null;
  let wait = interval;
  for (;;) {
    await sleep(wait);
    wait = interval;
    let fresh: WakeRow[];
    try {
      fresh = await poll();
    } catch (e) {
      // A gateway restarting, or busy, or the key's own rate limit: said once, and waited out
      // (as long as a 429 asks), until Ctrl-C. A refusal of the key or the query ends the tail.
      const passing = e instanceof Unreachable || (e instanceof ApiError && (e.status === 429 || e.status >= 500));
      if (!passing) throw e;
      const said = (e as Error).message;
      if (outage === null) process.stderr.write(`wakegate: ${said}; still tailing\n`);
      outage = said;
      if (e instanceof ApiError && e.retryAfter !== null) wait = Math.max(interval, e.retryAfter * 1000);
      continue;
    }
    if (outage !== null) {
      process.stderr.write('wakegate: the gateway answers again\n');
      outage = null;
    }
    for (const w of fresh) {
      out(args.bools.has('json') ? `${JSON.stringify(w)}\n` : `${tailLine(w)}\n`);
      if (max > 0 && ++printed >= max) return;
    }
  }
}
