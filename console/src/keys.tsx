import { useState } from 'preact/hooks';
import { api, type Key } from './api';
import { More, usePaged } from './paged';
import { ErrorNote, Panel, SecretOnce, StateBadge, StatusFilter, when } from './ui';

interface Draft {
  label: string;
  scopes: string;
  consumer: string;
  replaces: string;
  /** The key's own rate limit; an empty limit sends none (the `default` policy, or the replaced key's). */
  limit: string;
  burst: string;
  window: string;
}
const BLANK: Draft = { label: '', scopes: '', consumer: '', replaces: '', limit: '', burst: '', window: 'minute' };
const WINDOWS = ['second', 'minute', 'hour', 'day'];

/** `rate_limit` of a create body: none without a limit; burst defaults to the limit. */
function rateLimit(d: Draft): { rate_limit?: { limit: number; burst: number; window: string } } {
  if (!d.limit.trim()) return {};
  const limit = Number(d.limit);
  return { rate_limit: { limit, burst: d.burst.trim() ? Number(d.burst) : limit, window: d.window } };
}

/** A key's own limit as the list shows it. */
const limitText = (r: Key['rate_limit']): string =>
  r === null ? 'default policy' : `${r.limit.toLocaleString('en')}/${r.window}, burst ${r.burst.toLocaleString('en')}`;

