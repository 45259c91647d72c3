import { readFileSync } from 'node:fs';
import { undici } from '../lazy-require.js';
import { UsageError } from './args.js';
import { printable } from './table.js';

/** A failed /v2 call, with the API's own error body. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: {
      error?: {
        type?: string;
        message?: string;
        param?: string | null;
        wake_id?: string | null;
        retry_after?: number | null;
      };
    },
  ) {
    const e = body.error;
    // The API's 429 says "wait retry_after seconds": the number is told, as the answer gave it.
    const wait = typeof e?.retry_after === 'number' ? ` (retry_after: ${e.retry_after} s)` : '';
    super(
      e
        ? `${status} ${e.type}: ${e.message}${wait}${e.param ? ` (param: ${e.param})` : ''}${e.wake_id ? ` [wake ${e.wake_id}]` : ''}`
        : `HTTP ${status}`,
    );
  }

  /** Seconds the API asked to wait (429), or null. */
  get retryAfter(): number | null {
    const r = this.body.error?.retry_after;
    return typeof r === 'number' && r >= 0 ? r : null;
  }
}

/** The gateway could not be reached at all (refused, reset, no such host). */
export class Unreachable extends Error {}

/** Talks to a running gateway's /v2 API (--url; WAKEGATE_KEY, --key-file or --key). */
export class ApiClient {
  constructor(
    private readonly base: string,
    private readonly key: string,
  ) {}

  static from(flags: Map<string, string>, env: NodeJS.ProcessEnv): ApiClient {
    const file = flags.get('key-file');
    let key = flags.get('key') ?? env.WAKEGATE_KEY;
    if (file !== undefined) {
      try {
        // `-` is stdin: `pass show wakegate | wakegate keys list --key-file -`. The key is the
        // first line (pass keeps notes below it), as such files are read.
        key = (
          readFileSync(file === '-' ? 0 : file, 'utf8')
            .trim()
            .split(/\r?\n/)[0] ?? ''
        ).trim();
      } catch (e) {
        throw new UsageError(
          `--key-file ${JSON.stringify(file)} cannot be read (${(e as NodeJS.ErrnoException).code ?? 'error'})`,
        );
      }
    }
    if (!key && file !== undefined)
      throw new UsageError(
        `--key-file ${file === '-' ? '- (stdin)' : JSON.stringify(file)} holds no key: its first line is empty`,
      );
    if (!key) throw new UsageError('this command needs a key: WAKEGATE_KEY, or --key-file PATH (- for stdin)');
    // A key no header can carry (a control character, a line break): said without it.
    if (/[^\x20-\x7e]/.test(key))
      throw new UsageError(
        'the key holds a character a header cannot carry (a line break or another control character); it is not shown',
      );
    const given = flags.get('url');
    const url = given ?? env.WAKEGATE_URL ?? `http://127.0.0.1:${env.PORT || 8080}`;
    const from = given !== undefined ? '--url' : env.WAKEGATE_URL !== undefined ? 'WAKEGATE_URL' : 'PORT';
    let u: URL | null = null;
    try {
      u = new URL(url);
    } catch {
      // Said below.
    }
    // `localhost:8080` parses, as a URL of scheme "localhost:": it would be reported unreachable.
    if (u === null || (u.protocol !== 'http:' && u.protocol !== 'https:'))
      throw new UsageError(
        `${from} ${JSON.stringify(url)} is not an http:// or https:// URL (such as http://127.0.0.1:8080)`,
      );
    if (u.username || u.password)
      throw new UsageError(`${from} must not hold a user or password: the key is sent as a bearer token`);
    return new ApiClient(url.replace(/\/+$/, ''), key);
  }

  async call(
    method: string,
    path: string,
    query: Record<string, string | undefined> = {},
    body?: unknown,
  ): Promise<unknown> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) qs.set(k, v);
    const q = qs.toString();
    let res: { status: number; location: string | null; text: () => Promise<string> };
    try {
      // undici's request, not fetch(): fetch refuses the web's "bad ports" (10080, 6665-6669, ...),
      // where a gateway may well listen. Redirects are not followed (below).
      const r = await undici().request(`${this.base}${path}${q ? `?${q}` : ''}`, {
        method: method as 'GET',
        headers: {
          authorization: `Bearer ${this.key}`,
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const loc = r.headers.location;
      res = { status: r.statusCode, location: typeof loc === 'string' ? loc : null, text: () => r.body.text() };
    } catch (e) {
      const c = e as { code?: string; cause?: { code?: string }; errors?: { code?: string }[] };
      const cause = c.cause?.code ?? c.errors?.[0]?.code ?? c.code ?? (e as Error).message;
      throw new Unreachable(`cannot reach the gateway at ${this.base} (${cause}); is it running? (--url)`);
    }
    // Never followed: the key is not to be sent on to another address, and a 301 or 302 would
    // turn a POST into a GET; the address it names is said instead.
    if (res.status >= 300 && res.status < 400) {
      await res.text().catch(() => '');
      throw new Error(
        `${this.base} answered ${res.status}, a redirect${res.location ? ` to ${printable(res.location)}` : ''}: give --url the gateway's own address (a key is not sent on through a redirect)`,
      );
    }
    const text = await res.text();
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      throw new Error(`${this.base} answered ${res.status} with something that is not JSON: is --url a wakegate?`);
    }
    if (res.status >= 400) throw new ApiError(res.status, (parsed ?? {}) as ApiError['body']);
    // Every answer of the API names what it is (`object`): JSON without it is some other service's.
    if (text && (parsed === null || typeof parsed !== 'object' || !('object' in parsed)))
      throw new Error(
        `${this.base} answered ${res.status} with JSON that is not a wakegate API answer (it has no "object"): is --url a wakegate?`,
      );
    return parsed;
  }
}
