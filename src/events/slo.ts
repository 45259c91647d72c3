import type { RowListener } from '../capture/batcher.js';
import type { Wake } from '../capture/wake.js';
import type { Config } from '../config/index.js';
import type { EventSink } from './bus.js';

/** Fast-burn alerting (Google SRE workbook): 14.4x the budget over a short window. */
export const BURN_THRESHOLD = 14.4;
const WINDOW_MS = 5 * 60_000;
const BUCKET_MS = 60_000;
const MIN_REQUESTS = 100;
export const QUIET_MS = 3_600_000;
/** Latency objectives are read as "99% of requests faster than latency_objective_ms". */
const LATENCY_TARGET = 0.99;

interface Bucket {
  start: number;
  total: number;
  errors: number;
  slow: number;
}

type Route = Config['routes'][number];

/** State per route and environment: sandbox failures never burn production's budget. */
interface RouteState {
  route: Route;
  environment: string;
  buckets: Bucket[];
  lastAlert: { availability: number; latency: number };
  /** The newest wake's time heard since the last check (the check's "now"), or -Infinity. */
  newest: number;
}

/**
 * Raises slo.burn when a route's availability objective (5xx share) or latency
 * objective (share slower than latency_objective_ms, against 99%) burns its
 * error budget at 14.4x or more over the last 5 minutes, with at least 100
 * requests; at most once an hour per route, environment and kind. Time is the wakes' own.
 */
/** An slo.burn stored before a start: its environment, time and data (route, objective.kind). */
export interface RaisedBurn {
  environment: string;
  created_at: number;
  data: Record<string, unknown>;
}

/** A route the SLO rules watch: it has an availability or a latency objective. */
export const hasObjective = (r: Route): boolean => r.availability_objective !== null || r.latency_objective_ms !== null;

/**
 * `once`: a fleet's gate (Redis), so the instance that first sees a burn raises it and
 * the others, seeing the same burn within the quiet hour, do not.
 */
export function sloRules(
  cfg: Pick<Config, 'routes'>,
  events: EventSink,
  once: ((name: string, ttlMs: number) => Promise<boolean>) | null = null,
  raised: readonly RaisedBurn[] = [],
): RowListener<Wake> {
  const routes = new Map(cfg.routes.filter(hasObjective).map((r) => [r.name, r] as const));
  // Burns raised before this start (stored): their quiet hour goes on, as if this process had raised them.
  const before = new Map<string, { availability: number; latency: number }>();
  for (const b of raised) {
    const route = typeof b.data.route === 'string' ? b.data.route : '';
    const kind = (b.data.objective as { kind?: unknown } | undefined)?.kind;
    if (kind !== 'availability' && kind !== 'latency') continue;
    const k = `${route}\n${b.environment}`;
    const last = before.get(k) ?? { availability: -Infinity, latency: -Infinity };
    last[kind] = Math.max(last[kind], b.created_at);
    before.set(k, last);
  }
  // Route, then environment: no key string is made per wake.
  const state = new Map<string, Map<string, RouteState>>();
  /** States heard of since the last check. */
  const touched: RouteState[] = [];
  const check = (st: RouteState) => {
    const r = st.route;
    const name = r.name;
    const env = st.environment;
    const now = st.newest;
    // Minutes stamped ahead of now (a clock since stepped back) are no part of the last five.
    st.buckets = st.buckets.filter((b) => b.start > now - WINDOW_MS && b.start <= now);
    let total = 0;
    let errors = 0;
    let slow = 0;
    for (const b of st.buckets) {
      total += b.total;
      errors += b.errors;
      slow += b.slow;
    }
    if (total < MIN_REQUESTS) return;
    const raise = (kind: 'availability' | 'latency', objective: number, bad: number) => {
      const burn = bad / total / (1 - objective);
      // Quiet for the hour after an alert; one stamped ahead of now (a clock since put right) silences nothing.
      const since = now - st.lastAlert[kind];
      if (burn < BURN_THRESHOLD || (since >= 0 && since < QUIET_MS)) return;
      st.lastAlert[kind] = now;
      const hour = now - (now % QUIET_MS);
      const emit = () =>
        events.emit(
          'slo.burn',
          env,
          {
            route: name,
            objective:
              kind === 'availability'
                ? { kind, target: objective }
                : { kind, target: objective, threshold_ms: r.latency_objective_ms },
            burn_rate: Math.round(burn * 100) / 100,
            window: '5m',
          },
          now,
          // Its id from the route, environment, kind and clock hour: raised again within the
          // hour by a gateway started again (its quiet hour is kept in memory), it is the same
          // event, delivered once.
          `${name}:${env}:${kind}:${hour}`,
          hour,
        );
      if (once === null) emit();
      else void once(`slo:${name}:${env}:${kind}`, QUIET_MS).then((first) => first && emit());
    };
    if (r.availability_objective !== null) raise('availability', r.availability_objective, errors);
    if (r.latency_objective_ms !== null) raise('latency', LATENCY_TARGET, slow);
  };
  return {
    row(w) {
      const r = routes.get(w.route);
      // A request the gateway refused itself (key, scope, limit) says nothing of the origin.
      if (!r || w.refused === true) return;
      let byEnv = state.get(r.name);
      if (!byEnv) {
        byEnv = new Map();
        state.set(r.name, byEnv);
      }
      let st = byEnv.get(w.environment);
      if (!st) {
        st = {
          route: r,
          environment: w.environment,
          buckets: [],
          lastAlert: {
            ...(before.get(`${r.name}\n${w.environment}`) ?? { availability: -Infinity, latency: -Infinity }),
          },
          newest: -Infinity,
        };
        byEnv.set(w.environment, st);
      }
      const start = w.captured_at - (w.captured_at % BUCKET_MS);
      let b = st.buckets[st.buckets.length - 1];
      if (!b || b.start !== start) {
        b = st.buckets.find((x) => x.start === start);
        if (!b) {
          b = { start, total: 0, errors: 0, slow: 0 };
          st.buckets.push(b);
          st.buckets.sort((x, y) => x.start - y.start);
        }
      }
      b.total++;
      if (w.status >= 500) b.errors++;
      // A tunnel (101) is held open for as long as its client likes: never a slow answer.
      if (r.latency_objective_ms !== null && w.latency_ms > r.latency_objective_ms && w.status !== 101) b.slow++;
      if (st.newest === -Infinity) touched.push(st);
      if (w.captured_at > st.newest) st.newest = w.captured_at;
    },
    end() {
      for (const st of touched) {
        check(st);
        st.newest = -Infinity;
      }
      touched.length = 0;
    },
  };
}
