#!/usr/bin/env node
import { Gateway } from './app.js';
import { KeyRing } from './auth/keyring.js';
import { KeyService } from './auth/keys-service.js';
import { systemClock } from './clock.js';
import { type Config, ConfigError, loadConfig } from './config/index.js';
import { EventBus } from './events/bus.js';
import { createLogger } from './log.js';
import { openStore } from './store/client.js';
import { EventTable } from './store/events.js';
import { KeyTable } from './store/keys.js';
import { migrate } from './store/migrations.js';

const USAGE = `usage:
  wakegate [serve] [--config file.yaml]
  wakegate migrate [--config file.yaml]
  wakegate keys create --label L --environment E --scopes a:read,b:write [--consumer C] [--config file.yaml]`;

function parseArgs(argv: string[]): { cmd: string[]; flags: Map<string, string> } {
  const cmd: string[] = [];
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      if (eq > 0) flags.set(a.slice(2, eq), a.slice(eq + 1));
      else {
        const v = argv[i + 1];
        if (v === undefined || v.startsWith('--')) throw new Error(`${a} needs a value`);
        flags.set(a.slice(2), v);
        i++;
      }
    } else cmd.push(a);
  }
  return { cmd, flags };
}

function configFrom(flags: Map<string, string>): Readonly<Config> {
  const file = flags.get('config') ?? process.env.WAKEGATE_CONFIG ?? 'config/default.yaml';
  return loadConfig({ file, env: process.env });
}

async function serve(cfg: Readonly<Config>): Promise<void> {
  const gw = new Gateway(cfg);
  await gw.init();
  if (gw.generatedAdminSecret) {
    // Printed once, on the first start with no keys; only its hash is stored.
    process.stdout.write(
      `\nA bootstrap admin key was generated. It is shown only this once; store it now:\n\n  ${gw.generatedAdminSecret}\n\n`,
    );
  }
  await gw.start();
  let signals = 0;
  const onSignal = (sig: string) => {
    if (++signals > 1) process.exit(1);
    gw.log.info('stopping', { signal: sig });
    gw.stop().then(
      () => process.exit(0),
      (e: Error) => {
        gw.log.error('stop failed', { err: e });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
}

async function keysCreate(cfg: Readonly<Config>, flags: Map<string, string>): Promise<void> {
  const label = flags.get('label');
  const environment = flags.get('environment');
  const scopes = flags.get('scopes');
  if (!label || !environment || !scopes) throw new Error('keys create needs --label, --environment and --scopes');
  const log = createLogger('warn');
  const store = await openStore(cfg.storage);
  try {
    await migrate(store);
    const table = new KeyTable(store);
    const ring = new KeyRing(table, log);
    await ring.load();
    const events = new EventBus(new EventTable(store), systemClock, log);
    const svc = new KeyService(cfg, table, ring, events, systemClock, log);
    const consumer = flags.get('consumer');
    const { key, secret } = await svc.create(
      { label, environment, scopes: scopes.split(',').map((s) => s.trim()), ...(consumer ? { consumer } : {}) },
      environment,
    );
    await events.flush();
    process.stdout.write(`${JSON.stringify({ ...svc.view(key, secret) }, null, 2)}\n`);
  } finally {
    await store.close();
  }
}

async function main(): Promise<void> {
  const { cmd, flags } = parseArgs(process.argv.slice(2));
  const cfg = configFrom(flags);
  const [c0, c1] = cmd;
  if (c0 === undefined || c0 === 'serve') return serve(cfg);
  if (c0 === 'migrate') {
    const store = await openStore(cfg.storage);
    const applied = await migrate(store);
    await store.close();
    process.stdout.write(`migrations applied: ${applied.length ? applied.join(', ') : 'none (up to date)'}\n`);
    return;
  }
  if (c0 === 'keys' && c1 === 'create') return keysCreate(cfg, flags);
  throw new Error(`unknown command ${cmd.join(' ')}\n${USAGE}`);
}

main().catch((e: unknown) => {
  if (e instanceof ConfigError) process.stderr.write(`${e.message}\n`);
  else process.stderr.write(`wakegate: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
