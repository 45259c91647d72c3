// HTTP/2 at the edge, side by side in one run (issue #37): h2load against
//   1. wakegate, HTTP/2 over TLS, 10 streams a connection
//   2. the same wakegate, HTTP/1.1 over TLS (h2load --h1)
//   3. nginx `http2` over TLS proxying the same origin (1 worker: one core, as the gateway's one edge thread)
// each with the same requests in flight, medians of BENCH_ROUNDS rounds (interleaved);
// req/s and CPU seconds per request of the gateway process (/proc/<pid>/stat, utime +
// stime, all threads; nginx: its process tree), read around each h2load run and divided
// by the requests that run completed (no warm-up inside a measured run: the CPU window
// and the requests counted are the same). The gateway's main thread (the one edge
// thread) is shown apart too: the rest is the embedded store's threads, whose background
// work is spread over fewer requests when fewer are served. BENCH_H2C=1 benches h2c vs
// plain HTTP/1.1 vs nginx h2c instead (no TLS). nginx logs nothing (access_log off)
// where the gateway captures every request.
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  cpuSeconds,
  freePort,
  mainThreadCpuSeconds,
  median,
  ROOT,
  settle,
  startOrigin,
  startProcess,
  table,
  treeCpuSeconds,
} from './lib.mjs';

const run = promisify(execFile);
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** Requests in flight: 8 connections of 10 streams (h2), 80 connections (HTTP/1.1). */
const H2_CONNECTIONS = 8;
const STREAMS = 10;
const TLS = process.env.BENCH_H2C !== '1';
const node = process.execPath;
const tmp = mkdtempSync(join(tmpdir(), 'wakegate-bench-tls-'));
const procs = [];

/** A self-signed P-256 certificate for 127.0.0.1 (openssl). */
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

/** wakegate with everything on (key, scope, rate limit, capture, metrics), one edge thread. */
async function startGateway(originUrl, pem) {
  const dir = join(tmp, 'gw');
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const ops = await freePort();
  const cfgFile = join(dir, 'cfg.yaml');
  const tls = TLS ? `, tls: { certificates: [{ cert: ${pem.cert}, key: ${pem.key} }] }` : ', http2: h2c';
  writeFileSync(
    cfgFile,
    `server: { port: ${port}, host: 127.0.0.1, ops_port: ${ops}, threads: 1${tls} }\nlog: { level: warn }\nrate_limits:\n  default: { limit: 1000000000, burst: 1000000000, window: minute }\nroutes:\n  - { name: bench, prefix: /, auth: required, scopes: { read: bench:read, write: bench:write }, origins: { production: ${originUrl} } }\n`,
  );
  const env = { DATA_DIR: join(dir, 'data') };
  const main = join(ROOT, 'dist/main.js');
  const key = JSON.parse(
    execFileSync(
      node,
      [main, 'keys', 'create', '--offline', '--json', '--label', 'bench', '--environment', 'production'].concat([
        '--scopes',
        'bench:read',
        '--config',
        cfgFile,
      ]),
      { env: { ...process.env, ...env } },
    ).toString(),
  );
  const p = await startProcess(
    'wakegate',
    node,
    [main, 'serve', '--config', cfgFile],
    env,
    `http://127.0.0.1:${ops}/healthz`,
  );
  return { proc: p, url: `${TLS ? 'https' : 'http'}://127.0.0.1:${port}`, auth: `authorization: Bearer ${key.secret}` };
}

