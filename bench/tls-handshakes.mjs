// bench:tls-handshakes — TLS handshakes a second, full and resumed (a session ticket),
// against wakegate (one edge thread, server.tls) and nginx (one worker, the same
// certificate and TLS 1.3), side by side in one run, medians of BENCH_ROUNDS rounds
// (interleaved). Each handshake is a new TCP connection that completes the handshake
// and closes. Full handshakes: CLIENTS `openssl s_time -new` processes at once (a C
// client, so the client is not what limits the rate); resumed ones: this process
// (Node's tls, CONCURRENCY at a time, each resuming the one ticket it got first;
// s_time does not resume TLS 1.3 sessions). Besides the rate, the server's CPU per
// handshake (/proc: the gateway process, all threads; nginx's process tree): on a
// shared machine the capacity a core has, the figure to compare. The server's idle CPU
// (the gateway's storage engine and timers, measured for a second before each run) is
// taken off, so the figure is the handshakes' own.
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { cpuSeconds, freePort, median, ROOT, settle, startProcess, table, treeCpuSeconds } from './lib.mjs';

const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 4);
const run = promisify(execFile);
const tmp = mkdtempSync(join(tmpdir(), 'wakegate-bench-handshakes-'));
const procs = [];

/** A P-256 certificate for 127.0.0.1 (openssl), as a deployment would have. */
function makeCert() {
  const key = join(tmp, 'key.pem');
  const cert = join(tmp, 'cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  return { key, cert };
}

async function startGateway(pem) {
  const dir = join(tmp, 'gw');
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const ops = await freePort();
  const cfg = join(dir, 'cfg.yaml');
  writeFileSync(
    cfg,
    `server: { port: ${port}, host: 127.0.0.1, ops_port: ${ops}, threads: 1, tls: { certificates: [{ cert: ${pem.cert}, key: ${pem.key} }] } }\nlog: { level: warn }\nroutes:\n  - { name: open, prefix: /, auth: none, origins: { production: http://127.0.0.1:9 } }\n`,
  );
  const p = await startProcess(
    'wakegate',
    process.execPath,
    [join(ROOT, 'dist/main.js'), 'serve', '--config', cfg],
    { DATA_DIR: join(dir, 'data') },
    `http://127.0.0.1:${ops}/healthz`,
  );
  return { proc: p, port, cpu: () => cpuSeconds(p.proc.pid) };
}

async function startNginx(pem) {
  const port = await freePort();
  const health = await freePort();
  const dir = join(tmp, 'nginx');
  mkdirSync(dir);
  writeFileSync(
    join(dir, 'nginx.conf'),
    `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fcgi;
  uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  server { listen 127.0.0.1:${health}; return 204; }
  server {
    listen 127.0.0.1:${port} ssl;
    ssl_certificate ${pem.cert}; ssl_certificate_key ${pem.key};
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_tickets on;
    return 204;
  }
}
`,
  );
  const p = await startProcess(
    'nginx',
    '/usr/sbin/nginx',
    ['-p', dir, '-c', join(dir, 'nginx.conf'), '-g', 'daemon off;'],
    {},
    `http://127.0.0.1:${health}/`,
  );
  return { proc: p, port, cpu: () => treeCpuSeconds(p.proc.pid) };
}

/** Node's own tls.Server and nothing else (a reference: what wakegate adds over Node itself). */
async function startBareNode(pem) {
  const port = await freePort();
  const health = await freePort();
  const script = `const tls=require('node:tls'),fs=require('node:fs'),http=require('node:http');
tls.createServer({key:fs.readFileSync(${JSON.stringify(pem.key)}),cert:fs.readFileSync(${JSON.stringify(pem.cert)})},(s)=>{s.on('error',()=>{});s.resume();}).listen(${port},'127.0.0.1');
http.createServer((q,r)=>r.end()).listen(${health},'127.0.0.1');`;
  const p = await startProcess('node tls', process.execPath, ['-e', script], {}, `http://127.0.0.1:${health}/`);
  return { proc: p, port, cpu: () => cpuSeconds(p.proc.pid) };
}

/** One handshake: resolves once it is done and the connection closed; `onSession` gets a ticket. */
function handshake(port, session, onSession) {
  return new Promise((resolve) => {
    const s = tls.connect({
      host: '127.0.0.1',
      port,
      servername: 'localhost',
      rejectUnauthorized: false,
      ...(session ? { session } : {}),
    });
    let reused = false;
    if (onSession) s.once('session', (b) => onSession(b));
    s.once('secureConnect', () => {
      reused = s.isSessionReused();
      // The TLS 1.3 ticket follows the handshake: wait for it when one is wanted.
      if (onSession) setTimeout(() => s.end(), 5);
      else s.end();
    });
    s.on('data', () => {});
    s.on('error', () => {});
    s.once('close', () => resolve(reused));
  });
}

/** Full handshakes for DURATION s by CLIENTS `openssl s_time -new` at once: their rate and the server's CPU per one. */
async function measureFull(target) {
  const idle = await idleRate(target);
  const c0 = target.cpu();
  const t0 = performance.now();
  const outs = await Promise.all(
    Array.from({ length: CLIENTS }, () =>
      run('openssl', ['s_time', '-connect', `127.0.0.1:${target.port}`, '-new', '-time', String(DURATION)]),
    ),
  );
  const seconds = (performance.now() - t0) / 1000;
  const n = outs.reduce((a, o) => a + Number(/(\d+) connections in [\d.]+s/.exec(o.stdout)?.[1] ?? 0), 0);
  return { rate: n / seconds, reused: 0, cpuUs: ((target.cpu() - c0 - idle * seconds) * 1e6) / n };
}

/** CPU seconds a second the target uses doing nothing. */
async function idleRate(target) {
  const c0 = target.cpu();
  await new Promise((r) => setTimeout(r, 1000));
  return target.cpu() - c0;
}

/** Handshakes for DURATION s, CONCURRENCY at a time: their rate, how many resumed, the server's CPU per one. */
async function measure(target, resumed) {
  let session = null;
  if (resumed) await handshake(target.port, null, (b) => (session = b));
  if (resumed && !session) throw new Error(`${target.proc.name}: no session ticket`);
  let n = 0;
  let reusedCount = 0;
  const idle = await idleRate(target);
  const end = performance.now() + DURATION * 1000;
  const c0 = target.cpu();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        if (await handshake(target.port, resumed ? session : null)) reusedCount++;
        n++;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { rate: n / seconds, reused: reusedCount / n, cpuUs: ((target.cpu() - c0 - idle * seconds) * 1e6) / n };
}

try {
  const pem = makeCert();
  const targets = [
    { name: 'wakegate (1 edge thread)', ...(await startGateway(pem)) },
    { name: 'nginx (1 worker)', ...(await startNginx(pem)) },
    { name: 'Node tls.Server alone (reference)', ...(await startBareNode(pem)) },
  ];
  procs.push(...targets.map((t) => t.proc));
  for (const t of targets) await measure(t, true); // warm-up
  const runs = new Map(targets.map((t) => [t.name, { full: [], resumed: [] }]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const t of targets) {
      for (const kind of ['full', 'resumed']) {
        await settle([t.proc.proc.pid]);
        runs.get(t.name)[kind].push(kind === 'full' ? await measureFull(t) : await measure(t, true));
      }
    }
  }
  const med = (xs, f) => median(xs.map(f));
  const rows = [];
  const summary = {};
  for (const t of targets) {
    const x = runs.get(t.name);
    summary[t.name] = {
      full: med(x.full, (m) => m.rate),
      fullCpu: med(x.full, (m) => m.cpuUs),
      resumed: med(x.resumed, (m) => m.rate),
      resumedCpu: med(x.resumed, (m) => m.cpuUs),
      reused: med(x.resumed, (m) => m.reused),
    };
    const s = summary[t.name];
    rows.push([
      t.name,
      s.full.toFixed(0),
      s.fullCpu.toFixed(0),
      s.resumed.toFixed(0),
      s.resumedCpu.toFixed(0),
      `${(s.reused * 100).toFixed(0)}%`,
    ]);
  }
  const [g, n, bare] = targets.map((t) => summary[t.name]);
  console.log(
    `TLS handshakes, ${DURATION} s x ${ROUNDS} rounds (medians), P-256 certificate, TLS 1.3: full by ${CLIENTS} openssl s_time clients, resumed by ${CONCURRENCY} Node connections at a time\n`,
  );
  console.log(table(['server', 'full/s', 'CPU us/full', 'resumed/s', 'CPU us/resumed', 'resumed share'], rows));
  console.log(
    `\nwakegate / nginx: full handshakes ${(g.full / n.full).toFixed(2)}x the rate, ${(n.fullCpu / g.fullCpu).toFixed(2)}x per CPU second; resumed ${(g.resumed / n.resumed).toFixed(2)}x the rate, ${(n.resumedCpu / g.resumedCpu).toFixed(2)}x per CPU second (target: full >= 0.5x); Node's tls.Server alone: ${(n.fullCpu / bare.fullCpu).toFixed(2)}x nginx per CPU second for full handshakes`,
  );
} finally {
  for (const p of procs) await p.stop();
  rmSync(tmp, { recursive: true, force: true });
}
