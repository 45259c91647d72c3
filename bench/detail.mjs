#!/usr/bin/env node
// bench:detail — what keeping the exchange (wake detail) costs the proxy: the full
// gateway with detail as configured by default (at most capture.detail.max_per_second
// exchanges and max_bytes_per_second bytes of bodies a second per route keep it), with
// detail kept for every exchange (both limits 0), and with detail off, against 1 KB and 32 KB JSON answers, side
// by side in one run (interleaved rounds, medians): req/s at 50 connections, the
// gateway process's CPU per request, the share of wakes that kept detail, and the
// bytes each wake and each detail take on disk.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  cannon,
  cpuSeconds,
  DETAIL_OFF_YAML,
  median,
  ROOT,
  settle,
  startBenchGateway,
  startOrigin,
  table,
} from './lib.mjs';

const DURATION = Number(process.env.BENCH_DURATION ?? 8);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** The gateways compared at each answer size: their name and the config they add. */
const MODES = [
  ['detail on (default limits)', ''],
  ['detail on, every exchange', 'capture: { detail: { max_per_second: 0, max_bytes_per_second: 0 } }\n'],
  ['detail off', DETAIL_OFF_YAML],
];
const tmp = mkdtempSync(join(tmpdir(), 'wakegate-bench-detail-'));
const procs = [];

/** Rows and bytes on disk of the wake tables in a stopped gateway's data directory (a child process: one store each). */
function diskUse(dataDir) {
  const script = `
    const { openStore } = await import(${JSON.stringify(join(ROOT, 'dist/store/client.js'))});
    const { loadConfig } = await import(${JSON.stringify(join(ROOT, 'dist/config/index.js'))});
    const store = await openStore(loadConfig({ env: { DATA_DIR: ${JSON.stringify(dataDir)} } }).storage);
    await store.client.command({ query: 'OPTIMIZE TABLE wakegate.wakes FINAL' });
    await store.client.command({ query: 'OPTIMIZE TABLE wakegate.wake_details FINAL' });
    const rs = await store.client.query({ query: "SELECT table, sum(rows) AS rows, sum(bytes_on_disk) AS bytes FROM system.parts WHERE active AND database = 'wakegate' AND table IN ('wakes', 'wake_details') GROUP BY table", format: 'JSONEachRow' });
    console.log(JSON.stringify(await rs.json()));
    await store.close();`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  return Object.fromEntries(
    JSON.parse(out.trim().split('\n').pop()).map((r) => [r.table, { rows: Number(r.rows), bytes: Number(r.bytes) }]),
  );
}

async function main() {
  const targets = [];
  for (const size of [1000, 32_000]) {
    const origin = await startOrigin(size, `origin ${size}`);
    procs.push(origin);
    for (const [mode, yaml] of MODES) {
      const name = `${size >= 32_000 ? '32 KB' : '1 KB'} JSON, ${mode}`;
      const g = await startBenchGateway(join(tmp, name.replace(/\W+/g, '-')), origin.url, 'required', yaml);
      procs.push(g.gateway);
      targets.push({ name, size, on: yaml !== DETAIL_OFF_YAML, ...g });
    }
  }
  const res = Object.fromEntries(targets.map((t) => [t.name, { rps: [], cpu: [], errors: 0 }]));
  for (const t of targets) await cannon({ url: `${t.url}/warm`, connections: 50, duration: 2, headers: t.headers });
  for (let round = 1; round <= ROUNDS; round++) {
    const order = targets.map((_, i) => targets[(i + round) % targets.length]);
    for (const t of order) {
      // The gateways measured before may still be merging what they stored: wait for quiet.
      await settle(targets.map((x) => x.gateway.proc.pid));
      process.stderr.write(`round ${round}: ${t.name}\n`);
      const c0 = cpuSeconds(t.gateway.proc.pid);
      const r = await cannon({
        url: `${t.url}/bench/items?id=${round}`,
        connections: 50,
        duration: DURATION,
        headers: t.headers,
      });
      const c1 = cpuSeconds(t.gateway.proc.pid);
      res[t.name].rps.push(r.requests.average);
      res[t.name].cpu.push(((c1 - c0) * 1e6) / Math.max(1, r.requests.total));
      res[t.name].errors += r.errors + r.timeouts + r.non2xx;
    }
  }
  for (const t of targets) await t.gateway.stop();
  const rows = [];
  for (const size of [1000, 32_000]) {
    const off = targets.find((t) => t.size === size && !t.on);
    for (const t of targets.filter((x) => x.size === size)) {
      const disk = diskUse(t.dataDir);
      const wakes = disk.wakes ?? { rows: 0, bytes: 0 };
      const det = disk.wake_details ?? { rows: 0, bytes: 0 };
      const rps = median(res[t.name].rps);
      rows.push([
        t.name,
        Math.round(rps).toLocaleString('en'),
        (rps / median(res[off.name].rps)).toFixed(3),
        median(res[t.name].cpu).toFixed(1),
        String(res[t.name].errors),
        wakes.rows ? `${((100 * det.rows) / wakes.rows).toFixed(1)}%` : '-',
        wakes.rows ? (wakes.bytes / wakes.rows).toFixed(1) : '-',
        det.rows ? (det.bytes / det.rows).toFixed(1) : '-',
        det.rows.toLocaleString('en'),
      ]);
    }
  }
  console.log(`\nbench:detail — ${ROUNDS} interleaved rounds of ${DURATION} s at 50 connections, medians\n`);
  console.log(
    table(
      [
        'target',
        'req/s',
        'vs detail off',
        'CPU us/req',
        'errors',
        'wakes with detail',
        'wake bytes on disk',
        'bytes on disk per detail',
        'detail rows',
      ],
      rows,
    ),
  );
}

main()
  .catch((e) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(async () => {
    for (const p of procs) await p.stop('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
  });
