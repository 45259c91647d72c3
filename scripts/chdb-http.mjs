#!/usr/bin/env node
// ClickHouse's HTTP interface over embedded chDB, in a process of its own: lets the
// tests and benchmarks run the gateway with CLICKHOUSE_URL (storage over HTTP, in
// another process) on a machine where no ClickHouse server can run. It is not a
// ClickHouse server: it answers what @clickhouse/client sends (GET /ping; POST with
// the query in the body, or in `query` with the data in the body; `param_*`
// bindings; settings as URL parameters; HTTP basic auth) and reports errors the way
// the server does (status 500, `Code: N. DB::Exception: ...`). The engine, SQL and
// data are chDB's, the same as the embedded mode's. One engine session serves every
// request, and a request's settings are SET on it, as chDB's own connection for
// @clickhouse/client does: a setting stays until changed (the gateway gives every
// insert its own deduplication token, so nothing it sends depends on a reset).
//
//   DATA=<dir> PORT=<port, 0 for any> [CH_USER=default CH_PASSWORD=] node scripts/chdb-http.mjs
//
// Prints `listening <port>` once it answers.
import { createServer } from 'node:http';
import { gzipSync } from 'node:zlib';
import { Session } from 'chdb';

const data = process.env.DATA;
if (!data) throw new Error('set DATA to the directory the engine keeps its data in');
const user = process.env.CH_USER ?? 'default';
const password = process.env.CH_PASSWORD ?? '';
const session = new Session(data);

/** URL parameters that are the interface's own, not settings. */
const RESERVED = new Set([
  'query',
  'query_id',
  'database',
  'session_id',
  'role',
  'default_format',
  'user',
  'password',
  'wait_end_of_query',
  'enable_http_compression',
]);

/** Settings the HTTP interface takes that are no engine settings. */
const HTTP_ONLY = /^(http_|send_progress_in_http_headers$|wait_end_of_query$|enable_http_compression$)/;

/** The settings as SET statements before the query, as chDB's own connection for @clickhouse/client does. */
function withSettings(sql, settings) {
  const set = [];
  for (const [k, v] of settings) {
    if (HTTP_ONLY.test(k)) continue;
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k))
      throw new Error(`Code: 115. DB::Exception: Unknown setting ${k}. (UNKNOWN_SETTING)`);
    set.push(`SET ${k} = ${/^-?\d+(\.\d+)?$/.test(v) ? v : `'${v.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`}`);
  }
  return set.length === 0 ? sql : `${set.join('; ')}; ${sql}`;
}

function fail(res, e) {
  const text = String(e?.message ?? e);
  const code = /Code: (\d+)/.exec(text)?.[1] ?? '1000';
  const body = text.startsWith('Code:') ? text : `Code: ${code}. DB::Exception: ${text}`;
  res.writeHead(500, { 'content-type': 'text/plain; charset=UTF-8', 'x-clickhouse-exception-code': code });
  res.end(`${body}\n`);
}

const server = createServer(async (req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  if (url.pathname === '/ping') return res.end('Ok.\n');
  const auth = req.headers.authorization;
  const [u, p] = auth?.startsWith('Basic ')
    ? Buffer.from(auth.slice(6), 'base64').toString().split(':')
    : [
        req.headers['x-clickhouse-user'] ?? url.searchParams.get('user') ?? 'default',
        req.headers['x-clickhouse-key'] ?? url.searchParams.get('password') ?? '',
      ];
  if (u !== user || (p ?? '') !== password) {
    res.writeHead(516, { 'x-clickhouse-exception-code': '516' });
    return res.end(
      `Code: 516. DB::Exception: ${u}: Authentication failed: password is incorrect, or there is no user with such name. (AUTHENTICATION_FAILED)\n`,
    );
  }
  const chunks = [];
  try {
    for await (const c of req) chunks.push(c);
  } catch {
    // The client went away mid-request (a gateway killed mid-insert): nothing to answer.
    res.destroy();
    return;
  }
  const body = Buffer.concat(chunks).toString('utf8');
  const params = {};
  const settings = [];
  for (const [k, v] of url.searchParams) {
    if (k.startsWith('param_')) params[k.slice(6)] = v;
    else if (!RESERVED.has(k)) settings.push([k, v]);
  }
  const q = url.searchParams.get('query');
  const db = url.searchParams.get('database');
  try {
    const sql = withSettings(q === null ? body : body === '' ? q : `${q}\n${body}`, settings);
    if (db) session.query(`USE ${db.replace(/[^A-Za-z0-9_]/g, '')}`);
    const r =
      Object.keys(params).length > 0 ? await session.queryBindAsync(sql, params) : await session.queryAsync(sql);
    let out = Buffer.from(r.bytes());
    const headers = { 'content-type': 'text/plain; charset=UTF-8', 'x-clickhouse-summary': '{}' };
    if (url.searchParams.get('enable_http_compression') === '1' && /gzip/.test(req.headers['accept-encoding'] ?? '')) {
      out = gzipSync(out);
      headers['content-encoding'] = 'gzip';
    }
    res.writeHead(200, headers);
    res.end(out);
  } catch (e) {
    fail(res, e);
  }
});

server.listen(Number(process.env.PORT ?? 8123), '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// Started for a test (EXIT_WITH_PARENT=1): ends when the process that started it does,
// however that one ended (a test process killed by a timeout left these running).
if (process.env.EXIT_WITH_PARENT === '1') {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) process.exit(0);
  }, 500).unref();
}
