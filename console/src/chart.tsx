/** A small SVG line chart: one series per route, minutes on x. No library, no network. */
export interface Series {
  name: string;
  points: { t: number; v: number }[];
}

/** The smallest of 1, 2, 5 × 10^n at or above `v`, so the axis ends on a round value above every point. */
export function niceCeil(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/** An axis value in few characters: 12%, 850ms, 1.5 s, 12k. */
export function axisLabel(v: number, unit: string): string {
  if (unit === '%') return `${(v * 100).toFixed(v < 0.1 && v > 0 ? 1 : 0)}%`;
  if (unit.trim() === 'ms' && v >= 1000) return `${Number((v / 1000).toFixed(1))} s`;
  if (v >= 10_000) return `${Number((v / 1000).toFixed(1))}k${unit}`;
  return `${Math.round(v)}${unit}`;
}

const COLORS = ['#2563eb', '#d97706', '#059669', '#7c3aed', '#db2777', '#0891b2'];
const DASH = ['', '6 3', '2 3', '8 3 2 3', '1 2', '10 4'];

/** `from`..`to`: the whole window asked for, so the time axis means the same on every chart. */
export function LineChart({
  series,
  unit,
  label,
  from,
  to,
}: {
  series: Series[];
  unit: string;
  label: string;
  from?: number;
  to?: number;
}) {
  const W = 560;
  const H = 160;
  const all = series.flatMap((s) => s.points);
  if (all.length === 0) return <p class="muted">No traffic in this window.</p>;
  const t0 = from ?? Math.min(...all.map((p) => p.t));
  const t1 = Math.max(to ?? 0, ...all.map((p) => p.t), t0 + 60_000);
  // A round top above every point (a share tops at 100%), and a left margin wide enough for its label.
  const top = Math.max(...all.map((p) => p.v));
  const vmax = unit === '%' ? Math.min(1, niceCeil(top || 0.01)) : niceCeil(Math.max(top, 1));
  const fmt = (v: number) => axisLabel(v, unit);
  const P = { l: Math.max(44, 10 + 7 * Math.max(fmt(vmax).length, fmt(vmax / 2).length)), r: 8, t: 10, b: 22 };
  const x = (t: number) => P.l + ((t - t0) / (t1 - t0)) * (W - P.l - P.r);
  const y = (v: number) => H - P.b - (v / vmax) * (H - P.t - P.b);
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={label}>
        <line x1={P.l} y1={y(0)} x2={W - P.r} y2={y(0)} class="axis" />
        <line x1={P.l} y1={y(vmax)} x2={W - P.r} y2={y(vmax)} class="grid" />
        <line x1={P.l} y1={y(vmax / 2)} x2={W - P.r} y2={y(vmax / 2)} class="grid" />
        <text x={P.l - 4} y={y(vmax) + 4} class="tick" text-anchor="end">
          {fmt(vmax)}
        </text>
        <text x={P.l - 4} y={y(vmax / 2) + 4} class="tick" text-anchor="end">
          {fmt(vmax / 2)}
        </text>
        <text x={P.l - 4} y={y(0)} class="tick" text-anchor="end">
          {fmt(0)}
        </text>
        <text x={P.l} y={H - 4} class="tick">
          {new Date(t0).toISOString().slice(11, 16)}
        </text>
        <text x={W - P.r} y={H - 4} class="tick" text-anchor="end">
          {new Date(t1).toISOString().slice(11, 16)} UTC
        </text>
        {series.map((s, i) => (
          <g key={s.name} stroke={COLORS[i % COLORS.length]} fill={COLORS[i % COLORS.length]}>
            <polyline
              fill="none"
              stroke-width="2"
              stroke-dasharray={DASH[i % DASH.length]}
              points={s.points.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ')}
            />
            {/* A dot per minute, so a single minute of traffic still shows. */}
            {s.points.map((p) => (
              <circle key={p.t} cx={x(p.t).toFixed(1)} cy={y(p.v).toFixed(1)} r="3">
                <title>{`${s.name} ${new Date(p.t).toISOString().slice(11, 16)}: ${unit === '%' ? fmt(p.v) : `${Math.round(p.v)}${unit}`}`}</title>
              </circle>
            ))}
          </g>
        ))}
      </svg>
      <figcaption>
        {series.map((s, i) => (
          <span key={s.name} class="legend">
            <svg width="22" height="8" aria-hidden="true">
              <line
                x1="0"
                y1="4"
                x2="22"
                y2="4"
                stroke={COLORS[i % COLORS.length]}
                stroke-width="2"
                stroke-dasharray={DASH[i % DASH.length]}
              />
            </svg>
            {s.name}
          </span>
        ))}
      </figcaption>
    </figure>
  );
}
