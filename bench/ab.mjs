#!/usr/bin/env node
// bench:ab — the full gateway of this checkout against the full gateway of another
// checkout (AB_OTHER=/path/to/a/built/checkout), side by side in one run: interleaved
// rounds at 50 connections, req/s and the gateway process's CPU per request. For
// "this change costs at most X%" claims, measured in one run on the same machine.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cannon, cpuSeconds, freePort, median, ROOT, startOrigin, startProcess, table } from './lib.mjs';

const OTHER = process.env.AB_OTHER;
if (!OTHER) throw new Error('set AB_OTHER to another built checkout of wakegate');
const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
// BENCH_BODY_BYTES > 0: POSTs of a JSON body of that size instead of GETs.
const BODY_BYTES = Number(process.env.BENCH_BODY_BYTES ?? 0);
// BENCH_DETAIL=off: neither gateway keeps wake detail (to tell its cost from the rest).
const DETAIL_OFF = process.env.BENCH_DETAIL === 'off' ? 'capture: { detail: { headers: false, bodies: false } }\n' : '';
const BODY = BODY_BYTES > 0 ? JSON.stringify({ data: 'x'.repeat(Math.max(0, BODY_BYTES - 11)) }) : undefined;
const tmp = mkdtempSync(join(tmpdir(), 'wakegate-ab-'));
const procs = [];

async function gateway(name, root, origin) {
  const dir = join(tmp, name);
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const cfg = join(dir, 'cfg.yaml');
  writeFileSync(
    cfg,
    `server: { port: ${port}, host: 127.0.0.1, ops_port: ${await freePort()} }\nlog: { level: warn }\n${DETAIL_OFF}rate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\nroutes:\n  - { name: bench, prefix: /, scopes: { read: bench:read, write: bench:write }, origins: { production: ${origin} } }\n`,
  );
  const env = { ...process.env, DATA_DIR: join(dir, 'data') };
  const args = [
    join(root, 'dist/main.js'),
    'keys',
    'create',
    '--label',
    'b',
    '--environment',
    'production',
    '--scopes',
    'bench:read,bench:write',
    '--config',
    cfg,
  ];
  let out;
  try {
    out = execFileSync(process.execPath, [...args.slice(0, 3), '--offline', '--json', ...args.slice(3)], {
      env,
    }).toString();
  } catch {
    out = execFileSync(process.execPath, args, { env }).toString(); // versions before --offline
  }
  const key = JSON.parse(out.slice(out.indexOf('{'))).secret;
  const g = await startProcess(
    name,
    process.execPath,
    [join(root, 'dist/main.js'), 'serve', '--config', cfg],
    { DATA_DIR: join(dir, 'data') },
    `http://127.0.0.1:${port}/`,
  );
  procs.push(g);
  return { name, url: `http://127.0.0.1:${port}`, headers: { authorization: `Bearer ${key}` }, pid: g.proc.pid };
}

try {
  const origin = await startOrigin();
  procs.push(origin);
  const names = ['this checkout', `other (${OTHER})`];
  const roots = { [names[0]]: ROOT, [names[1]]: OTHER };
  const res = Object.fromEntries(names.map((n) => [n, { rps: [], cpu: [], errors: 0 }]));
  // The gateway started first was measured slower (or faster) by up to 8% in either
  // role on this machine: half the rounds run with each started first.
  const halves = [names, [...names].reverse()];
  let round = 0;
  for (const [h, order] of halves.entries()) {
    const targets = [];
    for (const n of order) targets.push(await gateway(`${n.replace(/\W+/g, '-')}-${h}`, roots[n], origin.url));
    for (const t of targets) await cannon({ url: `${t.url}/warm`, connections: 50, duration: 2, headers: t.headers });
    const rounds = h === 0 ? Math.ceil(ROUNDS / 2) : Math.floor(ROUNDS / 2);
    for (let i = 0; i < rounds; i++, round++) {
      for (const k of round % 2 ? [0, 1] : [1, 0]) {
        const t = targets[k];
        const n = order[k];
        const c0 = cpuSeconds(t.pid);
        const r = await cannon({
          url: `${t.url}/bench/items`,
          connections: 50,
          duration: DURATION,
          ...(BODY
            ? { method: 'POST', body: BODY, headers: { ...t.headers, 'content-type': 'application/json' } }
            : { headers: t.headers }),
        });
        res[n].rps.push(r.requests.average);
        res[n].cpu.push(((cpuSeconds(t.pid) - c0) * 1e6) / Math.max(1, r.requests.total));
        res[n].errors += r.errors + r.timeouts + r.non2xx;
      }
    }
    for (const p of procs.splice(1).reverse()) await p.stop('SIGTERM');
  }
  const targets = names.map((name) => ({ name }));
  const base = median(res[targets[1].name].rps);
  console.log(
    `\nbench:ab — ${ROUNDS} interleaved rounds of ${DURATION} s at 50 connections, ${BODY ? `POSTs of ${BODY.length} bytes` : 'GETs'}, each gateway started first for half of them, medians\n`,
  );
  console.log(
    table(
      ['gateway', 'req/s', 'rounds', 'vs other', 'CPU us/req', 'errors'],
      targets.map((t) => [
        t.name,
        Math.round(median(res[t.name].rps)).toLocaleString('en-US'),
        res[t.name].rps.map((x) => Math.round(x)).join(' / '),
        (median(res[t.name].rps) / base).toFixed(3),
        median(res[t.name].cpu).toFixed(1),
        String(res[t.name].errors),
      ]),
    ),
  );
  // Each round measures both gateways one right after the other: the ratio within a round
  // cancels a host that slows down for a while (this shared machine does, by up to 1.5x
  // between rounds a minute apart), which the medians of each column do not.
  const ratios = (k) => res[names[0]][k].map((v, i) => v / res[names[1]][k][i]);
  const spread = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    const q = (f) => s[Math.round((s.length - 1) * f)].toFixed(3);
    return `${median(s).toFixed(3)} (quartiles ${q(0.25)} to ${q(0.75)})`;
  };
  console.log(
    `\nRound by round, this / other, the median of the ${ROUNDS} rounds' ratios: throughput ${spread(ratios('rps'))}, CPU per request ${spread(ratios('cpu'))}\n`,
  );
} finally {
  for (const p of procs.reverse()) await p.stop('SIGTERM');
  rmSync(tmp, { recursive: true, force: true });
}
