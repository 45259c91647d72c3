import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATEWAY } from '../helpers/child.js';
import { deadPort } from '../helpers/origin.js';

/**
 * Regression test from a review of operations (it failed before the fix): the ops
 * listener listened only once storage was open and migrated, so /healthz refused
 * connections during a slow start and a liveness probe could kill it. docs/operations.md:
 * /healthz is 200 while the process runs; /readyz is 503 while starting.
 */
describe('health and readiness while the gateway starts', () => {
  let dir: string;
  let stall: net.Server;
  const held = new Set<net.Socket>();
  let stallPort: number;
  let child: ChildProcess | null = null;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-review-ready-'));
    // A ClickHouse server that is slow to answer (a server starting, or under load): the
    // gateway's start waits on it (its /ping, then migrations), up to 5 s.
    // Its /ping answers, then every query waits (the client's 10 s request timeout): a window
    // of about 10 s, wide enough for a start that is slow to import on a loaded host.
    stall = net.createServer((socket) => {
      held.add(socket);
      socket.on('close', () => held.delete(socket));
      socket.on('error', () => {});
      socket.once('data', (c: Buffer) => {
        if (c.toString('latin1').startsWith('GET /ping'))
          socket.end('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nOk.');
      });
    });
    await new Promise<void>((r) => stall.listen(0, '127.0.0.1', r));
    stallPort = (stall.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    child?.kill('SIGKILL');
    // The stalled connections are ended here: close waits for every one of them.
    for (const socket of held) socket.destroy();
    // Bounded all the same: a connection the kill left half-open must not hold the file (it did once on CI).
    await Promise.race([
      new Promise<void>((r) => stall.close(() => r())),
      new Promise<void>((r) => setTimeout(r, 2000)),
    ]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('/healthz answers 200 and /readyz 503 while the start waits on storage', async () => {
    const opsPort = await deadPort();
    child = spawn(process.execPath, [...GATEWAY, 'serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        PORT: '0',
        OPS_PORT: String(opsPort),
        HOST: '127.0.0.1',
        DATA_DIR: join(dir, 'data'),
        ORIGIN_URL: 'http://127.0.0.1:9',
        CLICKHOUSE_URL: `http://127.0.0.1:${stallPort}`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let running = true;
    const exited = new Promise<void>((r) =>
      child?.on('exit', () => {
        running = false;
        r();
      }),
    );
    const seen: string[] = [];
    let health: number | null = null;
    let ready: number | null = null;
    const t0 = Date.now();
    while (running && Date.now() - t0 < 12_000) {
      await new Promise((r) => setTimeout(r, 250));
      const probe = async (path: string) => {
        try {
          const r = await fetch(`http://127.0.0.1:${opsPort}${path}`, { signal: AbortSignal.timeout(1000) });
          await r.arrayBuffer();
          return r.status;
        } catch (e) {
          seen.push(`${path}: ${String((e as { cause?: { code?: string } }).cause?.code ?? e)}`);
          return null;
        }
      };
      health ??= await probe('/healthz');
      ready ??= await probe('/readyz');
      if (health !== null && ready !== null) break;
    }
    child.kill('SIGKILL');
    await exited;
    // Before the fix: ECONNREFUSED on both for the whole start.
    expect({ health, ready }, seen.slice(-4).join('\n')).toEqual({ health: 200, ready: 503 });
  }, 30_000);
});