/** nginx, one worker, `http2` (over TLS, or h2c) in front of the origin with keep-alive upstream connections. */
async function startNginx(originUrl, pem) {
  const port = await freePort();
  // A plain port beside it only to know when nginx is up (startProcess asks over HTTP).
  const health = await freePort();
  const dir = join(tmp, 'nginx');
  mkdirSync(dir);
  const listen = TLS
    ? `listen 127.0.0.1:${port} ssl http2; ssl_certificate ${pem.cert}; ssl_certificate_key ${pem.key};`
    : `listen 127.0.0.1:${port} http2;`;
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
  upstream origin { server ${new URL(originUrl).host}; keepalive 256; }
  server { listen 127.0.0.1:${health}; return 204; }
  server {
    ${listen}
    keepalive_requests 1000000;
    http2_max_concurrent_streams 128;
    location / { proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection ""; }
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
  return { proc: p, url: `${TLS ? 'https' : 'http'}://127.0.0.1:${port}` };
}

/** One h2load run (no warm-up inside it): its req/s and the requests it saw succeed. */
async function h2load(url, { h1, header, seconds }) {
  const args = h1
    ? ['--h1', '-c', String(H2_CONNECTIONS * STREAMS), '-m', '1']
    : ['-c', String(H2_CONNECTIONS), '-m', String(STREAMS)];
  args.push('-t', '1', '-D', String(seconds));
  if (header) args.push('-H', header);
  // A run that does not end (h2load waiting on a connection whose handshake never came, as
  // seen once on the loaded machine) is stopped: the caller runs it again.
  const timeout = (seconds + 30) * 1000;
  const { stdout } = await run('h2load', [...args, `${url}/bench`], { maxBuffer: 1 << 24, timeout });
  const rps = Number(/finished in [\d.]+s, ([\d.]+) req\/s/.exec(stdout)?.[1]);
  const ok = Number(/(\d+) succeeded/.exec(stdout)?.[1]);
  const status2xx = Number(/status codes: (\d+) 2xx/.exec(stdout)?.[1]);
  const proto = /Application protocol: (\S+)/.exec(stdout)?.[1] ?? '?';
  return { rps, ok, status2xx, proto };
}

async function main() {
  const pem = TLS ? makeCert() : null;
  const origin = await startOrigin();
  procs.push(origin);
  const gw = await startGateway(origin.url, pem);
  procs.push(gw.proc);
  const targets = [
    {
      name: `wakegate h2${TLS ? '' : 'c'} (10 streams/conn)`,
      url: gw.url,
      header: gw.auth,
      h1: false,
      pid: gw.proc.proc.pid,
    },
    {
      name: `wakegate HTTP/1.1${TLS ? ' over TLS' : ''}`,
      url: gw.url,
      header: gw.auth,
      h1: true,
      pid: gw.proc.proc.pid,
    },
  ];
  try {
    execFileSync('/usr/sbin/nginx', ['-v'], { stdio: 'ignore' });
    const ngx = await startNginx(origin.url, pem);
    procs.push(ngx.proc);
    targets.push({
      name: `nginx http2${TLS ? '' : ' (h2c)'} (1 worker)`,
      url: ngx.url,
      header: null,
      h1: false,
      pid: ngx.proc.proc.pid,
      tree: true,
    });
  } catch {
    console.log('nginx not installed at /usr/sbin/nginx: skipped');
  }
  const results = Object.fromEntries(
    targets.map((t) => [t.name, { rps: [], cpu: [], main: [], proto: '', failed: 0 }]),
  );
  const load0 = loadavg();
  for (const t of targets) {
    process.stderr.write(`warm-up ${t.name}\n`);
    await h2load(t.url, { h1: t.h1, header: t.header, seconds: WARMUP }).catch(() => {});
  }
  for (let round = 1; round <= ROUNDS; round++) {
    const order = targets.map((_, i) => targets[(i + round) % targets.length]);
    for (const t of order) {
      process.stderr.write(`round ${round}: ${t.name}\n`);
      const cpu = t.tree ? treeCpuSeconds : cpuSeconds;
      let r = null;
      let c0 = 0;
      let m0 = 0;
      for (let attempt = 1; r === null; attempt++) {
        await settle([gw.proc.proc.pid]);
        // CPU is read around the whole run (connections made, requests, connections closed),
        // and divided by every request the run completed.
        c0 = cpu(t.pid);
        m0 = t.tree ? 0 : mainThreadCpuSeconds(t.pid);
        r = await h2load(t.url, { h1: t.h1, header: t.header, seconds: DURATION }).catch((e) => {
          if (attempt === 2) throw e;
          process.stderr.write(`h2load did not finish (${e.signal ?? e.code}): once more\n`);
          return null;
        });
      }
      const used = cpu(t.pid) - c0;
      const s = results[t.name];
      s.rps.push(r.rps);
      s.cpu.push(used / r.ok);
      if (!t.tree) s.main.push((mainThreadCpuSeconds(t.pid) - m0) / r.ok);
      s.proto = r.proto;
      s.failed += r.status2xx === r.ok ? 0 : 1;
    }
  }
  const row = (name) => {
    const s = results[name];
    const rps = median(s.rps);
    const cpu = median(s.cpu);
    const main = s.main.length > 0 ? median(s.main) : null;
    const runs = s.rps.map((x) => Math.round(x)).join(' / ');
    return { rps, cpu, main, perCpuSecond: 1 / cpu, proto: s.proto, runs, failed: s.failed };
  };
  const rows = targets.map((t) => ({ name: t.name, ...row(t.name) }));
  const la = (l) => l.map((x) => x.toFixed(2)).join(' ');
  console.log(
    `\n${TLS ? 'TLS' : 'h2c (no TLS)'}; h2load ${DURATION} s x ${ROUNDS} rounds; ${H2_CONNECTIONS * STREAMS} requests in flight; 1 KB answers; Node ${process.versions.node}; load average ${la(load0)} at the start, ${la(loadavg())} at the end\n`,
  );
  console.log(
    table(
      [
        'target',
        'ALPN',
        'req/s (median)',
        'runs',
        'CPU us / request',
        'main thread us / request',
        'requests / CPU second',
      ],
      rows.map((r) => [
        r.name,
        r.proto,
        Math.round(r.rps),
        r.runs,
        (r.cpu * 1e6).toFixed(1),
        r.main === null ? '-' : (r.main * 1e6).toFixed(1),
        Math.round(r.perCpuSecond),
      ]),
    ),
  );
  for (const r of rows) if (r.failed > 0) console.log(`${r.name}: ${r.failed} run(s) with answers other than 2xx`);
  const [h2, h1, ngx] = rows;
  console.log(
    `\nwakegate h2 / wakegate HTTP/1.1, per CPU second: ${(h2.perCpuSecond / h1.perCpuSecond).toFixed(2)}x (target >= 1.3x); main thread alone: ${(h1.main / h2.main).toFixed(2)}x`,
  );
  if (ngx) {
    console.log(
      `wakegate h2 / nginx h2, per CPU second: ${(h2.perCpuSecond / ngx.perCpuSecond).toFixed(2)}x (target >= 0.35x)`,
    );
    console.log(`wakegate h2 / nginx h2, req/s: ${(h2.rps / ngx.rps).toFixed(2)}x`);
  }
}

main()
  .catch((e) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(async () => {
    for (const p of procs.reverse()) await p.stop();
    rmSync(tmp, { recursive: true, force: true });
  });
