import net from 'node:net';
import { availableParallelism } from 'node:os';
import type { Config } from './config/index.js';
import { serverOf } from './store/client.js';
import { DirHeld, type DirLock, lockDataDir } from './store/owner.js';
import type { Store } from './store/store.js';
import { queryRows } from './store/store.js';

/**
 * A start that cannot go on, said in one line naming the setting to change (never a
 * raw engine or client stack): a data directory in use, storage that cannot be
 * reached or is not ClickHouse, a port in use.
 */
export class StartError extends Error {
  override readonly name = 'StartError';
}

/**
 * Before anything opens under DATA_DIR: holds it for this process (a lock the kernel
 * releases when the process dies), or names the live gateway holding it. Whatever the
 * storage: with a ClickHouse server the write-ahead logs, the buckets and secret.key
 * are still in DATA_DIR, and a second gateway there would take the first one's open
 * log segment for a crash's (insert it, delete it: the first one's batch lost).
 */
export async function holdDataDir(cfg: Readonly<Config>): Promise<DirLock> {
  try {
    return await lockDataDir(cfg.storage.data_dir);
  } catch (e) {
    throw dataDirError(cfg, e);
  }
}

/** What holding DATA_DIR threw (lockDataDir), as one line naming the setting. */
export function dataDirError(cfg: Readonly<Config>, e: unknown): StartError {
  if (e instanceof DirHeld)
    return dataDirInUse(cfg, e.pid === null ? 'by another gateway' : `by the gateway with pid ${e.pid}`);
  return new StartError(
    `DATA_DIR ${cfg.storage.data_dir} cannot be held (${(e as NodeJS.ErrnoException).code ?? firstLine(String(e))}): check storage.data_dir`,
  );
}

const dataDirInUse = (cfg: Readonly<Config>, by: string) =>
  new StartError(
    `DATA_DIR ${cfg.storage.data_dir} is in use ${by}: stop it, or give this gateway its own DATA_DIR (storage.data_dir)`,
  );

/** What opening storage threw, as one line naming the setting. */
export function storageError(cfg: Readonly<Config>, e: unknown): StartError {
  const url = cfg.storage.clickhouse_url;
  // What the error says is shown: never the password, wherever it came from.
  const msg = withoutPassword(e instanceof Error ? e.message : String(e), cfg.storage);
  if (!url) {
    if (/lock|already running|failed to create connection/i.test(msg)) return dataDirInUse(cfg, 'by another process');
    return new StartError(`the embedded engine under DATA_DIR ${cfg.storage.data_dir} did not open: ${firstLine(msg)}`);
  }
  const code = (e as { code?: string }).code;
  if (
    code === 'ECONNREFUSED' ||
    code === 'ENOTFOUND' ||
    code === 'ETIMEDOUT' ||
    /timeout|ECONN|socket hang up/i.test(msg)
  )
    return new StartError(
      `CLICKHOUSE_URL ${safeUrl(url)} cannot be reached (${code ?? firstLine(msg)}): check storage.clickhouse_url, or unset it to use the embedded engine`,
    );
  if (/authentication|password|AUTHENTICATION_FAILED|REQUIRED_PASSWORD/i.test(msg))
    return new StartError(
      `CLICKHOUSE_URL ${safeUrl(url)} refused the credentials: check CLICKHOUSE_USER and CLICKHOUSE_PASSWORD`,
    );
  return new StartError(
    `CLICKHOUSE_URL ${safeUrl(url)} did not answer as ClickHouse (${firstLine(msg)}): check storage.clickhouse_url`,
  );
}

/**
 * Asks the server what it is, in one line when it is not ClickHouse: its /ping must
 * answer `Ok.` (ClickHouse's HTTP interface), then `SELECT version()` a version.
 */
export async function checkServer(cfg: Readonly<Config>, store: Store): Promise<void> {
  const url = cfg.storage.clickhouse_url;
  if (!url) return;
  let ping: Response;
  try {
    // The URL without the credentials it may hold (fetch refuses such a URL; /ping needs none).
    ping = await fetch(new URL('/ping', serverOf(cfg.storage).url), { signal: AbortSignal.timeout(5000) });
  } catch (e) {
    const cause = (e as { cause?: { code?: string } }).cause;
    throw storageError(cfg, cause?.code ? cause : e);
  }
  const text = (await ping.text()).trim();
  if (text !== 'Ok.')
    throw storageError(cfg, new Error(`/ping answered ${ping.status} ${JSON.stringify(text.slice(0, 40))}`));
  try {
    const [row] = await queryRows<{ v: string }>(store, 'SELECT version() AS v');
    if (!row || !/^\d+\.\d+/.test(row.v)) throw new Error(`version() answered ${JSON.stringify(row?.v)}`);
  } catch (e) {
    throw storageError(cfg, e);
  }
}

