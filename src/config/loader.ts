import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { defaults } from './defaults.js';
import { locator, type Problem, plainProblems } from './problems.js';
import { type Config, configSchema } from './schema.js';

/**
 * What is wrong with a configuration: every problem at once, one line each naming
 * the key path and why (`config: routes[0].origins: is required (wakegate.yaml:12:5)`).
 * `path` and `reason` are the first problem's.
 */
export class ConfigError extends Error {
  readonly problems: readonly (Problem & { where?: string })[];
  constructor(
    readonly path: string,
    readonly reason: string,
    more: readonly (Problem & { where?: string })[] = [],
  ) {
    const all = more.length ? more : [{ path, reason }];
    super(all.map(lineOf).join('\n'));
    this.problems = all;
    this.name = 'ConfigError';
  }

  static of(problems: readonly (Problem & { where?: string })[]): ConfigError {
    const first = problems[0] as Problem;
    return new ConfigError(first.path, first.reason, problems);
  }
}

const lineOf = (p: Problem & { where?: string }) =>
  `config: ${p.path || '(root)'}: ${p.reason}${p.where ? ` (${p.where})` : ''}`;

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

/** Checks that span several keys, after the shapes are known to be right; every problem found. */
function crossCheck(cfg: Config): Problem[] {
  const problems: Problem[] = [];
  const fail = (path: string, reason: string) => problems.push({ path, reason });
  const envs = new Set(Object.keys(cfg.environments));
  for (const policy of ['default', 'sandbox', 'unauthenticated']) {
    if (!cfg.rate_limits[policy]) fail(`rate_limits.${policy}`, 'this policy is required');
  }
  const names = new Set<string>();
  const prefixes = new Set<string>();
  cfg.routes.forEach((r, i) => {
    const at = `routes[${i}]`;
    if (names.has(r.name)) fail(`${at}.name`, `duplicate route name ${JSON.stringify(r.name)}`);
    if (prefixes.has(r.prefix)) fail(`${at}.prefix`, `duplicate prefix ${JSON.stringify(r.prefix)}`);
    names.add(r.name);
    prefixes.add(r.prefix);
    for (const e of Object.keys(r.origins)) {
      if (!envs.has(e)) fail(`${at}.origins.${e}`, `unknown environment ${JSON.stringify(e)}`);
    }
    if (!Object.hasOwn(cfg.rate_limits, r.rate_limit)) {
      fail(`${at}.rate_limit`, `unknown rate limit policy ${JSON.stringify(r.rate_limit)}`);
    }
    if (r.auth === 'required' && !r.scopes) fail(`${at}.scopes`, 'a route with auth: required needs scopes');
    const tls = cfg.server.tls;
    if (r.auth === 'mtls' && (tls === null || tls.client_auth === 'none'))
      fail(
        `${at}.auth`,
        'auth: mtls needs client certificates: server.tls with client_ca and client_auth optional or required',
      );
  });
  for (const [name, p] of Object.entries(cfg.rate_limits)) {
    if (p.burst < 1 || p.limit < 1) fail(`rate_limits.${name}`, 'limit and burst must be positive');
  }
  if (cfg.console.enabled) {
    const cp = cfg.console.path;
    if (cp === '/v2' || cp.startsWith('/v2/')) fail('console.path', 'must not be under /v2');
    // The console lives on the management listener, so a route may have its path on the main one.
    if (['/metrics', '/healthz', '/readyz'].includes(cp) && cfg.management.listener === 'ops')
      fail('console.path', `${cp} is the ops listener's own`);
  }
  if (cfg.management.tls !== null && cfg.management.listener !== 'separate')
    fail(
      'management.tls',
      'applies to the separate management listener (management.listener: separate); the ops listener takes server.ops_tls',
    );
  if (cfg.storage.cluster !== null && cfg.storage.clickhouse_url === null) {
    // The embedded engine is one process: a cluster is servers, reached over HTTP.
    fail('storage.cluster', 'a cluster needs storage.clickhouse_url (CLICKHOUSE_URL), one of its servers');
  }
  if (cfg.coordination.redis_url !== null && cfg.storage.clickhouse_url === null) {
    // Buckets shared through Redis while each instance keeps its own keys, endpoints and wakes: refused.
    fail(
      'coordination.redis_url',
      'a fleet shares its storage: set CLICKHOUSE_URL (storage.clickhouse_url) to the ClickHouse server every instance uses; the embedded store is one gateway alone',
    );
  }
  if (cfg.admin_key !== null && !/^svc_live_[A-Za-z0-9]{32,128}$/.test(cfg.admin_key)) {
    fail('admin_key', 'WAKEGATE_ADMIN_KEY must be svc_live_ followed by 32 to 128 letters or digits');
  }
  if (cfg.environments && !Object.values(cfg.environments).some((e) => e.class === 'live')) {
    fail('environments', 'at least one environment of class live is needed');
  }
  return problems;
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
  let text: string | null = null;
  if (opts.file) {
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
  // A value an environment variable set is named by that variable, which is what the user typed;
  // one the file set is located in the file.
  const find = text !== null && opts.file ? locator(text) : null;
  // Problems the file locates are listed in the file's order, then the rest as found.
  // One line per key path (the first reason), and one per environment variable: a value
  // ORIGIN_URL set for every environment is one mistake, said once.
  const once = (ps: (Problem & { where?: string })[]) => {
    const seen = new Set<string>();
    return ps.filter((p) => {
      const byVar = / \(set by ([A-Z_]+)\)$/.exec(p.reason)?.[1];
      const key = byVar ? `var:${byVar}` : `path:${p.path}`;
      if (seen.has(key) || seen.has(`path:${p.path}`)) return false;
      seen.add(key);
      seen.add(`path:${p.path}`);
      return true;
    });
  };
  const inOrder = (ps: (Problem & { where?: string })[]) => {
    const pos = (p: { where?: string }) => {
      const m = p.where ? /:(\d+):(\d+)$/.exec(p.where) : null;
      return m ? Number(m[1]) * 1e6 + Number(m[2]) : Number.MAX_SAFE_INTEGER;
    };
    return ps
      .map((p, i) => ({ p, i }))
      .sort((a, b) => pos(a.p) - pos(b.p) || a.i - b.i)
      .map(({ p }) => p);
  };
  const place = (p: Problem): Problem & { where?: string } => {
    const name = [...fromEnv].find(
      ([k]) => p.path === k || p.path.startsWith(`${k}.`) || p.path.startsWith(`${k}[`),
    )?.[1];
    if (name) return { ...p, reason: `${p.reason} (set by ${name})` };
    const where = find?.(p.path);
    return where ? { ...p, where: `${opts.file}:${where}` } : p;
  };
  const parsed = configSchema.safeParse(merged);
  if (!parsed.success)
    throw ConfigError.of(once(inOrder(plainProblems(parsed.error.issues, merged, configSchema).map(place))));
  const problems = crossCheck(parsed.data);
  if (problems.length) throw ConfigError.of(once(inOrder(problems.map(place))));
  return deepFreeze(parsed.data);
}