export function Keys({ env, scopes, self }: { env: string; scopes: string[]; self: string }) {
  const canWrite = scopes.includes('keys:write');
  /** The key whose "Revoke now" waits for a confirmation that names it. */
  const [confirming, setConfirming] = useState<Key | null>(null);
  const [status, setStatus] = useState('');
  const [draft, setDraft] = useState<Draft>(BLANK);
  const [created, setCreated] = useState<Key | null>(null);
  const [actionErr, setActionErr] = useState<unknown>(null);
  const [revokeAt, setRevokeAt] = useState<Record<string, string>>({});
  // Newest first, 100 a page; older keys (the bootstrap admin's among them) a click away.
  const list = usePaged<Key>('/v2/api-keys', { status, limit: 100 }, [env, status]);
  const keys = list.rows;
  const load = list.reload;
  const create = async (e: Event) => {
    e.preventDefault();
    setActionErr(null);
    try {
      const k = await api<Key>('POST', '/v2/api-keys', {
        body: {
          label: draft.label,
          environment: env,
          scopes: draft.scopes
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
          ...(draft.consumer ? { consumer: draft.consumer } : {}),
          ...(draft.replaces ? { replaces: draft.replaces } : {}),
          ...rateLimit(draft),
        },
      });
      setCreated(k);
      setDraft(BLANK);
      void load();
    } catch (x) {
      setActionErr(x);
    }
  };
  const revoke = async (k: Key, at?: string) => {
    setActionErr(null);
    try {
      await api(
        'DELETE',
        `/v2/api-keys/${k.id}`,
        at ? { body: { revoke_at: new Date(`${at}:00Z`).toISOString() } } : {},
      );
      setConfirming(null);
      void load();
    } catch (x) {
      setActionErr(x);
    }
  };
  const set = (k: keyof Draft) => (e: Event) => setDraft({ ...draft, [k]: (e.target as HTMLInputElement).value });
  return (
    <div>
      <h1>Keys</h1>
      {created?.secret ? (
        <SecretOnce title={`Key ${created.id} created.`} value={created.secret} onDone={() => setCreated(null)} />
      ) : null}
      {confirming ? (
        <div class="confirm" role="alertdialog" aria-label="Confirm revocation">
          <p>
            Revoke <strong>{confirming.label}</strong> (<code>{confirming.id}</code>) now? Requests with it are refused
            from then on; this cannot be undone.
            {confirming.id === self ? <strong> This is the key you are signed in with.</strong> : null}
          </p>
          <div class="buttons">
            <button type="button" class="danger" onClick={() => revoke(confirming)}>
              Revoke {confirming.label}
            </button>
            <button type="button" class="secondary" onClick={() => setConfirming(null)}>
              Cancel
            </button>
          </div>
        </div>
      ) : null}
      {canWrite ? null : <p class="note">This key cannot issue or revoke keys (it lacks keys:write).</p>}
      {canWrite ? (
        <Panel title={draft.replaces ? `Rotate ${draft.replaces}` : 'Create a key'}>
          <form class="form" onSubmit={create}>
            <label>
              Label
              <input name="label" required value={draft.label} onInput={set('label')} />
            </label>
            <label>
              Scopes (comma-separated)
              <input
                name="scopes"
                required
                value={draft.scopes}
                onInput={set('scopes')}
                placeholder={scopes.slice(0, 2).join(', ')}
              />
            </label>
            <label>
              Consumer
              <input
                name="consumer"
                value={draft.consumer}
                onInput={set('consumer')}
                placeholder="default: the label"
              />
            </label>
            <div class="rate-fields">
              <label>
                Rate limit (requests)
                <input
                  name="limit"
                  type="number"
                  min="1"
                  step="1"
                  value={draft.limit}
                  onInput={set('limit')}
                  placeholder={draft.replaces ? "the replaced key's" : 'default policy'}
                />
              </label>
              <label>
                Burst
                <input
                  name="burst"
                  type="number"
                  min="1"
                  step="1"
                  value={draft.burst}
                  onInput={set('burst')}
                  placeholder="= the limit"
                />
              </label>
              <label>
                Per
                <select name="window" value={draft.window} onChange={set('window')}>
                  {WINDOWS.map((w) => (
                    <option key={w} value={w}>
                      {w}
                    </option>
                  ))}
                </select>
              </label>
            </div>
            <p class="muted small span-all">
              In environment {env}. A key can only issue scopes it holds: {scopes.join(', ')}; and a rate limit no
              higher than its own, unless it is an admin key (all six management scopes, live class).
            </p>
            <div class="buttons">
              <button type="submit">{draft.replaces ? 'Create replacement' : 'Create key'}</button>
              {draft.replaces ? (
                <button type="button" class="secondary" onClick={() => setDraft(BLANK)}>
                  Cancel
                </button>
              ) : null}
            </div>
          </form>
        </Panel>
      ) : null}
      <ErrorNote error={actionErr} />
      <Panel
        title="Keys"
        actions={<StatusFilter value={status} options={['active', 'scheduled', 'revoked']} onChange={setStatus} />}
      >
        <ErrorNote error={list.err} />
        <div class="scroll">
          <table class="keys">
            <thead>
              <tr>
                <th>Label</th>
                <th>Id</th>
                <th>Environment</th>
                <th>Status</th>
                <th>Scopes</th>
                <th>Consumer</th>
                <th>Rate limit</th>
                <th>Last used (UTC)</th>
                {canWrite ? <th>Actions</th> : null}
              </tr>
            </thead>
            <tbody>
              {keys.map((k) => (
                <tr key={k.id} data-key={k.id}>
                  <td>{k.label}</td>
                  <td class="mono small">{k.id}</td>
                  <td>{k.environment}</td>
                  <td>
                    <StateBadge state={k.status ?? 'active'} />
                    {k.revoke_at && k.status === 'scheduled' ? (
                      <div class="small muted">at {when(k.revoke_at)}</div>
                    ) : null}
                  </td>
                  <td class="small">{k.scopes.join(', ')}</td>
                  <td>{k.consumer}</td>
                  <td class="small rate-limit">{limitText(k.rate_limit)}</td>
                  <td class="nowrap last-used">{when(k.last_used_at)}</td>
                  {canWrite ? (
                    <td class="row-actions">
                      {k.status !== 'revoked' ? (
                        <>
                          <button type="button" class="danger small" onClick={() => setConfirming(k)}>
                            Revoke now
                          </button>
                          <input
                            type="datetime-local"
                            title="UTC, like every time on these pages"
                            aria-label={`revoke ${k.label} at (UTC)`}
                            value={revokeAt[k.id] ?? ''}
                            onInput={(e) => setRevokeAt({ ...revokeAt, [k.id]: (e.target as HTMLInputElement).value })}
                          />
                          <button
                            type="button"
                            class="secondary small"
                            disabled={!revokeAt[k.id]}
                            onClick={() => revoke(k, revokeAt[k.id])}
                          >
                            Revoke at (UTC)
                          </button>
                          {/* Only an active key can be replaced: one whose revocation is scheduled is not offered. */}
                          {(k.status ?? 'active') === 'active' ? (
                            <button
                              type="button"
                              class="secondary small"
                              onClick={() =>
                                setDraft({
                                  label: `${k.label} (rotated)`,
                                  scopes: k.scopes.join(', '),
                                  consumer: '',
                                  replaces: k.id,
                                  limit: '',
                                  burst: '',
                                  window: k.rate_limit?.window ?? 'minute',
                                })
                              }
                            >
                              Rotate
                            </button>
                          ) : null}
                        </>
                      ) : null}
                    </td>
                  ) : null}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        <More
          shown={keys.length}
          hasMore={list.hasMore}
          loading={list.loading}
          onMore={list.more}
          note="newest keys shown; older ones follow."
        />
      </Panel>
    </div>
  );
}
