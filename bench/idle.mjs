#!/usr/bin/env node
// bench:idle — where an idle gateway's CPU and memory go: bench:memory's gateway
// (everything on, embedded store) started, left SETTLE_SECONDS (10) to settle, then
// each thread's CPU over IDLE_SECONDS (30) from /proc/<pid>/task/*/stat, grouped by
// thread name (`node` besides the main thread: V8's GC helpers and libuv's pool, where
// the engine's queries run; the engine's own threads have names of their own), and
// the RSS split into the V8 heap (the process metrics), anonymous memory and mapped
// files (the engine's library is most of them).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuSeconds, rssMb, startFullStack, table, threadTicks } from './lib.mjs';

const IDLE_SECONDS = Number(process.env.IDLE_SECONDS ?? 30);
const SETTLE_SECONDS = Number(process.env.SETTLE_SECONDS ?? 10);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** CPU ticks (user + system) of each thread, by thread id, with its name. */
const threads = (pid) => new Map(threadTicks(pid).map((t) => [t.tid, { name: t.name, ticks: t.user + t.sys }]));

async function metric(url, name) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

const tmp = mkdtempSync(join(tmpdir(), 'wakegate-idle-'));
const procs = [];
try {
  const stack = await startFullStack(tmp);
  procs.push(stack.origin, stack.gateway);
  const pid = stack.gateway.proc.pid;
  await sleep(SETTLE_SECONDS * 1000);
  const t0 = threads(pid);
  const c0 = cpuSeconds(pid);
  await sleep(IDLE_SECONDS * 1000);
  const c1 = cpuSeconds(pid);
  const t1 = threads(pid);
  const byName = new Map();
  for (const [tid, t] of t1) {
    const ticks = t.ticks;
    // The main thread is the event loop: named apart from the other threads called node.
    const name = tid === String(pid) ? `${t.name} (main thread)` : t.name;
    const before = t0.get(tid)?.ticks ?? 0;
    const g = byName.get(name) ?? { n: 0, ticks: 0 };
    g.n++;
    g.ticks += ticks - before;
    byName.set(name, g);
  }
  const rows = [...byName]
    .sort((a, b) => b[1].ticks - a[1].ticks || a[0].localeCompare(b[0]))
    .map(([name, g]) => [name, g.n, ((g.ticks / 100 / IDLE_SECONDS) * 100).toFixed(2)]);
  const rss = rssMb(pid);
  const heap = (await metric(stack.opsUrl, 'wakegate_nodejs_heap_size_total_bytes')) / 2 ** 20;
  const ext = (await metric(stack.opsUrl, 'wakegate_nodejs_external_memory_bytes')) / 2 ** 20;
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? Number.NaN) / 1024;
  // Resident pages of each mapped file (the engine's library is most of it).
  const files = new Map();
  let file = null;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) file = head[1].startsWith('/') ? head[1].slice(head[1].lastIndexOf('/') + 1) : null;
    else if (file && line.startsWith('Rss:'))
      files.set(file, (files.get(file) ?? 0) + Number(line.split(/\s+/)[1]) / 1024);
  }
  const topFiles = [...files].sort((a, b) => b[1] - a[1]).slice(0, 3);
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  console.log(
    `\nbench:idle — ${IDLE_SECONDS} s idle from ${SETTLE_SECONDS} s after the start (load average ${load})\n`,
  );
  console.log(
    `CPU: ${(((c1 - c0) / IDLE_SECONDS) * 100).toFixed(2)}% of a core; ${t1.size} threads. RSS ${rss.toFixed(0)} MB: V8 heap ${heap.toFixed(0)} MB, external ${ext.toFixed(0)} MB, the rest (native: the engine, code, stacks) ${(rss - heap - ext).toFixed(0)} MB\n`,
  );
  console.log(
    `RSS by kind: anonymous ${kb('RssAnon').toFixed(0)} MB, files ${kb('RssFile').toFixed(0)} MB (${topFiles.map(([f, mb]) => `${f} ${mb.toFixed(0)}`).join(', ')}), shared memory ${kb('RssShmem').toFixed(0)} MB\n`,
  );
  console.log(table(['thread', 'count', '% of a core'], rows));
} finally {
  for (const p of procs.reverse()) await p.stop();
  rmSync(tmp, { recursive: true, force: true });
}
