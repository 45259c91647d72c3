import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Gateway, type GatewayOptions } from '../../src/app.js';
import { loadConfig, mergeConfig } from '../../src/config/index.js';
import { newSecret } from '../../src/ids.js';
import { silentLogger } from '../../src/log.js';
import { seedStore } from './store-template.js';

export interface TestGateway {
  gw: Gateway;
  url: string;
  opsUrl: string;
  /** Where the console and /v2 are served apart from the proxy (the ops listener unless configured). */
  managementUrl: string;
  admin: string;
  dir: string;
  /** Stops the gateway (flushing everything); keeps the data directory. */
  stop: () => Promise<void>;
  /** Stops and removes the data directory. */
  cleanup: () => Promise<void>;
}

/** A whole gateway on loopback ephemeral ports with its own embedded store. */
export async function startGateway(
  values: Record<string, unknown> = {},
  opts: GatewayOptions & { dir?: string; admin?: string; freshStore?: boolean } = {},
): Promise<TestGateway> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'wakegate-it-'));
  // The schema copied in, not migrated at every start (freshStore: migrated as a first start does).
  const storage = values.storage as { clickhouse_url?: unknown } | undefined;
  if (!opts.freshStore && !storage?.clickhouse_url) seedStore(dir);
  const admin = opts.admin ?? `svc_live_${newSecret()}`;
  const cfg = loadConfig({
    values: mergeConfig(
      {
        server: { port: 0, host: '127.0.0.1', ops_port: 0, ops_host: '127.0.0.1', threads: 1 },
        capture: { flush_interval_ms: 50 },
        storage: { key_poll_interval_ms: 200 },
        log: { level: 'silent' },
      },
      values,
    ),
    env: { DATA_DIR: dir, WAKEGATE_ADMIN_KEY: admin },
  });
  const gw = new Gateway(cfg, { log: silentLogger, ...opts });
  const { port, opsPort, managementPort } = await gw.start();
  let stopped = false;
  const stop = async () => {
    if (!stopped) await gw.stop(2000);
    stopped = true;
  };
  return {
    gw,
    url: `http://127.0.0.1:${port}`,
    opsUrl: `http://127.0.0.1:${opsPort}`,
    managementUrl: `http://127.0.0.1:${managementPort}`,
    admin,
    dir,
    stop,
    cleanup: async () => {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` });

/** A /v2 call with a key: its status and its JSON body, read loosely (tests name the fields they check). */
export async function call(base: string, secret: string, method: string, path: string, body?: unknown) {
  const r = await fetch(`${base}${path}`, {
    method,
    headers: { ...bearer(secret), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  // biome-ignore lint/suspicious/noExplicitAny: the tests read API answers loosely
  return { status: r.status, body: (await r.json()) as Record<string, any> };
}

/** Waits until every wake served so far is in storage. */
export async function flushed(gw: Gateway): Promise<void> {
  await new Promise((r) => setTimeout(r, 20));
  await gw.batcher.flush();
}
