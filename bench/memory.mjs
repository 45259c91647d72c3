#!/usr/bin/env node
// bench:memory — RSS of the gateway (everything on) through 60 s of full load at 50
// connections, sampled every second, and 15 s after it.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cannon, freePort, ROOT, startProcess, table } from './lib.mjs';

const SECONDS = Number(process.env.BENCH_MEMORY_SECONDS ?? 60);
const tmp = mkdtempSync(join(tmpdir(), 'wakegate-mem-'));
const procs = [];
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
try {
  const op = await freePort();
  procs.push(
    await startProcess(
      'origin',
      process.execPath,
      [join(ROOT, 'bench/servers/origin.mjs')],
      { PORT: String(op) },
      `http://127.0.0.1:${op}`,
    ),
  );
  const port = await freePort();
  const cfgFile = join(tmp, 'cfg.yaml');
  writeFileSync(
    cfgFile,
    `server: { port: ${port}, host: 127.0.0.1, ops_port: ${await freePort()} }\nlog: { level: warn }\nrate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\nroutes:\n  - { name: bench, prefix: /, auth: required, scopes: { read: bench:read, write: bench:write }, origins: { production: http://127.0.0.1:${op} }, latency_objective_ms: 1000 }\n`,
  );
  const env = { DATA_DIR: join(tmp, 'data') };
  const key = JSON.parse(
    execFileSync(
      process.execPath,
      [
        join(ROOT, 'dist/main.js'),
        'keys',
        'create',
        '--label',
        'm',
        '--environment',
        'production',
        '--scopes',
        'bench:read',
        '--config',
        cfgFile,
      ],
      { env: { ...process.env, ...env } },
    ).toString(),
  );
  const gw = await startProcess(
    'wakegate',
    process.execPath,
    [join(ROOT, 'dist/main.js'), 'serve', '--config', cfgFile],
    env,
    `http://127.0.0.1:${port}/`,
  );
  procs.push(gw);
  const samples = [];
  const start = rssMb(gw.proc.pid);
  const timer = setInterval(() => samples.push(rssMb(gw.proc.pid)), 1000);
  const r = await cannon({
    url: `http://127.0.0.1:${port}/x`,
    connections: 50,
    duration: SECONDS,
    headers: { authorization: `Bearer ${key.secret}` },
  });
  clearInterval(timer);
  await new Promise((res) => setTimeout(res, 15_000));
  const after = rssMb(gw.proc.pid);
  const third = Math.floor(samples.length / 3);
  const avg = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const early = avg(samples.slice(0, third));
  const late = avg(samples.slice(-third));
  const peak = Math.max(...samples);
  console.log(
    `\nbench:memory — ${SECONDS} s at 50 connections, ${Math.round(r.requests.average)} req/s average, ${r.requests.total} requests\n`,
  );
  console.log(
    table(
      ['measure', 'MB', 'budget', 'met'],
      [
        ['RSS before load', start.toFixed(0), '', ''],
        ['RSS peak under load', peak.toFixed(0), '<= 300', peak <= 300 ? 'yes' : 'NO'],
        ['RSS mean, first third of the run', early.toFixed(0), '', ''],
        [
          'RSS mean, last third of the run',
          late.toFixed(0),
          'flat (within 10%)',
          Math.abs(late - early) / early <= 0.1 ? 'yes' : 'NO',
        ],
        ['RSS 15 s after load', after.toFixed(0), '', ''],
      ],
    ),
  );
  console.log(`\nRSS every second (MB): ${samples.map((s) => s.toFixed(0)).join(' ')}`);
} finally {
  for (const p of procs.reverse()) await p.stop();
  rmSync(tmp, { recursive: true, force: true });
}
