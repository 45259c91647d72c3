import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { defaults } from './defaults.js';
import { type Config, configSchema } from './schema.js';

/** A configuration problem; `message` is one line naming the key path and why. */
export class ConfigError extends Error {
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`config: ${path || '(root)'}: ${reason}`);
    this.name = 'ConfigError';
  }
}

type Plain = Record<string, unknown>;
const isPlain = (v: unknown): v is Plain => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Merge `over` onto `base`: objects key by key, everything else (lists included) replaced. */
export function mergeConfig(base: unknown, over: unknown): unknown {
  if (!isPlain(base) || !isPlain(over)) return over === undefined ? base : over;
  const out: Plain = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = k in base ? mergeConfig(base[k], v) : v;
  return out;
}

function setPath(obj: Plain, path: string[], value: unknown): void {
  let cur = obj;
  for (const key of path.slice(0, -1)) {
    if (!isPlain(cur[key])) cur[key] = {};
    cur = cur[key] as Plain;
  }
  cur[path[path.length - 1] as string] = value;
}

const intVar = (name: string, path: string, raw: string): number => {
  if (!/^\d+$/.test(raw)) throw new ConfigError(path, `${name} must be a whole number, got ${JSON.stringify(raw)}`);
  return Number(raw);
};

/** Environment variables of DESIGN.md, each mapped onto a config key. */
/** Applies them; returns which config paths an environment variable set (`routes` for ORIGIN_URL), to name it in errors. */
function applyEnv(cfg: Plain, env: NodeJS.ProcessEnv, fileHasRoutes: boolean): Map<string, string> {
  const set = new Map<string, string>();
  const map: [string, string[], 'int' | 'str'][] = [
    ['PORT', ['server', 'port'], 'int'],
    ['HOST', ['server', 'host'], 'str'],
    ['OPS_PORT', ['server', 'ops_port'], 'int'],
    ['OPS_HOST', ['server', 'ops_host'], 'str'],
    ['DATA_DIR', ['storage', 'data_dir'], 'str'],
    ['CLICKHOUSE_URL', ['storage', 'clickhouse_url'], 'str'],
    ['CLICKHOUSE_USER', ['storage', 'clickhouse_user'], 'str'],
    ['CLICKHOUSE_PASSWORD', ['storage', 'clickhouse_password'], 'str'],
    ['CLICKHOUSE_DATABASE', ['storage', 'clickhouse_database'], 'str'],
    ['WAKEGATE_ADMIN_KEY', ['admin_key'], 'str'],
    ['WAKEGATE_ENCRYPTION_KEY', ['storage', 'encryption_key'], 'str'],
    ['LOG_LEVEL', ['log', 'level'], 'str'],
    ['REDIS_URL', ['coordination', 'redis_url'], 'str'],
  ];
  for (const [name, path, kind] of map) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    setPath(cfg, path, kind === 'int' ? intVar(name, path.join('.'), raw) : raw);
    set.set(path.join('.'), name);
  }
  const origin = env.ORIGIN_URL;
  if (origin && fileHasRoutes) {
    // Replacing them by an auth: none catch-all would silently open every keyed route.
    throw new ConfigError(
      'routes',
      'ORIGIN_URL (drop-in mode: one catch-all route with no key) cannot be combined with routes in the config file; remove one of them',
    );
  }
  if (origin) {
    // Drop-in mode: one catch-all route to this origin, no key needed.
    const envs = Object.keys(isPlain(cfg.environments) ? cfg.environments : {});
    cfg.routes = [
      {
        name: 'default',
        prefix: '/',
        auth: 'none',
        origins: Object.fromEntries((envs.length ? envs : ['production']).map((e) => [e, origin])),
        latency_objective_ms: null,
        availability_objective: null,
      },
    ];
    set.set('routes', 'ORIGIN_URL');
  }
  return set;
}

