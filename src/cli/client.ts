import { readFileSync } from 'node:fs';
import { UsageError } from './args.js';

/** A failed /v2 call, with the API's own error body. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: { error?: { type?: string; message?: string; param?: string | null; wake_id?: string | null } },
  ) {
    const e = body.error;
    super(
      e
        ? `${status} ${e.type}: ${e.message}${e.param ? ` (param: ${e.param})` : ''}${e.wake_id ? ` [wake ${e.wake_id}]` : ''}`
        : `HTTP ${status}`,
    );
  }
}

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
    let res: Response;
    try {
      res = await fetch(`${this.base}${path}${q ? `?${q}` : ''}`, {
        method,
        headers: {
          authorization: `Bearer ${this.key}`,
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (e) {
      const c = (e as { cause?: { code?: string; errors?: { code?: string }[] } }).cause;
      const cause = c?.code ?? c?.errors?.[0]?.code ?? (e as Error).message;
      throw new Error(`cannot reach the gateway at ${this.base} (${cause}); is it running? (--url)`);
    }
    const text = await res.text();
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      throw new Error(`${this.base} answered ${res.status} with something that is not JSON: is --url a wakegate?`);
    }
    if (!res.ok) throw new ApiError(res.status, (parsed ?? {}) as ApiError['body']);
    return parsed;
  }
}
