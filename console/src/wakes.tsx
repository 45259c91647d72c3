import { useEffect, useRef, useState } from 'preact/hooks';
import { api, type Diff, type List, type Wake, type WakeDetail } from './api';
import { base64BodyMarkers, curlOf, notCopyable, type Redacted, redactedValues } from './redacted';
import { BodyView, Copy, ErrorNote, Headers, Panel, RouteName, Status, when } from './ui';

interface Filters {
  status_class: string;
  path: string;
  consumer: string;
  key_id: string;
  trace_id: string;
  min_latency_ms: string;
  since: string;
  until: string;
}
const EMPTY: Filters = {
  status_class: '',
  path: '',
  consumer: '',
  key_id: '',
  trace_id: '',
  min_latency_ms: '',
  since: '',
  until: '',
};

/** Where the gateway proxies: the console is served on another port (the page's meta tag names the proxy's). */
function proxyOrigin(): string {
  const port = document.querySelector('meta[name="wakegate-proxy-port"]')?.getAttribute('content');
  return port ? `${location.protocol}//${location.hostname}:${port}` : location.origin;
}

/** tracing.trace_url, from the page's meta tag: where a trace is shown ({trace_id} replaced), or null. */
function traceLink(traceId: string): string | null {
  const t = document.querySelector('meta[name="wakegate-trace-url"]')?.getAttribute('content');
  return t ? t.replace('{trace_id}', encodeURIComponent(traceId)) : null;
}

function Trace({ id }: { id: string }) {
  const href = traceLink(id);
  return (
    <dd class="mono">
      {href ? (
        <a href={href} target="_blank" rel="noopener noreferrer">
          {id}
        </a>
      ) : (
        id
      )}
    </dd>
  );
}

const toIso = (local: string) => (local ? new Date(`${local}:00Z`).toISOString() : undefined);

