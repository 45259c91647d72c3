import { describe, expect, it } from 'vitest';
import type { Wake } from '../../src/capture/wake.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/index.js';
import { EventBus } from '../../src/events/bus.js';
import { sloRules } from '../../src/events/slo.js';
import { silentLogger } from '../../src/log.js';
import type { EventTable } from '../../src/store/events.js';
import { wakeRow } from '../helpers/wakes.js';

const T0 = Date.UTC(2026, 0, 1);
const wake = (i: number, status: number, latency = 5, t = T0 + i * 100): Wake =>
  wakeRow({ id: `wk_${i}`, status, latency_ms: latency, captured_at: t });

function setup() {
  const raised: { type: string; data: Record<string, unknown> }[] = [];
  const bus = new EventBus({ insert: async () => {} } as unknown as EventTable, new ManualClock(T0), silentLogger);
  const orig = bus.emit.bind(bus);
  bus.emit = (type, env, data, at, key) => {
    raised.push({ type, data });
    return orig(type, env, data, at, key);
  };
  // Default route: availability 0.999 (budget 0.1%), latency objective 800 ms.
  const listener = sloRules(loadConfig(), bus);
  // A batch of wakes, heard one by one and then ended (as the capture batcher tells them).
  const rules = (rows: readonly Wake[]) => {
    for (const w of rows) listener.row(w);
    listener.end();
  };
  return { raised, rules };
}

describe('slo.burn', () => {
  it('fires when 5xx burn the availability budget at 14.4x or more, once an hour', () => {
    const { raised, rules } = setup();
    // 2% errors against a 0.1% budget: burn 20.
    rules(Array.from({ length: 500 }, (_, i) => wake(i, i % 50 === 0 ? 503 : 200)));
    expect(raised).toHaveLength(1);
    expect(raised[0]?.data).toMatchObject({
      route: 'payments',
      objective: { kind: 'availability', target: 0.999 },
      burn_rate: 20,
      window: '5m',
    });
    rules(Array.from({ length: 500 }, (_, i) => wake(500 + i, i % 50 === 0 ? 503 : 200)));
    expect(raised).toHaveLength(1);
  });
  it('stays quiet under the threshold and below 100 requests', () => {
    const { raised, rules } = setup();
    rules(Array.from({ length: 50 }, (_, i) => wake(i, 503)));
    expect(raised).toHaveLength(0);
    // 1% errors: burn 10 < 14.4.
    rules(Array.from({ length: 1000 }, (_, i) => wake(100 + i, i % 100 === 0 ? 503 : 200, 5, T0 + 10 * 60_000 + i)));
    expect(raised).toHaveLength(0);
  });
  it('fires for the latency objective too', () => {
    const { raised, rules } = setup();
    // 20% slower than 800 ms against a 1% budget: burn 20.
    rules(Array.from({ length: 200 }, (_, i) => wake(i, 200, i % 5 === 0 ? 1200 : 10)));
    expect(raised.map((r) => (r.data.objective as { kind: string }).kind)).toEqual(['latency']);
  });
});
