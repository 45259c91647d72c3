import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, type Me, onSessionEnded, session } from './api';
import { Keys } from './keys';
import { Overview } from './overview';
import { ErrorNote } from './ui';
import { WakePage, Wakes } from './wakes';
import { Webhooks } from './webhooks';

const useHash = () => {
  const [hash, setHash] = useState(location.hash || '#/');
  useEffect(() => {
    const on = () => setHash(location.hash || '#/');
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash;
};

function SignIn({ onIn, notice }: { onIn: (me: Me) => void; notice: string | null }) {
  const [key, setKey] = useState('');
  const [err, setErr] = useState<unknown>(null);
  return (
    <main class="signin">
      <h1>wakegate</h1>
      {notice && !err ? (
        <p class="note" role="alert">
          {notice}
        </p>
      ) : null}
      <p>Paste an API key. It stays in this tab only (session storage), never in a URL or a cookie.</p>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          session.signIn(key.trim());
          try {
            const me = await api<Me>('GET', '/v2/environments', { noEnv: true, signingIn: true });
            onIn(me);
          } catch (x) {
            session.signOut();
            setErr(x);
          }
        }}
      >
        <label>
          API key
          <input
            type="password"
            name="key"
            autocomplete="off"
            required
            value={key}
            onInput={(e) => setKey((e.target as HTMLInputElement).value)}
            placeholder="svc_live_..."
          />
        </label>
        <button type="submit">Sign in</button>
      </form>
      <ErrorNote error={err} />
    </main>
  );
}

function App() {
  const [me, setMe] = useState<Me | null>(null);
  const [boot, setBoot] = useState(!!session.key());
  const [env, setEnv] = useState<string>(session.env() ?? '');
  /** Why the console is back at sign-in by itself (the key revoked mid-session), until the next sign-in. */
  const [notice, setNotice] = useState<string | null>(null);
  const hash = useHash();
  // Any /v2 call answering 401 for the signed-in key (at start or on any page) ends the session.
  useEffect(
    () =>
      onSessionEnded((message) => {
        setNotice(message);
        setMe(null);
        setEnv('');
      }),
    [],
  );
  useEffect(() => {
    if (!session.key()) return;
    api<Me>('GET', '/v2/environments', { noEnv: true }).then(
      (m) => {
        setMe(m);
        setBoot(false);
      },
      () => setBoot(false),
    );
  }, []);
  useEffect(() => {
    if (me && !env) {
      session.setEnv(me.key.environment);
      setEnv(me.key.environment);
    }
  }, [me]);
  if (boot) return <p class="muted pad">Loading…</p>;
  if (!me || !session.key())
    return (
      <SignIn
        notice={notice}
        onIn={(m) => {
          setNotice(null);
          setMe(m);
        }}
      />
    );
  const page = hash.replace(/^#\/?/, '').split('/');
  const nav = (to: string, label: string) => (
    <a href={`#/${to}`} class={page[0] === to ? 'active' : ''} aria-current={page[0] === to ? 'page' : undefined}>
      {label}
    </a>
  );
  const live = me.data.length > 1;
  return (
    <>
      <header class="top">
        <span class="brand">wakegate</span>
        <nav>
          {nav('', 'Overview')}
          {nav('wakes', 'Wakes')}
          {nav('keys', 'Keys')}
          {nav('webhooks', 'Webhooks')}
        </nav>
        <div class="who">
          {live ? (
            <label>
              <span class="sr">Environment</span>
              <select
                name="environment"
                value={env}
                onChange={(e) => {
                  const v = (e.target as HTMLSelectElement).value;
                  session.setEnv(v);
                  setEnv(v);
                }}
              >
                {me.data.map((e) => (
                  <option key={e.name} value={e.name}>
                    {e.name} ({e.class})
                  </option>
                ))}
              </select>
            </label>
          ) : (
            <span class="env">{env}</span>
          )}
          <span class="muted small" title={me.key.scopes.join(', ')}>
            {me.key.label}
          </span>
          <button
            type="button"
            class="secondary small"
            onClick={() => {
              session.signOut();
              setMe(null);
              setEnv('');
              location.hash = '#/';
            }}
          >
            Sign out
          </button>
        </div>
      </header>
      <main class="content" key={env}>
        {page[0] === 'wakes' && page[1] ? <WakePage id={page[1]} env={env} scopes={me.key.scopes} /> : null}
        {page[0] === 'wakes' && !page[1] ? <Wakes env={env} /> : null}
        {page[0] === 'keys' ? <Keys env={env} scopes={me.key.scopes} self={me.key.id} /> : null}
        {page[0] === 'webhooks' ? <Webhooks env={env} scopes={me.key.scopes} /> : null}
        {page[0] === '' ? <Overview env={env} /> : null}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app') as HTMLElement);
