import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError } from './api';

/** An error as the API gave it: its message, and the wake id to report. */
export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  if (error instanceof ApiError) {
    const scope = error.type === 'insufficient_scope';
    return (
      <div class={scope ? 'note' : 'error'} role="alert">
        <strong>{scope ? 'Not available to this key. ' : `${error.status} ${error.type}: `}</strong>
        {error.message}
        {error.param ? <span class="muted"> (param: {error.param})</span> : null}
        {error.wakeId ? (
          <span class="muted">
            {' '}
            · wake <code>{error.wakeId}</code>
          </span>
        ) : null}
      </div>
    );
  }
  return (
    <div class="error" role="alert">
      {String((error as Error).message ?? error)}
    </div>
  );
}

/** A status code with its class as a colour and as text (readable without colour). */
export function Status({ code }: { code: number | null }) {
  if (code === null || code === 0) return <span class="badge s-none">—</span>;
  const cls = `${Math.floor(code / 100)}xx`;
  const word =
    code >= 500 ? 'error' : code >= 400 ? 'refused' : code >= 300 ? 'redirect' : code === 101 ? 'upgrade' : 'ok';
  return (
    <span class={`badge s-${cls}`} title={word}>
      {code} <span class="sr">{word}</span>
    </span>
  );
}

export function StateBadge({ state }: { state: string }) {
  const icon: Record<string, string> = {
    delivered: '✓',
    enabled: '✓',
    active: '✓',
    failed: '!',
    pending: '…',
    scheduled: '⏲',
    dead_lettered: '✕',
    disabled: '✕',
    revoked: '✕',
  };
  return (
    <span class={`badge st-${state}`}>
      {icon[state] ?? ''} {state.replace('_', ' ')}
    </span>
  );
}

/** A wake's route as a person reads it: a request no route matched is stored under `none`. */
export function RouteName({ route }: { route: string }) {
  return route === 'none' ? <span class="muted">no route matched</span> : <>{route}</>;
}
export const routeLabel = (route: string): string => (route === 'none' ? 'no route matched' : route);

export const when = (iso: string | null): string =>
  iso ? new Date(iso).toISOString().replace('T', ' ').slice(0, 19) : '—';

export function Copy({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      class="secondary"
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(text);
        } catch {
          // Clipboard refused (no permission): the text stays selectable on the page.
        }
        setDone(true);
        setTimeout(() => setDone(false), 1500);
      }}
    >
      {done ? 'Copied' : label}
    </button>
  );
}

export function Panel({
  title,
  children,
  actions,
}: {
  title: string;
  children: ComponentChildren;
  actions?: ComponentChildren;
}) {
  return (
    <section class="panel">
      <header>
        <h2>{title}</h2>
        <div class="actions">{actions}</div>
      </header>
      {children}
    </section>
  );
}

/** A body as the wake kept it: JSON pretty-printed, redaction markers highlighted, truncation said. */
export function BodyView({
  body,
  bytes,
  truncated,
  encoding,
  sha256,
  reason,
}: {
  body: string | null;
  bytes: number | null;
  truncated: boolean | null;
  encoding: string | null;
  sha256?: string | null | undefined;
  reason?: string | null | undefined;
}) {
  if (encoding === 'omitted')
    return (
      <div>
        <p class="muted">Kept as its size and hash only: {reason ?? 'not readable'}.</p>
        <p class="muted small">
          {bytes?.toLocaleString('en')} bytes · SHA-256 <code>{sha256}</code>
        </p>
      </div>
    );
  if (body === null) return <p class="muted">No body kept.</p>;
  if (bytes === 0) return <p class="muted">Empty body.</p>;
  let text = body;
  if (encoding === 'utf8' && !truncated) {
    try {
      text = JSON.stringify(JSON.parse(body), null, 2);
    } catch {
      // Not JSON: shown as it is.
    }
  }
  const parts = text.split(/(\[redacted:[0-9a-f]{12}\])/g);
  return (
    <div>
      <pre class="body">
        {parts.map((p) => (/^\[redacted:/.test(p) ? <mark title="redacted before storage">{p}</mark> : p))}
      </pre>
      <p class="muted small">
        {bytes?.toLocaleString('en')} bytes{encoding === 'base64' ? ' (binary, base64)' : ''}
        {truncated ? ` · cut: only the first ${text.length.toLocaleString('en')} are kept` : ''}
      </p>
    </div>
  );
}

export function Headers({ headers }: { headers: [string, string][] | null }) {
  if (!headers) return <p class="muted">Headers not kept.</p>;
  return (
    <table class="kv">
      <tbody>
        {headers.map(([k, v], i) => (
          <tr key={`${k}${i}`}>
            <th>{k}</th>
            <td>{/^\[redacted:/.test(v) ? <mark title="redacted before storage">{v}</mark> : v}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** A secret the API returns once: shown with a copy button and a warning, until dismissed. */
export function SecretOnce({ title, value, onDone }: { title: string; value: string; onDone: () => void }) {
  return (
    <div class="secret" role="status">
      <p>
        <strong>{title}</strong> This is the only time it is shown: store it now.
      </p>
      <p>
        <code class="secret-value">{value}</code> <Copy text={value} />
      </p>
      <button type="button" class="secondary" onClick={onDone}>
        I have stored it
      </button>
    </div>
  );
}

/** A status filter for a panel's header: '' means all. */
export function StatusFilter({
  value,
  options,
  onChange,
}: {
  value: string;
  options: string[];
  onChange: (v: string) => void;
}) {
  return (
    <label>
      Status{' '}
      <select value={value} onChange={(e) => onChange((e.target as HTMLSelectElement).value)}>
        <option value="">all</option>
        {options.map((o) => (
          <option key={o} value={o}>
            {o.replace('_', '-')}
          </option>
        ))}
      </select>
    </label>
  );
}
