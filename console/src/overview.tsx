import { useEffect, useState } from 'preact/hooks';
import { api, type List, type Wake } from './api';
import { LineChart, type Series } from './chart';
import { ErrorNote, Panel, RouteName, routeLabel, Status, when } from './ui';

interface Point {
  minute: string;
  requests: number;
  errors: number;
  error_rate: number;
  p95_ms: number;
}
interface Stats {
  since: string;
  until: string;
  routes: { route: string; points: Point[] }[];
}

export function Overview({ env }: { env: string }) {
  const [stats, setStats] = useState<Stats | null>(null);
  const [fails, setFails] = useState<Wake[] | null>(null);
  const [err, setErr] = useState<unknown>(null);
  const [failErr, setFailErr] = useState<unknown>(null);
  useEffect(() => {
    let live = true;
    const load = () => {
      api<Stats>('GET', '/v2/stats', { query: { management: 'exclude' } }).then(
        (s) => {
          if (!live) return;
          setStats(s);
          setErr(null);
        },
        (e) => live && setErr(e),
      );
      api<List<Wake>>('GET', '/v2/wakes', { query: { status_class: '5xx', limit: 10, management: 'exclude' } }).then(
        (l) => live && setFails(l.data),
        (e) => live && setFailErr(e),
      );
    };
    load();
    const t = setInterval(load, 15_000);
    return () => {
      live = false;
      clearInterval(t);
    };
  }, [env]);
  const series = (f: (p: Point) => number): Series[] =>
    (stats?.routes ?? []).map((r) => ({
      name: routeLabel(r.route),
      points: r.points.map((p) => ({ t: Date.parse(p.minute), v: f(p) })),
    }));
  const total = (stats?.routes ?? []).reduce((a, r) => a + r.points.reduce((b, p) => b + p.requests, 0), 0);
  const errors = (stats?.routes ?? []).reduce((a, r) => a + r.points.reduce((b, p) => b + p.errors, 0), 0);
  return (
    <div>
      <h1>Overview</h1>
      <ErrorNote error={err} />
      {stats ? (
        <>
          <div class="cards">
            <div class="card">
              <div class="big">{total.toLocaleString('en')}</div>
              <div class="muted">requests, last hour</div>
            </div>
            <div class="card">
              <div class="big">{total ? ((errors / total) * 100).toFixed(2) : '0.00'}%</div>
              <div class="muted">5xx, last hour</div>
            </div>
            <div class="card">
              <div class="big">{stats.routes.length}</div>
              <div class="muted">routes with traffic</div>
            </div>
          </div>
          <div class="grid2">
            <Panel title="Requests per minute">
              <LineChart
                series={series((p) => p.requests)}
                unit=""
                label="requests per minute by route"
                from={Date.parse(stats.since)}
                to={Date.parse(stats.until)}
              />
            </Panel>
            <Panel title="Error rate (5xx)">
              <LineChart
                series={series((p) => p.error_rate)}
                unit="%"
                label="5xx share per minute by route"
                from={Date.parse(stats.since)}
                to={Date.parse(stats.until)}
              />
            </Panel>
            <Panel title="Latency p95">
              <LineChart
                series={series((p) => p.p95_ms)}
                unit=" ms"
                label="p95 latency per minute by route"
                from={Date.parse(stats.since)}
                to={Date.parse(stats.until)}
              />
            </Panel>
          </div>
        </>
      ) : null}
      <Panel title="Newest failures">
        <ErrorNote error={failErr} />
        {fails && fails.length === 0 ? <p class="muted">No 5xx wakes. </p> : null}
        {fails && fails.length > 0 ? (
          <table>
            <thead>
              <tr>
                <th>Time</th>
                <th>Status</th>
                <th>Request</th>
                <th>Route</th>
              </tr>
            </thead>
            <tbody>
              {fails.map((w) => (
                <tr key={w.id}>
                  <td>{when(w.captured_at)}</td>
                  <td>
                    <Status code={w.status} />
                  </td>
                  <td>
                    <a href={`#/wakes/${w.id}`}>
                      {w.method} {w.path}
                    </a>
                  </td>
                  <td>
                    <RouteName route={w.route} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : null}
      </Panel>
    </div>
  );
}
