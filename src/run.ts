/**
 * The CLI's commands (serve, migrate, keys, endpoints, deliveries, wakes, replay), run by main.ts once
 * it has hidden a key given on the command line.
 */
import { existsSync, fstatSync, readFileSync, statSync, writeSync } from 'node:fs';
import { isAbsolute, join, relative } from 'node:path';
import { type Args, LOCAL, nearest, onlyFlags, operands, parseArgs, UsageError } from './cli/args.js';
import { ApiError } from './cli/client.js';
import { apiCommand, HELP } from './cli/commands.js';
import { fields } from './cli/table.js';
import type { Config } from './config/index.js';
import type { DirLock } from './store/owner.js';
import type { Store } from './store/store.js';

// The gateway, the store and the config schema are imported by the commands that use
// them: they take most of a second of CPU to load, which a command that talks to the
// API (or prints its help, or refuses a mistyped option) has no use for.
let config: typeof import('./config/index.js') | null = null;

const out = (s: string): void => {
  process.stdout.write(s);
};

/**
 * A reader that has gone (`wakegate wakes tail | head -n 1`, `| grep -m1`): there is
 * nobody left to tell anything, so the command ends quietly with status 0, as `yes |
 * head` does, never with Node's stack of an unhandled EPIPE. No command writes to
 * stdout with the store open; serve, which must not end so, hears it otherwise (serve).
 */
const stdoutGone = (e: NodeJS.ErrnoException): void => {
  if (e.code === 'EPIPE') process.exit(0);
  process.stderr.write(`wakegate: stdout cannot be written (${e.code ?? e.message})\n`);
  process.exit(1);
};
process.stdout.on('error', stdoutGone);

function version(): string {
  const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '..', 'package.json'), 'utf8')) as { version: string };
  return pkg.version;
}

/**
 * The package's own config/default.yaml (beside src/ in a checkout, beside dist/ once
 * built or installed), so an installed `wakegate` finds it from any directory. Named
 * relative to the working directory when it is under it, as a user would type it.
 */
function packagedConfig(): string | null {
  const file = join(import.meta.dirname, '..', 'config', 'default.yaml');
  if (!existsSync(file)) return null;
  const rel = relative(process.cwd(), file);
  return rel.startsWith('..') || isAbsolute(rel) ? file : rel;
}

/** --config, else WAKEGATE_CONFIG, else the packaged default; null: the built-in defaults alone (no file). */
const configFile = (flags: Map<string, string>): string | null =>
  flags.get('config') ?? process.env.WAKEGATE_CONFIG ?? packagedConfig();

async function configFrom(flags: Map<string, string>): Promise<Readonly<Config>> {
  config ??= await import('./config/index.js');
  return config.loadConfig({ file: configFile(flags), env: process.env });
}

/**
 * Opens the store directly, holding its data directory for as long as it is open
 * (whatever the storage: as `serve` does, so a command never runs beside a gateway on
 * its directory); says in one line when a running gateway holds it.
 */
async function openDirect(cfg: Readonly<Config>, instead: string): Promise<Store> {
  const { DirHeld, lockDataDir } = await import('./store/owner.js');
  const { openStore } = await import('./store/client.js');
  const held = (pid: number | null) =>
    new Error(
      `the store in ${cfg.storage.data_dir} is held by a running gateway${pid === null ? '' : ` (pid ${pid})`}; ${instead}`,
    );
  const { checkServer, dataDirError, storageError } = await import('./startup.js');
  let lock: DirLock;
  try {
    lock = await lockDataDir(cfg.storage.data_dir);
  } catch (e) {
    // Held: this command says what to do instead. A directory that cannot be used (a file
    // in its path, no permission): said as serve says it, naming storage.data_dir.
    throw e instanceof DirHeld ? held(e.pid) : dataDirError(cfg, e);
  }
  let store: Store;
  try {
    store = await openStore(cfg.storage);
  } catch (e) {
    await lock.release();
    // The embedded engine's own lock on its directory (another process that opened it).
    if (!cfg.storage.clickhouse_url && /lock|already running|failed to create connection/i.test((e as Error).message))
      throw held(null);
    // Said as serve says it: naming CLICKHOUSE_URL (never its password) or DATA_DIR.
    throw storageError(cfg, e);
  }
  try {
    // A server that is not ClickHouse, or not there, is said so before anything is asked of it.
    await checkServer(cfg, store);
  } catch (e) {
    await store.close();
    await lock.release();
    throw e;
  }
  const close = store.close.bind(store);
  return Object.assign(store, {
    close: async () => {
      await close();
      await lock.release();
    },
  });
}

