import { appendFileSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Wal } from '../../src/capture/wal.js';
import { silentLogger } from '../../src/log.js';

const OPTS = { syncIntervalMs: 10_000, fsyncIntervalMs: 10_000 };
const files = (dir: string) => readdirSync(dir).filter((f) => f.endsWith('.wal'));

describe('write-ahead log', () => {
  it('writes everything appended in one interval with one write (group commit)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-wal-'));
    const wal = new Wal<{ n: number }>(dir, 1_000_000, { syncIntervalMs: 10, fsyncIntervalMs: 1000 }, silentLogger);
    for (let n = 0; n < 100; n++) wal.append({ n });
    // Nothing written on the append path itself.
    expect(files(dir)).toEqual([]);
    await new Promise((r) => setTimeout(r, 40));
    const [f] = files(dir);
    const lines = readFileSync(join(dir, f as string), 'utf8')
      .trim()
      .split('\n');
    expect(lines.map((l) => JSON.parse(l).n)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    wal.close();
  });

  it('seals a batch as a segment named by its token, and lets it go once acknowledged', () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-wal-'));
    const wal = new Wal<number>(dir, 1_000_000, OPTS, silentLogger);
    for (let n = 0; n < 3; n++) wal.append(n);
    const s = wal.seal();
    expect(s?.raw.join('')).toBe('0\n1\n2\n');
    expect(files(dir)).toEqual([s?.token]);
    expect(wal.seal()).toBeNull();
    wal.acknowledge(s?.token as string);
    expect(files(dir)).toEqual([]);
    expect(wal.size).toBe(0);
    wal.close();
  });

  it('after a crash, finds every segment, skips a torn last record, and keeps the rest', () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-wal-'));
    const a = new Wal<{ id: string }>(dir, 1_000_000, OPTS, silentLogger);
    a.append({ id: 'one' });
    a.append({ id: 'two' });
    const sealed = a.seal();
    a.append({ id: 'three' });
    a.writePending();
    // Killed in the middle of a write: the last line is cut.
    const active = files(dir).find((f) => f !== sealed?.token) as string;
    appendFileSync(join(dir, active), '{"id":"fou');
    const b = new Wal<{ id: string }>(dir, 1_000_000, OPTS, silentLogger);
    expect(b.length).toBe(2);
    const first = b.peek();
    expect(first?.rows).toEqual([{ id: 'one' }, { id: 'two' }]);
    expect(b.fromEarlierRun(first?.token as string)).toBe(true);
    b.shift(first?.token as string);
    const second = b.peek();
    expect(second?.rows).toEqual([{ id: 'three' }]);
    expect(second?.raw.join('')).toBe('{"id":"three"}\n');
    expect(b.torn).toBe(1);
    b.shift(second?.token as string);
    expect(files(dir)).toEqual([]);
    b.close();
  });

  it('refuses rows past its disk budget (the caller counts them), and never silently', () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-wal-'));
    const wal = new Wal<string>(dir, 100, OPTS, silentLogger);
    const taken = Array.from({ length: 20 }, () => wal.append('x'.repeat(10))).filter(Boolean).length;
    expect(taken).toBe(7);
    expect(wal.size).toBeLessThanOrEqual(100);
    wal.close();
  });
});

describe('the wake log line', () => {
  it('is the table row as sent to storage, then the detail as its TabSeparated insert takes it, and reads back whole', async () => {
    const { wakeLogCodec } = await import('../../src/store/wakes.js');
    const codec = wakeLogCodec(() => 7);
    const w = {
      id: 'wk_1',
      method: 'POST',
      path: '/a\tb',
      route: 'r',
      status: 500,
      latency_ms: 3,
      consumer: 'c',
      key_id: 'key_1',
      environment: 'production',
      region: 'local',
      captured_at: 1_795_000_000_123,
      request_bytes: 1,
      response_bytes: 2,
      client_ip: '127.0.0.1',
      user_agent: 'ua',
      refused: true,
      replay_of: 'wk_0',
      detail: {
        query: '?a=\t1',
        request_headers: [['x', 'y\tz']] as [string, string][],
        response_headers: null,
        request_body: { body: 'tab\there', bytes: 8, truncated: false, encoding: 'utf8' as const },
        response_body: null,
        diff: null,
      },
    };
    const line = codec.encode(w);
    // The row, the refused flag, and the detail's 12 TabSeparated cells; raw tabs inside values are escaped.
    expect(line.split('\t')).toHaveLength(14);
    expect(JSON.parse(line.split('\t')[0] as string)).toEqual([
      'wk_1',
      'production',
      1_795_000_000_123,
      'POST',
      '/a\tb',
      'r',
      500,
      3,
      'c',
      'key_1',
      'local',
      1,
      2,
      '127.0.0.1',
      'ua',
      7,
      0,
      'wk_0',
    ]);
    expect(codec.decode(line)).toEqual({ ...w, retention_days: 7, path_truncated: false });
    const plain = codec.encode({ ...w, detail: undefined, refused: false });
    expect(plain.includes('\t')).toBe(false);
  });
});
