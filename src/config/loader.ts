import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { defaults } from './defaults.js';
import { locator, type Problem, plainProblems } from './problems.js';
import { type Config, configSchema } from './schema.js';
import { credentialsProblem } from './tracing.js';

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

/** Environment variables of DESIGN.md, each mapped onto a config key. */
/**
 * Applies them; returns which config paths an environment variable set (`routes` for
 * ORIGIN_URL), to name it in errors. What cannot be applied is added to `problems`.
 */
function applyEnv(
  cfg: Plain,
  env: NodeJS.ProcessEnv,
  fileHasRoutes: boolean,
  problems: Problem[],
): Map<string, string> {
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
    if (kind === 'int' && !/^\d+$/.test(raw)) {
      problems.push({ path: path.join('.'), reason: `${name} must be a whole number, got ${JSON.stringify(raw)}` });
      continue;
    }
    setPath(cfg, path, kind === 'int' ? Number(raw) : raw);
    set.set(path.join('.'), name);
  }
  const origin = env.ORIGIN_URL;
  if (origin && fileHasRoutes) {
    // Replacing them by an auth: none catch-all would silently open every keyed route.
    problems.push({
      path: 'routes',
      reason:
        'ORIGIN_URL (drop-in mode: one catch-all route with no key) cannot be combined with routes in the config file; remove one of them',
    });
  } else if (origin) {
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

/** A config as far as it parsed: any key may be missing (it did not), any list item undefined. */
type Parsed<T> = T extends readonly (infer U)[]
  ? (Parsed<U> | undefined)[]
  : T extends object
    ? { [K in keyof T]?: Parsed<T[K]> }
    : T;

const FAILED = Symbol('failed');

// biome-ignore lint/suspicious/noExplicitAny: walks the schema library's internal definition (as problems.ts does)
type Def = any;

/**
 * What of `value` parses against `schema`, key by key: a mapping keeps each key whose
 * value parses (defaults applied), a list each item (undefined where one does not), a
 * record every key (its value undefined where it does not: the name is still there to
 * be referred to). FAILED when nothing of it does.
 */
function salvage(schema: Def, value: unknown): unknown {
  const whole = schema.safeParse(value);
  if (whole.success) return whole.data;
  let cur: Def = schema;
  for (let i = 0; i < 8; i++) {
    const d = cur?._zod?.def;
    if (d && ['default', 'nullable', 'optional', 'prefault', 'readonly', 'catch'].includes(d.type)) cur = d.innerType;
    else if (d?.type === 'pipe') cur = d.in;
    else break;
  }
  const d = cur?._zod?.def;
  if (d?.type === 'object' && isPlain(value)) {
    const out: Plain = {};
    for (const [k, sub] of Object.entries(d.shape as Record<string, Def>)) {
      const v = salvage(sub, value[k]);
      if (v !== FAILED) out[k] = v;
    }
    return out;
  }
  if (d?.type === 'array' && Array.isArray(value))
    return value.map((item) => {
      const v = salvage(d.element, item);
      return v === FAILED ? undefined : v;
    });
  if (d?.type === 'record' && isPlain(value))
    return Object.fromEntries(
      Object.entries(value).map(([k, item]) => {
        const v = salvage(d.valueType, item);
        return [k, v === FAILED ? undefined : v];
      }),
    );
  return FAILED;
}

/**
 * Checks that span several keys, on what parsed (so a wrong type in one place still
 * lets a duplicate route name elsewhere be named in the same error); a check whose
 * keys did not parse is left to the problems already found there.
 */
function crossCheck(cfg: Parsed<Config>): Problem[] {
  const problems: Problem[] = [];
  const fail = (path: string, reason: string) => problems.push({ path, reason });
  const envs = cfg.environments ? new Set(Object.keys(cfg.environments)) : null;
  const policies = cfg.rate_limits ?? null;
  if (policies) {
    for (const policy of ['default', 'sandbox', 'unauthenticated']) {
      if (!Object.hasOwn(policies, policy)) fail(`rate_limits.${policy}`, 'this policy is required');
    }
  }
  const names = new Set<string>();
  const prefixes = new Set<string>();
  const tls = cfg.server?.tls;
  (cfg.routes ?? []).forEach((r, i) => {
    if (r === undefined) return;
    const at = `routes[${i}]`;
    if (r.name !== undefined) {
      if (names.has(r.name)) fail(`${at}.name`, `duplicate route name ${JSON.stringify(r.name)}`);
      names.add(r.name);
    }
    if (r.prefix !== undefined) {
      if (prefixes.has(r.prefix)) fail(`${at}.prefix`, `duplicate prefix ${JSON.stringify(r.prefix)}`);
      prefixes.add(r.prefix);
    }
    if (envs && r.origins) {
      for (const e of Object.keys(r.origins)) {
        if (!envs.has(e)) fail(`${at}.origins.${e}`, `unknown environment ${JSON.stringify(e)}`);
      }
    }
    if (policies && r.rate_limit !== undefined && !Object.hasOwn(policies, r.rate_limit)) {
      fail(`${at}.rate_limit`, `unknown rate limit policy ${JSON.stringify(r.rate_limit)}`);
    }
    if (r.auth === 'required' && r.scopes === null) fail(`${at}.scopes`, 'a route with auth: required needs scopes');
    if (r.auth === 'mtls' && tls !== undefined && (tls === null || tls.client_auth === 'none'))
      fail(
        `${at}.auth`,
        'auth: mtls needs client certificates: server.tls with client_ca and client_auth optional or required',
      );
  });
  for (const [name, p] of Object.entries(policies ?? {})) {
    if (p && ((p.burst ?? 1) < 1 || (p.limit ?? 1) < 1))
      fail(`rate_limits.${name}`, 'limit and burst must be positive');
  }
  const cons = cfg.console;
  const m = cfg.management;
  if (cons?.enabled && cons.path !== undefined) {
    const cp = cons.path;
    if (cp === '/v2' || cp.startsWith('/v2/')) fail('console.path', 'must not be under /v2');
    // The console lives on the management listener, so a route may have its path on the main one.
    if (['/metrics', '/healthz', '/readyz'].includes(cp) && m?.listener === 'ops')
      fail('console.path', `${cp} is the ops listener's own`);
  }
  if (m?.tls !== undefined && m.tls !== null && m.listener !== undefined && m.listener !== 'separate')
    fail(
      'management.tls',
      'applies to the separate management listener (management.listener: separate); the ops listener takes server.ops_tls',
    );
  // Two listeners on one port of one address: the second's listen would fail after the store is
  // opened, reported as a port something else holds. 0 is a free port each.
  const srv = cfg.server;
  const bound: [string, number | undefined, string | undefined][] = [
    ['server.port', srv?.port, srv?.host],
    ['server.ops_port', srv?.ops_port, srv?.ops_host],
  ];
  if (m?.listener === 'separate') bound.push(['management.port', m.port, m.host]);
  const wildcard = (h: string | undefined) => h === '0.0.0.0' || h === '::' || h === '';
  bound.forEach(([key, port, host], i) => {
    for (const [other, p2, h2] of bound.slice(0, i)) {
      if (port === undefined || port === 0 || port !== p2) continue;
      if (host === h2 || wildcard(host) || wildcard(h2))
        fail(key, `${port} is ${other} too: each listener needs a port of its own`);
    }
  });
  const st = cfg.storage;
  if (st?.cluster !== undefined && st.cluster !== null && st.clickhouse_url === null) {
    // The embedded engine is one process: a cluster is servers, reached over HTTP.
    fail('storage.cluster', 'a cluster needs storage.clickhouse_url (CLICKHOUSE_URL), one of its servers');
  }
  const redis = cfg.coordination?.redis_url;
  if (redis !== undefined && redis !== null && st?.clickhouse_url === null) {
    // Buckets shared through Redis while each instance keeps its own keys, endpoints and wakes: refused.
    fail(
      'coordination.redis_url',
      'a fleet shares its storage: set CLICKHOUSE_URL (storage.clickhouse_url) to the ClickHouse server every instance uses; the embedded store is one gateway alone',
    );
  }
  if (typeof cfg.admin_key === 'string' && !/^svc_live_[A-Za-z0-9]{32,128}$/.test(cfg.admin_key)) {
    fail('admin_key', 'WAKEGATE_ADMIN_KEY must be svc_live_ followed by 32 to 128 letters or digits');
  }
  // Checked by the tracing schema only once every other tracing key parses: here too, so it is
  // named with them. A URL that parsed whole has had its credentials taken out already.
  const tr = cfg.tracing;
  if (typeof tr?.otlp_url === 'string') {
    const problem = credentialsProblem(tr.otlp_url, tr.headers ?? {});
    if (problem !== null) fail('tracing.otlp_url', problem);
  }
  const classes = Object.values(cfg.environments ?? {}).map((e) => e?.class);
  // Known only when every environment's class parsed.
  if (cfg.environments && classes.every((c) => c !== undefined) && !classes.includes('live')) {
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
      // One line, located as every other problem is: `… (wakegate.yaml:3:3)`.
      const pos = (e as { linePos?: { line: number; col: number }[] }).linePos?.[0];
      const why = ((e as Error).message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?\s*$/, '');
      throw new ConfigError('(file)', `${opts.file} is not valid YAML: ${why}`, [
        {
          path: '(file)',
          reason: `${opts.file} is not valid YAML: ${why}`,
          ...(pos ? { where: `${opts.file}:${pos.line}:${pos.col}` } : {}),
        },
      ]);
    }
    if (!isPlain(fromFile)) throw new ConfigError('(file)', `${opts.file} must hold a mapping at the top level`);
  }
  // What the file or the environment says that no schema can check, found before it.
  const early: Problem[] = [];
  if (isPlain(fromFile) && 'instance' in fromFile) {
    // The static split (every limit divided by count, dispatch sharded by endpoint) is gone.
    early.push({
      path: 'instance',
      reason:
        'instance: {index, count} is retired; gateways share buckets, revocations and webhook dispatch through coordination.redis_url (a Redis or Valkey server)',
    });
    const { instance: _, ...rest } = fromFile;
    fromFile = rest;
  }
  const merged = mergeConfig(structuredClone(defaults), fromFile) as Plain;
  // A variable's own problem names it, so it is not also located in the file.
  const fromVars: Problem[] = [];
  const fromEnv = applyEnv(merged, opts.env ?? {}, isPlain(fromFile) && 'routes' in fromFile, fromVars);
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
  // Every problem at once: the schema's, then the checks across keys on what of it parsed.
  const problems = [...early, ...(parsed.success ? [] : plainProblems(parsed.error.issues, merged, configSchema))];
  problems.push(...crossCheck(parsed.success ? parsed.data : (salvage(configSchema, merged) as Parsed<Config>)));
  if (problems.length || fromVars.length || !parsed.success)
    throw ConfigError.of(once([...fromVars, ...inOrder(problems.map(place))]));
  return deepFreeze(parsed.data);
}