export function Wakes({ env }: { env: string }) {
  const [filters, setFilters] = useState<Filters>(EMPTY);
  const [draft, setDraft] = useState<Filters>(EMPTY);
  const [rows, setRows] = useState<Wake[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [err, setErr] = useState<unknown>(null);
  const [tail, setTail] = useState(false);
  const [loading, setLoading] = useState(false);
  /** The gateway's own traffic (the console's and the API's calls) is hidden unless asked for. */
  const [own, setOwn] = useState(false);
  /** Each load gets a number; an answer to an older one (a slow list after a filter) is dropped. */
  const seq = useRef(0);
  const query = (f: Filters) => ({
    management: own ? 'include' : 'exclude',
    status_class: f.status_class,
    path: f.path,
    consumer: f.consumer,
    key_id: f.key_id,
    trace_id: f.trace_id,
    min_latency_ms: f.min_latency_ms,
    since: toIso(f.since),
    until: toIso(f.until),
    limit: 25,
  });
  const load = async (f: Filters, after: string | null) => {
    const mine = ++seq.current;
    setLoading(true);
    try {
      const l = await api<List<Wake>>('GET', '/v2/wakes', { query: { ...query(f), cursor: after } });
      if (mine !== seq.current) return;
      setRows((r) => (after ? [...r, ...l.data] : l.data));
      setCursor(l.has_more ? l.next_cursor : null);
      setErr(null);
    } catch (e) {
      setErr(e);
    } finally {
      setLoading(false);
    }
  };
  useEffect(() => {
    void load(filters, null);
  }, [filters, env, own]);
  // Live tail: the newest page again every 2 s; new wakes go on top.
  const rowsRef = useRef(rows);
  rowsRef.current = rows;
  useEffect(() => {
    if (!tail) return;
    const t = setInterval(async () => {
      const at = seq.current;
      try {
        const l = await api<List<Wake>>('GET', '/v2/wakes', { query: query(filters) });
        // The filters changed while this was asked: its rows are not the ones shown.
        if (at !== seq.current) return;
        const seen = new Set(rowsRef.current.map((w) => w.id));
        const fresh = l.data.filter((w) => !seen.has(w.id));
        if (fresh.length) setRows((r) => [...fresh, ...r]);
      } catch (e) {
        setErr(e);
      }
    }, 2000);
    return () => clearInterval(t);
  }, [tail, filters, env, own]);
  const field = (
    name: keyof Filters,
    label: string,
    type: 'text' | 'number' | 'datetime-local' = 'text',
    placeholder = '',
  ) => (
    <label>
      {label}
      <input
        type={type as 'text'}
        name={name}
        value={draft[name]}
        placeholder={placeholder}
        onInput={(e) => setDraft({ ...draft, [name]: (e.target as HTMLInputElement).value })}
      />
    </label>
  );
  return (
    <div>
      <h1>Wakes</h1>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setFilters(draft);
        }}
      >
        <label>
          Status
          <select
            name="status_class"
            value={draft.status_class}
            onChange={(e) => setDraft({ ...draft, status_class: (e.target as HTMLSelectElement).value })}
          >
            <option value="">any</option>
            {['2xx', '3xx', '4xx', '5xx'].map((c) => (
              <option key={c} value={c}>
                {c}
              </option>
            ))}
          </select>
        </label>
        {field('path', 'Path template', 'text', '/api/orders/{id}')}
        {field('consumer', 'Consumer')}
        {field('key_id', 'Key id', 'text', 'key_...')}
        {field('trace_id', 'Trace id', 'text', '4bf92f35…')}
        {field('min_latency_ms', 'Slower than (ms)', 'number')}
        {field('since', 'Since (UTC)', 'datetime-local')}
        {field('until', 'Until (UTC)', 'datetime-local')}
        <div class="buttons">
          <button type="submit">Apply</button>
          <button
            type="button"
            class="secondary"
            onClick={() => {
              setDraft(EMPTY);
              setFilters(EMPTY);
            }}
          >
            Clear
          </button>
          <label class="toggle">
            <input type="checkbox" checked={tail} onChange={(e) => setTail((e.target as HTMLInputElement).checked)} />{' '}
            Live tail
          </label>
          <label class="toggle">
            <input type="checkbox" checked={own} onChange={(e) => setOwn((e.target as HTMLInputElement).checked)} />{' '}
            Show the gateway's own traffic
          </label>
        </div>
      </form>
      <ErrorNote error={err} />
      <div class="scroll">
        <table class="wakes">
          <thead>
            <tr>
              <th>Time (UTC)</th>
              <th>Status</th>
              <th>Method</th>
              <th>Path</th>
              <th>Latency</th>
              <th>Consumer</th>
              <th>Route</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((w) => (
              <tr key={w.id}>
                <td class="nowrap">{when(w.captured_at)}</td>
                <td>
                  <Status code={w.status} />
                </td>
                <td>{w.method}</td>
                <td class="path">
                  <a href={`#/wakes/${w.id}`}>{w.path}</a>
                </td>
                <td class="num">{w.latency_ms} ms</td>
                <td>{w.consumer}</td>
                <td>
                  <RouteName route={w.route} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {!loading && rows.length === 0 && !err ? <p class="muted">No wakes match.</p> : null}
      {cursor ? (
        <button type="button" class="secondary" onClick={() => load(filters, cursor)}>
          Older
        </button>
      ) : null}
    </div>
  );
}

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Each name once (a JSON path, query name or header may hold one marker). */
const uniqueNames = (rs: Redacted[]) => rs.filter((r, i) => rs.findIndex((x) => x.name === r.name) === i);
export function DiffView({ diff }: { diff: Diff }) {
  if (diff.identical) {
    return (
      <p class="ok-note">✓ Identical answer{diff.ignored.length ? ` (ignored: ${diff.ignored.join(', ')})` : ''}.</p>
    );
  }
  const v = (x: unknown) => (x === undefined ? '(absent)' : JSON.stringify(x));
  return (
    <div class="diff">
      <p class="warn-note">≠ The answer changed.</p>
      <table>
        <thead>
          <tr>
            <th>What</th>
            <th>Before</th>
            <th>After</th>
          </tr>
        </thead>
        <tbody>
          {diff.status ? (
            <tr>
              <td>status</td>
              <td>{v(diff.status.before)}</td>
              <td>{v(diff.status.after)}</td>
            </tr>
          ) : null}
          {diff.headers.map((h) => (
            <tr key={`h${h.name}`}>
              <td>header {h.name}</td>
              <td>{v(h.before)}</td>
              <td>{v(h.after)}</td>
            </tr>
          ))}
          {diff.body.map((b) => (
            <tr key={`b${b.path}`}>
              <td>
                <code>{b.path}</code>
              </td>
              <td>{v(b.before)}</td>
              <td>{v(b.after)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {diff.ignored.length ? <p class="muted small">Ignored: {diff.ignored.join(', ')}</p> : null}
    </div>
  );
}

export function WakePage({ id, env, scopes }: { id: string; env: string; scopes: string[] }) {
  /** Replay needs wakes:write: a key without it is not offered one (the API would refuse it). */
  const canReplay = scopes.includes('wakes:write');
  const [w, setW] = useState<WakeDetail | null>(null);
  const [err, setErr] = useState<unknown>(null);
  const [replay, setReplay] = useState<{ id: string; diff: Diff | null } | null>(null);
  const [replayErr, setReplayErr] = useState<unknown>(null);
  const [confirmUnsafe, setConfirmUnsafe] = useState(false);
  const [ignore, setIgnore] = useState('');
  // Redacted values a replay needs (a marker is never sent as if it were the value).
  const [asking, setAsking] = useState(false);
  const [values, setValues] = useState<Record<string, string>>({});
  /** A body kept as base64, looked into for redaction markers before it is offered as a command (null: not yet). */
  const [markers, setMarkers] = useState<'none' | 'marker' | 'unread' | null>(null);
  /** That body as text, when it holds markers: the values a replay must be given are read from it. */
  const [bodyText, setBodyText] = useState<string | null>(null);
  useEffect(() => {
    setW(null);
    setReplay(null);
    setAsking(false);
    setValues({});
    setMarkers(null);
    setBodyText(null);
    let gone = false;
    api<WakeDetail>('GET', `/v2/wakes/${id}`).then((d) => {
      if (gone) return;
      setW(d);
      void base64BodyMarkers(d).then((m) => {
        if (gone) return;
        setBodyText(m.text);
        setMarkers(m.markers);
      });
    }, setErr);
    return () => {
      gone = true;
    };
  }, [id, env]);
  const start = async (allowUnsafe: boolean) => {
    setReplayErr(null);
    setConfirmUnsafe(false);
    setAsking(false);
    // Only what was typed: a header left empty is left out, as the API does with redacted headers.
    const set = Object.fromEntries(Object.entries(values).filter(([, v]) => v !== ''));
    try {
      const r = await api<{ replay_wake_id: string }>('POST', `/v2/wakes/${id}/replay`, {
        body: {
          ...(Object.keys(set).length ? { set } : {}),
          allow_unsafe: allowUnsafe,
          ignore: ignore
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
        },
      });
      setReplay({ id: r.replay_wake_id, diff: null });
      // The replay's wake carries the diff once it is written (within a second or so).
      for (let i = 0; i < 40; i++) {
        await new Promise((res) => setTimeout(res, 250));
        try {
          const rw = await api<WakeDetail>('GET', `/v2/wakes/${r.replay_wake_id}`);
          if (rw.diff) {
            setReplay({ id: r.replay_wake_id, diff: rw.diff });
            return;
          }
        } catch {
          // Not written yet.
        }
      }
      setReplayErr(new Error('the replay has not finished yet; open its wake later'));
    } catch (e) {
      setReplayErr(e);
    }
  };
  if (err) return <ErrorNote error={err} />;
  if (!w) return <p class="muted">Loading…</p>;
  const redacted = uniqueNames(redactedValues(w, bodyText));
  // Query and body values must be given; redacted headers alone are left out, as the API does.
  const needed = redacted.some((r) => r.where !== 'header');
  // A request not kept whole is neither copied nor replayed (the API refuses that replay, 409):
  // either would send another request than the client's, as if it were that one.
  const notWhole = notCopyable(w);
  const coding = w.request?.headers?.find(([k]) => k.toLowerCase() === 'content-encoding')?.[1] ?? '';
  return (
    <div>
      <p>
        <a href="#/wakes">← Wakes</a>
      </p>
      <h1 class="mono">
        {w.method} {w.path}
      </h1>
      <dl class="summary">
        <dt>Status</dt>
        <dd>
          <Status code={w.status} />
        </dd>
        <dt>Latency</dt>
        <dd>{w.latency_ms} ms</dd>
        <dt>Time</dt>
        <dd>{when(w.captured_at)} UTC</dd>
        <dt>Route</dt>
        <dd>
          <RouteName route={w.route} />
        </dd>
        <dt>Consumer</dt>
        <dd>{w.consumer}</dd>
        <dt>Key</dt>
        <dd>{w.key_id ?? '—'}</dd>
        <dt>Wake</dt>
        <dd class="mono">{w.id}</dd>
        {w.protocol && w.protocol !== 'http/1.1' ? (
          <>
            <dt>Protocol</dt>
            <dd class="mono">{w.protocol}</dd>
          </>
        ) : null}
        {w.tls_fingerprint ? (
          <>
            <dt>Client certificate</dt>
            <dd class="mono" title={`SHA-256 ${w.tls_fingerprint}`}>
              {w.tls_subject}
            </dd>
          </>
        ) : null}
        {w.trace_id ? (
          <>
            <dt>Trace</dt>
            <Trace id={w.trace_id} />
          </>
        ) : null}
        {w.replay_of ? (
          <>
            <dt>Replay of</dt>
            <dd>
              <a href={`#/wakes/${w.replay_of}`}>{w.replay_of}</a>
            </dd>
          </>
        ) : null}
      </dl>
      {w.request ? (
        <div class="toolbar">
          {notWhole || markers === 'marker' ? null : markers === null ? (
            <span class="muted small">Reading the body…</span>
          ) : (
            <Copy
              text={curlOf(w, proxyOrigin(), markers === 'unread' ? { unread: coding.trim() } : {})}
              label="Copy as curl"
            />
          )}
          {/* A request not captured whole cannot be sent again: no Replay that could only be refused. */}
          {/* Nor before its body has been looked into: the values a replay needs are read from it. */}
          {!canReplay || notWhole || markers === null ? null : (
            <>
              <label>
                Ignore
                <input
                  value={ignore}
                  placeholder="updated_at, $.meta.id"
                  onInput={(e) => setIgnore((e.target as HTMLInputElement).value)}
                />
              </label>
              <button
                type="button"
                onClick={() => (needed ? setAsking(true) : SAFE.has(w.method) ? start(false) : setConfirmUnsafe(true))}
              >
                Replay
              </button>
            </>
          )}
          {canReplay ? null : <span class="muted small">This key cannot replay (it lacks wakes:write).</span>}
        </div>
      ) : null}
      {w.request && notWhole ? (
        <p class="note not-whole" role="note">
          <strong>No Copy as curl{canReplay ? ' or Replay' : ''}:</strong> {notWhole}. Sent again, this request would
          not be the one the client sent{canReplay ? ' (the replay API refuses it too, 409)' : ''}.
        </p>
      ) : w.request && markers === 'marker' ? (
        <p class="note not-whole" role="note">
          <strong>No Copy as curl:</strong> the request body holds redacted values inside its{' '}
          {coding ? `${coding.trim()}-compressed ` : ''}bytes, which a pasted command cannot fill in: it would send the
          redaction markers as if they were the values.
        </p>
      ) : null}
      {asking ? (
        <form
          class="confirm replay-values"
          aria-label="Redacted values for the replay"
          onSubmit={(e) => {
            e.preventDefault();
            if (SAFE.has(w.method)) void start(false);
            else setConfirmUnsafe(true);
            setAsking(false);
          }}
        >
          <p>
            This request held redacted values. The gateway never sends a redaction marker as if it were the value: give
            the values to send (headers left empty are left out).
          </p>
          {redacted.map((r) => (
            <label key={`${r.where}:${r.name}`}>
              <span>
                {r.where} <code>{r.name}</code>
              </span>
              <input
                type="password"
                autocomplete="off"
                required={r.where !== 'header'}
                value={values[r.name] ?? ''}
                onInput={(e) => setValues({ ...values, [r.name]: (e.target as HTMLInputElement).value })}
              />
            </label>
          ))}
          <button type="submit">Replay with these values</button>{' '}
          <button type="button" class="secondary" onClick={() => setAsking(false)}>
            Cancel
          </button>
        </form>
      ) : null}
      {confirmUnsafe ? (
        <div class="confirm" role="alertdialog" aria-label="Replay an unsafe method">
          <p>
            <strong>{w.method}</strong> is not a safe method: replaying it may change data at the origin.
          </p>
          <button type="button" class="danger" onClick={() => start(true)}>
            Replay anyway
          </button>{' '}
          <button type="button" class="secondary" onClick={() => setConfirmUnsafe(false)}>
            Cancel
          </button>
        </div>
      ) : null}
      <ErrorNote error={replayErr} />
      {replay ? (
        <Panel title="Replay">
          <p>
            Replay wake <a href={`#/wakes/${replay.id}`}>{replay.id}</a>
            {replay.diff ? '' : ' (running…)'}
          </p>
          {replay.diff ? <DiffView diff={replay.diff} /> : null}
        </Panel>
      ) : null}
      {w.diff ? (
        <Panel title="Diff against the original">
          <DiffView diff={w.diff} />
        </Panel>
      ) : null}
      {w.request === null ? (
        <p class="note">
          This wake kept no detail: its route keeps none, its route was over capture.detail.max_per_second or
          max_bytes_per_second that second, or detail waiting to be written was over its memory budget.
        </p>
      ) : null}
      {w.request ? (
        <div class="grid2">
          <Panel title="Request">
            {w.request.query ? (
              <p>
                Query: <code>{w.request.query}</code>
              </p>
            ) : null}
            <Headers headers={w.request.headers} />
            <BodyView
              {...w.request}
              bytes={w.request.body_bytes}
              truncated={w.request.body_truncated}
              encoding={w.request.body_encoding}
              sha256={w.request.body_sha256}
              reason={w.request.body_omitted_reason}
            />
          </Panel>
          <Panel title="Response">
            <Headers headers={w.response?.headers ?? null} />
            {w.response ? (
              <BodyView
                {...w.response}
                bytes={w.response.body_bytes}
                truncated={w.response.body_truncated}
                encoding={w.response.body_encoding}
                sha256={w.response.body_sha256}
                reason={w.response.body_omitted_reason}
              />
            ) : null}
          </Panel>
        </div>
      ) : null}
    </div>
  );
}