/** A listener that could not listen, as one line naming its setting. */
export function listenError(e: unknown, what: { name: string; setting: string; port: number; host?: string }): unknown {
  const code = (e as { code?: string }).code;
  if (what.host !== undefined && (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN')) {
    // The host beside the port: PORT's is HOST (server.host), OPS_PORT's OPS_HOST, management.port's management.host.
    const name = what.name.replace(/port$/, 'host').replace(/PORT$/, 'HOST');
    const setting = what.setting.replace(/port$/, 'host');
    const why = code === 'EADDRNOTAVAIL' ? 'is not an address of this machine' : 'does not resolve to an address';
    return new StartError(`${name} ${what.host} ${why} (${setting}): listen on one of this machine's addresses`);
  }
  if (code === 'EADDRINUSE')
    return new StartError(
      `${what.name} ${what.port} is in use (${what.setting}): stop what holds it, or choose another port`,
    );
  if (code === 'EACCES')
    return new StartError(
      `${what.name} ${what.port} may not be bound by this user (${what.setting}): choose a port above 1023`,
    );
  return e;
}

/**
 * Whether a port can be listened on as the gateway will, tried before anything else
 * starts: a port in use is said at once, not after the store is opened and migrated.
 * `reusePort` as the real listen will have it (edge threads share the main port), so
 * what the real listen would accept is accepted here too. Port 0 is always free; its host is tried.
 */
export async function portFree(
  port: number,
  host: string,
  reusePort: boolean,
  what: { name: string; setting: string },
): Promise<void> {
  // Port 0 is always free, but its host is tried all the same: one not on this machine is said now, not after the store is opened.
  const probe = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      const opts: net.ListenOptions & { reusePort?: boolean } = { port, host, exclusive: true };
      if (reusePort) opts.reusePort = true;
      probe.listen(opts, () => resolve());
    });
  } catch (e) {
    throw listenError(e, { ...what, port, host });
  } finally {
    if (probe.listening) await new Promise<void>((r) => probe.close(() => r()));
  }
}

/** The runtime can listen with SO_REUSEPORT (Node 22.12 or later, on Linux). */
export function hasReusePort(version = process.versions.node, platform = process.platform): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return platform === 'linux' && (major > 22 || (major === 22 && minor >= 12));
}

/** How many edge threads `server.threads` means here, and why it is 1 when more were asked for. */
export function resolveThreads(
  cfg: Readonly<Config>,
  reusePort = hasReusePort(),
  cores = availableParallelism(),
): { threads: number; why: string | null } {
  const asked = cfg.server.threads === 'auto' ? cores : cfg.server.threads;
  if (asked <= 1 || reusePort) return { threads: asked, why: null };
  return {
    threads: 1,
    why: `server.threads is ${cfg.server.threads}, but edge threads share the port with SO_REUSEPORT, which needs Node 22.12 or later on Linux (this is Node ${process.versions.node} on ${process.platform}): serving with one thread`,
  };
}

/** The one line at start that says what is running. */
export function startLine(
  cfg: Readonly<Config>,
  o: {
    file: string | null;
    port: number;
    opsPort: number;
    managementPort: number;
    dropIn: string | null;
    threads: number;
  },
): Record<string, unknown> {
  const s = cfg.server;
  const m = cfg.management;
  return {
    port: o.port,
    ops_port: o.opsPort,
    config: o.file ?? '(defaults)',
    data_dir: cfg.storage.data_dir,
    storage: cfg.storage.clickhouse_url ? safeUrl(cfg.storage.clickhouse_url) : 'embedded',
    listen: `${s.host}:${o.port}`,
    ops: `${s.ops_host}:${o.opsPort}`,
    console: cfg.console.enabled
      ? `http://${m.listener === 'separate' ? m.host : s.ops_host}:${o.managementPort}${cfg.console.path}/`
      : 'off',
    threads: o.threads,
    // The origin's user too: `https://TOKEN@host` is a common way to hold a credential.
    ...(o.dropIn
      ? { origin: safeUrl(o.dropIn, { user: true }) }
      : { routes: cfg.routes.map((r) => `${r.name} ${r.prefix}`) }),
  };
}

/** Text with the storage password (from CLICKHOUSE_PASSWORD or the URL, as written and URL-encoded) masked. */
function withoutPassword(text: string, storage: Readonly<Config>['storage']): string {
  let out = text;
  for (const p of new Set([serverOf(storage).password, storage.clickhouse_password ?? ''])) {
    if (p.length < 1) continue;
    out = out.replaceAll(p, '***').replaceAll(encodeURIComponent(p), '***');
  }
  return out;
}

/** A URL without its password (and, with `user`, its user name), as a log line may show it. */
function safeUrl(url: string, o: { user?: boolean } = {}): string {
  try {
    const u = new URL(url);
    if (!u.password && !(o.user && u.username)) return url;
    if (u.password) u.password = '***';
    if (o.user && u.username) u.username = '***';
    return u.toString().replace(/\/$/, '');
  } catch {
    return url;
  }
}

const firstLine = (s: string): string => (s.split('\n')[0] ?? '').slice(0, 200);
