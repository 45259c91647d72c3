import { useEffect, useState } from 'preact/hooks';
import { api, type Delivery, type Endpoint } from './api';
import { More, usePaged } from './paged';
import { ErrorNote, Panel, SecretOnce, StateBadge, Status, StatusFilter, when } from './ui';

export function Webhooks({ env, scopes }: { env: string; scopes: string[] }) {
  /** Actions this key's scopes do not allow are not offered (the API would refuse them). */
  const canWrite = scopes.includes('webhooks:write');
  const [status, setStatus] = useState('');
  const [actionErr, setActionErr] = useState<unknown>(null);
  const [secret, setSecret] = useState<{ id: string; secret: string } | null>(null);
  const [open, setOpen] = useState<Delivery | null>(null);
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState('*');
  // Both lists page as the Wakes page does: the newest first, "Older" for the rest.
  const epList = usePaged<Endpoint>('/v2/webhooks/endpoints', { limit: 100 }, [env]);
  const dlList = usePaged<Delivery>('/v2/webhooks/deliveries', { status, limit: 50 }, [env, status]);
  const eps = epList.rows;
  const dl = dlList.rows;
  const err = epList.err;
  const dErr = dlList.err;
  const loadEps = epList.reload;
  const loadDl = dlList.reload;
  // Deliveries change by themselves (retries): the pages shown are asked again every 3 s.
  const poll = dlList.poll;
  useEffect(() => {
    const t = setInterval(() => void poll(), 3000);
    return () => clearInterval(t);
  }, [env, status]);
  const act = async (f: () => Promise<unknown>) => {
    setActionErr(null);
    try {
      await f();
      await Promise.all([loadEps(), loadDl()]);
    } catch (e) {
      setActionErr(e);
    }
  };
  const openDelivery = (d: Delivery) =>
    api<Delivery>('GET', `/v2/webhooks/deliveries/${d.id}`).then(setOpen, setActionErr);
  // A delivery already replayed (its replay is in this list) offers no second Replay: it is superseded.
  const replayedAs = new Map(dl.filter((d) => d.replay_of).map((d) => [d.replay_of as string, d.id]));
  return (
    <div>
      <h1>Webhooks</h1>
      {secret ? (
        <SecretOnce title={`Signing secret of ${secret.id}.`} value={secret.secret} onDone={() => setSecret(null)} />
      ) : null}
      <ErrorNote error={actionErr} />
      <Panel title="Endpoints">
        <ErrorNote error={err} />
        {canWrite ? null : (
          <p class="note">This key can read webhooks but not change them (it lacks webhooks:write).</p>
        )}
        {canWrite ? (
          <form
            class="form inline"
            onSubmit={(e) => {
              e.preventDefault();
              void act(async () => {
                const ep = await api<Endpoint>('POST', '/v2/webhooks/endpoints', {
                  body: {
                    url,
                    events: events
                      .split(',')
                      .map((s) => s.trim())
                      .filter(Boolean),
                    environment: env,
                  },
                });
                if (ep.secret) setSecret({ id: ep.id, secret: ep.secret });
                setUrl('');
              });
            }}
          >
            <label>
              URL
              <input
                name="url"
                required
                value={url}
                placeholder="https://hooks.example.com/wakegate"
                onInput={(e) => setUrl((e.target as HTMLInputElement).value)}
              />
            </label>
            <label>
              Events
              <input name="events" value={events} onInput={(e) => setEvents((e.target as HTMLInputElement).value)} />
            </label>
            <button type="submit">Add endpoint</button>
          </form>
        ) : null}
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th>URL</th>
                <th>Status</th>
                <th>Events</th>
                <th>Actions</th>
              </tr>
            </thead>
            <tbody>
              {eps.map((ep) => (
                <tr key={ep.id} data-endpoint={ep.id}>
                  <td class="path">
                    {ep.url}
                    <div class="mono small muted">{ep.id}</div>
                  </td>
                  <td>
                    <StateBadge state={ep.status} />
                  </td>
                  <td class="small">{ep.events.join(', ')}</td>
                  {canWrite ? (
                    <td class="row-actions">
                      <button
                        type="button"
                        class="secondary small"
                        onClick={() =>
                          act(() =>
                            api('PATCH', `/v2/webhooks/endpoints/${ep.id}`, {
                              body: { status: ep.status === 'enabled' ? 'disabled' : 'enabled' },
                            }),
                          )
                        }
                      >
                        {ep.status === 'enabled' ? 'Disable' : 'Enable'}
                      </button>
                      <button
                        type="button"
                        class="secondary small"
                        onClick={() => act(() => api('POST', `/v2/webhooks/endpoints/${ep.id}/test`))}
                      >
                        Send test
                      </button>
                      <button
                        type="button"
                        class="secondary small"
                        onClick={() =>
                          act(async () => {
                            const r = await api<Endpoint>('POST', `/v2/webhooks/endpoints/${ep.id}/rotate-secret`);
                            if (r.secret) setSecret({ id: r.id, secret: r.secret });
                          })
                        }
                      >
                        Rotate secret
                      </button>
                    </td>
                  ) : (
                    <td />
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        <More
          shown={eps.length}
          hasMore={epList.hasMore}
          loading={epList.loading}
          onMore={epList.more}
          label="More"
          note="endpoints shown (in id order); more follow."
        />
      </Panel>
      <Panel
        title="Deliveries"
        actions={
          <StatusFilter
            value={status}
            options={['pending', 'delivered', 'failed', 'dead_lettered']}
            onChange={setStatus}
          />
        }
      >
        <ErrorNote error={dErr} />
        <div class="scroll">
          <table class="deliveries">
            <thead>
              <tr>
                <th>Created (UTC)</th>
                <th>Event</th>
                <th>Status</th>
                <th>Attempt</th>
                <th>Answer</th>
                <th>Actions</th>
              </tr>
            </thead>
            <tbody>
              {dl.map((d) => (
                <tr key={d.id} data-delivery={d.id}>
                  <td class="nowrap">{when(d.created_at)}</td>
                  <td>
                    {d.event_type}
                    {d.is_replay ? <span class="badge st-pending"> replay</span> : null}
                  </td>
                  <td>
                    <StateBadge state={d.status} />
                  </td>
                  <td>
                    {d.attempt}/{d.max_attempts}
                  </td>
                  <td>
                    <Status code={d.response_status} />
                  </td>
                  <td class="row-actions">
                    <button type="button" class="secondary small" onClick={() => openDelivery(d)}>
                      Attempts
                    </button>
                    {replayedAs.has(d.id) ? (
                      <span class="muted small">
                        replayed as <span class="mono">{replayedAs.get(d.id)}</span>
                      </span>
                    ) : canWrite && (d.status === 'failed' || d.status === 'dead_lettered') ? (
                      <button
                        type="button"
                        class="small"
                        onClick={() => act(() => api('POST', `/v2/webhooks/deliveries/${d.id}/replay`))}
                      >
                        Replay
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {dl.length === 0 && !dErr ? <p class="muted">No deliveries.</p> : null}
        <More
          shown={dl.length}
          hasMore={dlList.hasMore}
          loading={dlList.loading}
          onMore={dlList.more}
          note="newest deliveries shown; older ones follow."
        />
      </Panel>
      {open ? (
        <Panel
          title={`Delivery ${open.id}`}
          actions={
            <button type="button" class="secondary small" onClick={() => setOpen(null)}>
              Close
            </button>
          }
        >
          <table class="attempts">
            <thead>
              <tr>
                <th>#</th>
                <th>At (UTC)</th>
                <th>Answer</th>
                <th>Duration</th>
                <th>Response body or error</th>
              </tr>
            </thead>
            <tbody>
              {(open.attempts ?? []).map((a) => (
                <tr key={a.attempt}>
                  <td>{a.attempt}</td>
                  <td class="nowrap">{when(a.at)}</td>
                  <td>
                    <Status code={a.response_status} />
                  </td>
                  <td class="num">{a.duration_ms} ms</td>
                  <td class="small">{a.error ?? a.response_body}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <pre class="body">{JSON.stringify(open.payload, null, 2)}</pre>
        </Panel>
      ) : null}
    </div>
  );
}