async function serve(cfg: Readonly<Config>, file: string | null): Promise<void> {
  const { Gateway } = await import('./app.js');
  // A signal while the start waits on another instance's migrations ends the wait.
  const startAbort = new AbortController();
  const gw = new Gateway(cfg, {
    startSignal: startAbort.signal,
    source: { file, dropIn: process.env.ORIGIN_URL || null },
    testHooks: process.env.WAKEGATE_TEST_HOOKS === '1',
    secretUnseen: stdoutIsDevNull(),
  });
  // A gateway does not end because its stdout has gone (`wakegate serve | head`): it logs
  // on stderr, and writes to stdout only a bootstrap admin key it generated, once it listens.
  process.stdout.off('error', stdoutGone);
  process.stdout.on('error', (e: Error) => gw.log.warn('stdout cannot be written', { err: e }));
  // Signals are heard from the first moment: one that comes while the gateway starts
  // stops it once it has started (a start half done is never left running).
  let signals = 0;
  let started: Promise<unknown> = Promise.resolve();
  const onSignal = (sig: string) => {
    if (++signals > 1) process.exit(1);
    startAbort.abort();
    void started.then(
      () => {
        gw.log.info('stopping', { signal: sig });
        gw.stop().then(
          () => process.exit(0),
          (e: Error) => {
            gw.log.error('stop failed', { err: e });
            process.exit(1);
          },
        );
      },
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  // SIGHUP reloads the TLS certificates (every thread; a file that does not load leaves the old ones serving).
  // nginx and Envoy read their whole config again on it: one line says what this one did, and what it did not.
  process.on(
    'SIGHUP',
    () =>
      void started.then(
        () => {
          gw.log.info(sighupLine(gw.reloadTls()), {
            not_reloaded: 'the config file and environment (routes, limits, storage, keys): restart to apply them',
          });
        },
        () => {},
      ),
  );
  started = gw.start(() => {
    if (!gw.generatedAdminSecret) return;
    // Printed once, on the first start with no keys, once the gateway listens; only its hash is stored.
    // Written at once, so a stdout whose reader has gone (`serve | head -0`) is known here.
    try {
      writeSync(
        1,
        `\nA bootstrap admin key was generated. It is shown only this once; store it now:\n\n  ${gw.generatedAdminSecret}\n\n`,
      );
    } catch (e) {
      gw.log.warn('the generated bootstrap admin key could not be shown: stdout cannot be written', {
        err: (e as NodeJS.ErrnoException).code ?? String(e),
        fix: 'set WAKEGATE_ADMIN_KEY to a svc_live_ secret of your own and restart: it replaces this key',
      });
    }
  });
  await started;
}

/**
 * Stdout is /dev/null (`serve > /dev/null 2>&1 &`, or closed: Node opens /dev/null for a
 * closed one), where a generated bootstrap admin key's secret would be shown once and lost.
 */
function stdoutIsDevNull(): boolean {
  try {
    const out = fstatSync(1);
    return out.isCharacterDevice() && out.rdev === statSync('/dev/null').rdev;
  } catch {
    return false;
  }
}

/** What a SIGHUP did (reloadTls: null with no TLS listener), for its log line. */
const sighupLine = (loaded: boolean | null): string =>
  loaded === null
    ? 'SIGHUP: no TLS certificates to read again'
    : loaded
      ? 'SIGHUP: TLS certificates read again'
      : 'SIGHUP: TLS certificates read again, some not loaded (the old ones serve)';

const unknownEnvironment = (name: string): ApiError =>
  new ApiError(422, {
    error: { type: 'unprocessable', message: `unknown environment ${JSON.stringify(name)}`, param: 'environment' },
  });

/** Recovery: a key written straight into the store, for when no key can reach the API. */
async function keysCreateOffline(cfg: Readonly<Config>, args: Args): Promise<void> {
  // The options of the online keys create, bar --url and --key: --rate-limit names a policy as it does there.
  onlyFlags(args, ['label', 'environment', 'scopes', 'consumer', 'rate-limit', 'replaces', 'offline', 'json'], LOCAL);
  const label = args.flags.get('label');
  const environment = args.flags.get('environment');
  const scopes = args.flags.get('scopes');
  if (!label || !environment || !scopes) throw new UsageError('keys create needs --label, --environment and --scopes');
  operands(args, 2, null);
  // As the API answers it (before the store is opened: nothing is written for a key refused).
  if (!Object.hasOwn(cfg.environments, environment)) throw unknownEnvironment(environment);
  const { KeyRing } = await import('./auth/keyring.js');
  const { KeyService } = await import('./auth/keys-service.js');
  const { systemClock } = await import('./clock.js');
  const { EventBus } = await import('./events/bus.js');
  const { GatewayError } = await import('./errors.js');
  const { createLogger } = await import('./log.js');
  const { EventTable } = await import('./store/events.js');
  const { KeyTable } = await import('./store/keys.js');
  const { migrate } = await import('./store/migrations.js');
  const log = createLogger('warn');
  const store = await openDirect(
    cfg,
    'create the key through its API instead: wakegate keys create --url ... --key-file ...',
  );
  let said: string;
  try {
    await migrate(store);
    const table = new KeyTable(store);
    const ring = new KeyRing(table, log);
    await ring.load();
    const events = new EventBus(new EventTable(store), systemClock, log);
    const svc = new KeyService({ cfg, table, ring, events, clock: systemClock, log });
    const consumer = args.flags.get('consumer');
    const policy = args.flags.get('rate-limit');
    const replaces = args.flags.get('replaces');
    const { key, secret } = await Promise.resolve()
      .then(() =>
        svc.create(
          {
            label,
            environment,
            // As the online command reads it: a trailing or doubled comma names no scope.
            scopes: scopes
              .split(',')
              .map((s) => s.trim())
              .filter((s) => s !== ''),
            ...(consumer ? { consumer } : {}),
            ...(policy ? { rate_limit: svc.ratePolicy(policy) } : {}),
            ...(replaces ? { replaces } : {}),
          },
          environment,
        ),
      )
      .catch((e: unknown) => {
        // What the service refuses (an unknown scope, a bad label) is said as the API says it.
        if (!(e instanceof GatewayError)) throw e;
        throw new ApiError(e.status, { error: { type: e.type, message: e.message, param: e.param } });
      });
    await events.flush();
    const view = svc.view(key, secret);
    said = args.bools.has('json')
      ? `${JSON.stringify(view, null, 2)}\n`
      : `${fields(view as unknown as Record<string, unknown>)}\nThis is the only time the secret is shown. Store it now.\n`;
  } finally {
    await store.close();
  }
  // Once the store is closed: a reader gone ends the process at once (stdoutGone).
  out(said);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const [c0, c1] = args.words;
  if (args.bools.has('version')) return out(`wakegate ${version()}\n`);
  if (args.bools.has('help') || c0 === 'help') return out(`${HELP[(c0 === 'help' ? c1 : c0) ?? ''] ?? HELP['']}\n`);
  if (c0 === undefined || c0 === 'serve') {
    // A local command: --url, --key and the like would name a gateway it does not talk to.
    onlyFlags(args, [], LOCAL);
    operands(args, 1, null);
    return serve(await configFrom(args.flags), configFile(args.flags));
  }
  if (c0 === 'migrate') {
    onlyFlags(args, [], LOCAL);
    operands(args, 1, null);
    const cfg = await configFrom(args.flags);
    const { migrate } = await import('./store/migrations.js');
    const store = await openDirect(cfg, 'the running gateway applied its migrations when it started');
    // Closed whatever migrate does: the process never exits with the engine open.
    const applied = await migrate(store).finally(() => store.close());
    return out(`migrations applied: ${applied.length ? applied.join(', ') : 'none (up to date)'}\n`);
  }
  if (c0 === 'keys' && c1 === 'create' && args.bools.has('offline'))
    return keysCreateOffline(await configFrom(args.flags), args);
  if (c0 === 'keys' || c0 === 'endpoints' || c0 === 'deliveries' || c0 === 'wakes') {
    if (c1 === undefined) return out(`${HELP[c0]}\n`);
    return apiCommand(args, { out, env: process.env });
  }
  if (c0 === 'replay') return apiCommand(args, { out, env: process.env });
  const near = nearest(c0, ['serve', 'migrate', 'keys', 'endpoints', 'deliveries', 'wakes', 'replay', 'help']);
  throw new UsageError(
    `unknown command ${JSON.stringify(c0)}${near ? ` (did you mean ${near}?)` : '; see wakegate --help'}`,
  );
}

main().catch((e: unknown) => {
  if (config && e instanceof config.ConfigError) process.stderr.write(`${e.message}\n`);
  else if (e instanceof UsageError) process.stderr.write(`wakegate: ${e.message}\n`);
  else if (e instanceof ApiError) process.stderr.write(`wakegate: ${e.message}\n`);
  else process.stderr.write(`wakegate: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(e instanceof UsageError ? 2 : 1);
});
