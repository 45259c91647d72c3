/** The console talks only to the public /v2 API, with the key the user pasted. */

const KEY = 'wakegate.key';
const ENV = 'wakegate.environment';

export const session = {
  key: (): string | null => sessionStorage.getItem(KEY),
  env: (): string | null => sessionStorage.getItem(ENV),
  signIn: (key: string) => sessionStorage.setItem(KEY, key),
  setEnv: (env: string) => sessionStorage.setItem(ENV, env),
  signOut: () => {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(ENV);
  },
};

/** An error answered by the API, with its own body. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly param: string | null,
    readonly wakeId: string | null,
  ) {
    super(message);
  }
}

export type Query = Record<string, string | number | boolean | undefined | null>;

/** Why the session ended by itself: the key was revoked, or is no longer accepted. */
const ENDED = 'wakegate:session-ended';
const SIGN_IN_AGAIN: Record<string, string> = {
  key_revoked: 'This key was revoked. Sign in with another key.',
  authentication_required: 'This key is no longer accepted. Sign in again.',
};

/** Calls `on` with a short message each time a /v2 call finds the signed-in key refused; returns the unsubscribe. */
export function onSessionEnded(on: (message: string) => void): () => void {
  const h = (e: Event) => on((e as CustomEvent<string>).detail);
  addEventListener(ENDED, h);
  return () => removeEventListener(ENDED, h);
}

/** A call in the environment chosen in the switcher (added as `environment` unless `noEnv`). */
export async function api<T>(
  method: string,
  path: string,
  opts: { query?: Query; body?: unknown; noEnv?: boolean; signingIn?: boolean } = {},
): Promise<T> {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(opts.query ?? {}))
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const env = session.env();
  const body = opts.body as Record<string, unknown> | undefined;
  if (env && !opts.noEnv && !(body && 'environment' in body)) q.set('environment', env);
  const qs = q.toString();
  const key = session.key();
  const res = await fetch(`${path}${qs ? `?${qs}` : ''}`, {
    method,
    headers: {
      authorization: `Bearer ${key ?? ''}`,
      accept: 'application/json',
      ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
  });
  const text = await res.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    throw new ApiError(
      res.status,
      'internal_error',
      `the gateway answered ${res.status} with something that is not JSON`,
      null,
      null,
    );
  }
  if (!res.ok) {
    const e = (data as { error?: { type: string; message: string; param: string | null; wake_id: string | null } })
      ?.error;
    // The signed-in key refused (revoked meanwhile): back to sign-in, saying why. The sign-in form says its own.
    const ended = res.status === 401 && e ? SIGN_IN_AGAIN[e.type] : undefined;
    if (ended && !opts.signingIn && key !== null && session.key() === key) {
      session.signOut();
      dispatchEvent(new CustomEvent(ENDED, { detail: ended }));
    }
    throw new ApiError(
      res.status,
      e?.type ?? 'error',
      e?.message ?? `HTTP ${res.status}`,
      e?.param ?? null,
      e?.wake_id ?? res.headers.get('x-wake-id'),
    );
  }
  return data as T;
}

export interface List<T> {
  object: 'list';
  has_more: boolean;
  next_cursor: string | null;
  data: T[];
}

export interface Wake {
  id: string;
  method: string;
  path: string;
  path_truncated: boolean;
  status: number;
  latency_ms: number;
  consumer: string;
  captured_at: string;
  environment: string;
  route: string;
  key_id: string | null;
  request_bytes: number;
  response_bytes: number;
  /** W3C Trace Context: the request's trace and the gateway's span in it (null: none). */
  trace_id?: string | null;
  span_id?: string | null;
  /** The client's protocol (http/1.1, h2) and its certificate (mTLS), null when it showed none. */
  protocol?: string;
  tls_subject?: string | null;
  tls_fingerprint?: string | null;
}

export interface Body {
  body: string | null;
  body_bytes: number | null;
  body_truncated: boolean | null;
  body_encoding: 'utf8' | 'base64' | 'omitted' | null;
  /** A body kept only as its size and hash (body_encoding omitted): the hash and why. */
  body_sha256?: string | null;
  body_omitted_reason?: string | null;
}

export interface WakeDetail extends Wake {
  replay_of: string | null;
  request: ({ query: string; headers: [string, string][] | null } & Body) | null;
  response: ({ headers: [string, string][] | null } & Body) | null;
  diff: Diff | null;
}

export interface Diff {
  identical: boolean;
  status: { before: unknown; after: unknown } | null;
  headers: { name: string; before: unknown; after: unknown }[];
  body: { path: string; before: unknown; after: unknown }[];
  ignored: string[];
}

export interface Key {
  id: string;
  label: string;
  consumer: string;
  environment: string;
  scopes: string[];
  status?: 'active' | 'scheduled' | 'revoked';
  created_at: string;
  revoke_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
  replaces: string | null;
  /** The key's own limit; null: the `default` policy. */
  rate_limit: { limit: number; burst: number; window: string } | null;
  secret?: string;
}

export interface Endpoint {
  id: string;
  url: string;
  events: string[];
  environment: string;
  status: 'enabled' | 'disabled' | 'deleted';
  created_at: string;
  secret?: string;
}

export interface Attempt {
  attempt: number;
  at: string;
  response_status: number | null;
  duration_ms: number;
  error: string | null;
  response_body: string;
}

export interface Delivery {
  id: string;
  endpoint_id: string;
  event_type: string;
  attempt: number;
  max_attempts: number;
  status: 'pending' | 'delivered' | 'failed' | 'dead_lettered';
  response_status: number | null;
  duration_ms: number;
  is_replay: boolean;
  replay_of: string | null;
  created_at: string;
  attempts?: Attempt[];
  payload?: unknown;
}

export interface Me {
  data: { name: string; class: 'live' | 'test' }[];
  key: { id: string; label: string; environment: string; scopes: string[] };
}
