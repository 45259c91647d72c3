import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, startGateway, type TestGateway } from '../helpers/gateway.js';
import { echoOrigin, type TestServer } from '../helpers/origin.js';

const ROOT = join(import.meta.dirname, '..', '..');

describe('metrics, alerts and the dashboard', () => {
  let origin: TestServer;
  let t: TestGateway;
  let text: string;
  let families: Set<string>;

  beforeAll(async () => {
    origin = await echoOrigin();
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    await fetch(`${t.url}/open/x`);
    await fetch(`${t.url}/v2/wakes`, { headers: bearer(t.admin) });
    text = await (await fetch(`${t.opsUrl}/metrics`)).text();
    families = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1] as string));
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  it('passes promtool check metrics', () => {
    const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(r.error, 'promtool is installed by scripts/ensure-tools.sh (npm test runs it)').toBeUndefined();
    expect(`${r.stdout}${r.stderr}`).toBe('');
    expect(r.status).toBe(0);
  });

  it('the alert rules pass promtool check rules and name only metrics the gateway exports', () => {
    const file = join(ROOT, 'deploy', 'prometheus', 'alerts.yaml');
    expect(execFileSync('promtool', ['check', 'rules', file], { encoding: 'utf8' })).toMatch(
      /SUCCESS: \d+ rules found/,
    );
    const names = new Set(
      [...readFileSync(file, 'utf8').matchAll(/\b(wakegate_[a-z0-9_]+)/g)].map((m) => m[1] as string),
    );
    expect(names.size).toBeGreaterThan(4);
    for (const n of names) expect(families.has(n), `alerts.yaml names ${n}`).toBe(true);
  });

  it('alert texts and timing hold under promtool test rules (deploy/prometheus/alerts.test.yaml)', () => {
    const r = spawnSync('promtool', ['test', 'rules', join(ROOT, 'deploy', 'prometheus', 'alerts.test.yaml')], {
      encoding: 'utf8',
    });
    expect(`${r.stdout}${r.stderr}`).toContain('SUCCESS');
    expect(r.status).toBe(0);
  });

  it('exposes every known outcome, drop reason and policy at 0 from the start, so increase() sees the first', () => {
    for (const series of [
      'wakegate_webhook_deliveries_total{outcome="dead_lettered"} 0',
      'wakegate_webhook_deliveries_total{outcome="delivered"} 0',
      'wakegate_wakes_dropped_total{reason="wal_full"} 0',
      'wakegate_events_dropped_total{reason="buffer_full"} 0',
      'wakegate_rate_limited_total{policy="default"}',
      'wakegate_rate_limited_total{policy="unauthenticated"}',
      // Issue #36: every drop reason and every policy label, a key's own limit included.
      'wakegate_wakes_dropped_total{reason="buffer_full"} 0',
      'wakegate_wakes_dropped_total{reason="storage_failed"} 0',
      'wakegate_rate_limited_total{policy="key"} 0',
      'wakegate_rate_limited_total{policy="reports"} 0',
      'wakegate_rate_limited_total{policy="sandbox"} 0',
    ])
      expect(text).toContain(series);
  });

  it('the Grafana dashboard is valid JSON whose queries name only exported metrics', () => {
    const dash = JSON.parse(readFileSync(join(ROOT, 'deploy', 'grafana', 'wakegate.json'), 'utf8'));
    const exprs: string[] = dash.panels.flatMap((p: { targets: { expr: string }[] }) => p.targets.map((x) => x.expr));
    expect(dash.panels.length).toBeGreaterThanOrEqual(8);
    for (const e of exprs) {
      for (const m of e.matchAll(/\b(wakegate_[a-z0-9_]+)/g)) {
        const n = (m[1] as string).replace(/_(bucket|sum|count)$/, '');
        expect(families.has(n), `dashboard names ${m[1]}`).toBe(true);
      }
    }
  });

  it('the metrics table of docs/operations.md lists every metric of the gateway', () => {
    const readme = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
    const own = [...families].filter((f) => !f.startsWith('wakegate_process_') && !f.startsWith('wakegate_nodejs_'));
    expect(own.length).toBeGreaterThan(15);
    for (const f of own) expect(readme, f).toContain(`\`${f}\``);
  });
});

describe('the access log', () => {
  it('writes one JSON line per request with log.access: true, and none by default', async () => {
    const { accessLog } = await import('../../src/capture/access-log.js');
    const lines: string[] = [];
    const log = accessLog((s) => lines.push(...s.split('\n').filter(Boolean)));
    const w = {
      id: 'wk_1',
      method: 'GET',
      path: '/a',
      route: 'r',
      status: 200,
      latency_ms: 3,
      consumer: 'c',
      key_id: '',
      environment: 'production',
      region: 'local',
      captured_at: Date.UTC(2026, 0, 1),
      request_bytes: 0,
      response_bytes: 2,
      client_ip: '127.0.0.1',
      user_agent: 'x',
    };
    log(w);
    log({ ...w, id: 'wk_2' });
    expect(lines).toHaveLength(0);
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => JSON.parse(l))).toMatchObject([
      { msg: 'access', wake_id: 'wk_1', status: 200, path: '/a', key_id: null },
      { wake_id: 'wk_2' },
    ]);
  });
});