function issuePath(issue: z.core.$ZodIssue): string {
  return issue.path
    .map((p) => (typeof p === 'number' ? `[${p}]` : String(p)))
    .join('.')
    .replace(/\.\[/g, '[');
}

/** Checks that span several keys, after the shapes are known to be right. */
function crossCheck(cfg: Config): void {
  const envs = new Set(Object.keys(cfg.environments));
  for (const policy of ['default', 'sandbox', 'unauthenticated']) {
    if (!cfg.rate_limits[policy]) throw new ConfigError(`rate_limits.${policy}`, 'this policy is required');
  }
  const names = new Set<string>();
  const prefixes = new Set<string>();
  cfg.routes.forEach((r, i) => {
    const at = `routes[${i}]`;
    if (names.has(r.name)) throw new ConfigError(`${at}.name`, `duplicate route name ${JSON.stringify(r.name)}`);
    if (prefixes.has(r.prefix)) throw new ConfigError(`${at}.prefix`, `duplicate prefix ${JSON.stringify(r.prefix)}`);
    names.add(r.name);
    prefixes.add(r.prefix);
    for (const e of Object.keys(r.origins)) {
      if (!envs.has(e)) throw new ConfigError(`${at}.origins.${e}`, `unknown environment ${JSON.stringify(e)}`);
    }
    if (!cfg.rate_limits[r.rate_limit]) {
      throw new ConfigError(`${at}.rate_limit`, `unknown rate limit policy ${JSON.stringify(r.rate_limit)}`);
    }
    if (r.auth === 'required' && !r.scopes)
      throw new ConfigError(`${at}.scopes`, 'a route with auth: required needs scopes');
  });
  for (const [name, p] of Object.entries(cfg.rate_limits)) {
    if (p.burst < 1 || p.limit < 1) throw new ConfigError(`rate_limits.${name}`, 'limit and burst must be positive');
  }
  if (cfg.console.enabled) {
    const cp = cfg.console.path;
    if (cp === '/v2' || cp.startsWith('/v2/')) throw new ConfigError('console.path', 'must not be under /v2');
    // The console lives on the management listener, so a route may have its path on the main one.
    if (['/metrics', '/healthz', '/readyz'].includes(cp) && cfg.management.listener === 'ops')
      throw new ConfigError('console.path', `${cp} is the ops listener's own`);
  }
  if (cfg.storage.cluster !== null && cfg.storage.clickhouse_url === null) {
    // The embedded engine is one process: a cluster is servers, reached over HTTP.
    throw new ConfigError(
      'storage.cluster',
      'a cluster needs storage.clickhouse_url (CLICKHOUSE_URL), one of its servers',
    );
  }
  if (cfg.admin_key !== null && !/^svc_live_[A-Za-z0-9]{32,128}$/.test(cfg.admin_key)) {
    throw new ConfigError('admin_key', 'WAKEGATE_ADMIN_KEY must be svc_live_ followed by 32 to 128 letters or digits');
  }
  if (cfg.environments && !Object.values(cfg.environments).some((e) => e.class === 'live')) {
    throw new ConfigError('environments', 'at least one environment of class live is needed');
  }
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Plain)[k]);
  }
  return v;
}

export interface LoadOptions {
  /** YAML file; null or undefined means defaults only. */
  file?: string | null;
  /** Parsed file contents given directly (tests), merged like a file. */
  values?: unknown;
  env?: NodeJS.ProcessEnv;
}

/** Reads, merges, validates and freezes the configuration. Throws ConfigError. */
export function loadConfig(opts: LoadOptions = {}): Readonly<Config> {
  let fromFile: unknown = opts.values ?? {};
  if (opts.file) {
    let text: string;
    try {
      text = readFileSync(opts.file, 'utf8');
    } catch (e) {
      throw new ConfigError('(file)', `cannot read ${opts.file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
    }
    try {
      fromFile = parseYaml(text) ?? {};
    } catch (e) {
      throw new ConfigError('(file)', `${opts.file} is not valid YAML: ${(e as Error).message.split('\n')[0]}`);
    }
    if (!isPlain(fromFile)) throw new ConfigError('(file)', `${opts.file} must hold a mapping at the top level`);
  }
  if (isPlain(fromFile) && 'instance' in fromFile) {
    // The static split (every limit divided by count, dispatch sharded by endpoint) is gone.
    throw new ConfigError(
      'instance',
      'instance: {index, count} is retired; gateways share buckets, revocations and webhook dispatch through coordination.redis_url (a Redis or Valkey server)',
    );
  }
  const merged = mergeConfig(structuredClone(defaults), fromFile) as Plain;
  const fromEnv = applyEnv(merged, opts.env ?? {}, isPlain(fromFile) && 'routes' in fromFile);
  const parsed = configSchema.safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0] as z.core.$ZodIssue;
    const keys = issue.code === 'unrecognized_keys' ? ` (${issue.keys.join(', ')})` : '';
    const at = issuePath(issue);
    // A value an environment variable set is named by that variable, which is what the user typed.
    const head = issue.path.map(String).join('.');
    const name = [...fromEnv].find(([p]) => head === p || head.startsWith(`${p}.`))?.[1];
    throw new ConfigError(at, `${issue.message}${keys}${name ? ` (set by ${name})` : ''}`);
  }
  crossCheck(parsed.data);
  return deepFreeze(parsed.data);
}
