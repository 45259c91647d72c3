import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { openLog } from '../../src/capture/pipeline.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/index.js';
import { pendingDelivery } from '../../src/webhooks/delivery.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { LocalQueue } from '../../src/webhooks/local-queue.js';
import type { DeliveryRecord } from '../../src/webhooks/records.js';
import { answer, endpoint, endpointService, MemoryRows } from '../helpers/webhook-fakes.js';

/*
 * After a restart, the outcomes the deliveries' write-ahead log holds from the earlier run
 * (storage down at its stop, or a crash before their insert) are in storage before the
 * unfinished deliveries are read from it: a delivered delivery is not sent again, and a
 * dead-lettered one does not start over (docs/webhooks.md: an attempt is never counted twice).
 * The real LocalQueue, Outcomes and write-ahead log, started as control.ts starts them.
 */
class FlakyRows extends MemoryRows {
  down = false;
  override async put(rows: readonly DeliveryRecord[]): Promise<void> {
    if (this.down) throw new Error('storage down');
    return super.put(rows);
  }
  override async unfinished(): Promise<DeliveryRecord[]> {
    if (this.down) throw new Error('storage down');
    return super.unfinished();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'dispatch-resume-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeEach(() => rmSync(join(dir, 'wal'), { recursive: true, force: true }));

function run(rows: FlakyRows, clock: ManualClock, status: number) {
  const cfg = loadConfig({ values: { storage: { data_dir: dir } }, env: {} });
  const spool = openLog<DeliveryRecord>(cfg, silentLogger, 'deliveries');
  const queue = new LocalQueue({ rows, spool, clock, log: silentLogger });
  const { service } = endpointService(cfg, clock, [endpoint('ep_a')]);
  const attempts: number[] = [];
  const dispatcher = new Dispatcher({
    cfg,
    queue,
    endpoints: service,
    send: async (_d, n) => {
      attempts.push(n);
      return answer(status);
    },
    clock,
    log: silentLogger,
    metrics: createMetrics({ process: false }),
  });
  /** Starts as control.ts does. */
  const start = async () => {
    await dispatcher.resume();
    dispatcher.start();
    await new Promise((r) => setTimeout(r, 300));
  };
  const stop = async () => {
    await dispatcher.stop();
    spool.close();
  };
  return { dispatcher, attempts, start, stop };
}

const newDelivery = (clock: ManualClock, event: string) =>
  pendingDelivery(
    {
      environment: 'production',
      endpoint_id: 'ep_a',
      event_id: event,
      event_type: 'wake.error',
      payload: '{}',
      max_attempts: 8,
    },
    clock.now(),
  );

describe('restart with outcomes still in the write-ahead log', () => {
  it('does not send a delivered delivery again', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 12));
    const rows = new FlakyRows();
    const a = run(rows, clock, 204);
    const d = newDelivery(clock, 'evt_1');
    await a.dispatcher.add([d]);
    rows.down = true; // storage goes away right after the delivery was written
    await a.stop(); // delivered; its outcome is only in the log
    expect(a.attempts).toEqual([1]);
    expect(rows.get(d.id).status).toBe('pending');

    rows.down = false;
    const b = run(rows, clock, 204);
    await b.start();
    await b.stop();
    expect(rows.get(d.id)).toMatchObject({ status: 'delivered', attempt: 1 });
    expect(b.attempts, 'attempts after the restart').toEqual([]);
  });

  it('makes no attempt past the eighth when the outcomes of earlier ones are only in the log', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 12));
    const rows = new FlakyRows();
    const a = run(rows, clock, 500);
    const d = newDelivery(clock, 'evt_2');
    await a.dispatcher.add([d]);
    rows.down = true;
    await a.dispatcher.idle();
    for (let i = 0; i < 7; i++) {
      clock.advance(11 * 3_600_000);
      a.dispatcher.tick();
      await a.dispatcher.idle();
    }
    await a.stop();
    expect(a.attempts).toEqual([1, 2, 3, 4, 5, 6, 7, 8]); // dead-lettered; outcomes only in the log

    rows.down = false;
    const b = run(rows, clock, 500);
    await b.start();
    await b.stop();
    expect(b.attempts, 'attempts after the restart of a dead-lettered delivery').toEqual([]);
    expect(rows.get(d.id)).toMatchObject({ status: 'dead_lettered', attempt: 8 });
  });

  it('resumes a failed delivery at the attempt the log has, not the one storage had', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 12));
    const rows = new FlakyRows();
    const a = run(rows, clock, 500);
    const d = newDelivery(clock, 'evt_3');
    await a.dispatcher.add([d]);
    await a.dispatcher.idle(); // attempt 1 stored
    rows.down = true;
    clock.advance(11 * 3_600_000);
    a.dispatcher.tick();
    await a.dispatcher.idle(); // attempt 2 only in the log
    await a.stop();
    expect(rows.get(d.id).attempt).toBe(1);

    rows.down = false;
    clock.advance(11 * 3_600_000);
    const b = run(rows, clock, 204);
    await b.start();
    await b.stop();
    expect(b.attempts).toEqual([3]);
    expect(rows.get(d.id)).toMatchObject({ status: 'delivered', attempt: 3 });
  });

  it('still starts, and resumes what storage has, when the log cannot be written at the start', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 12));
    const rows = new FlakyRows();
    const a = run(rows, clock, 204);
    const d = newDelivery(clock, 'evt_4');
    await a.dispatcher.add([d]);
    rows.down = true;
    await a.stop();

    // Storage reads but refuses writes: resume() does not wait forever for the log.
    const put = rows.put.bind(rows);
    let refuse = true;
    rows.down = false;
    rows.put = async (r) => {
      if (refuse) throw new Error('storage refuses writes');
      return put(r);
    };
    const b = run(rows, clock, 204);
    const t0 = Date.now();
    await b.dispatcher.resume();
    expect(Date.now() - t0).toBeLessThan(5000);
    refuse = false;
    await b.stop();
  });
});
