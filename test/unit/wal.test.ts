import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { Wal } from '../../src/capture/wal.js';
import { silentLogger } from '../../src/log.js';

const OPTS = { syncIntervalMs: 10_000, fsyncIntervalMs: 10_000 };
const files = (dir: string) => readdirSync(dir).filter((f) => f.endsWith('.wal'));
/** An acknowledged segment is unlinked off the event loop: wait (bounded) until the directory has none. */
async function gone(dir: string): Promise<string[]> {
  for (let i = 0; i < 100 && files(dir).length > 0; i++) await new Promise((r) => setTimeout(r, 10));
  return files(dir);
}

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

  it('holds the rows of a segment the disk will not take in memory, up to maxHeldRows, and writes them once it does', () => {
    const parent = mkdtempSync(join(tmpdir(), 'wg-wal-'));
    const dir = join(parent, 'wakes');
    const wal = new Wal<{ n: number }>(dir, 1_000_000, { ...OPTS, maxHeldRows: 3 }, silentLogger);
    // The log's folder replaced by a file: no write of the log can succeed (as a full disk).
    rmSync(dir, { recursive: true });
    writeFileSync(dir, '');
    for (let n = 0; n < 3; n++) wal.append({ n });
    const a = wal.seal();
    expect(a?.file).toBeNull();
    expect(wal.keep(a?.token as string, a?.rows)).toBe(0);
    expect(wal.heldInMemory).toBe(3);
    // While the disk refuses, the backlog's segment is given from memory, with no file.
    expect(wal.peek()).toMatchObject({ token: a?.token, file: null, rows: [{ n: 0 }, { n: 1 }, { n: 2 }] });
    // Past the bound the rows are let go, and said to be (the caller counts them dropped).
    wal.append({ n: 3 });
    const b = wal.seal();
    expect(wal.keep(b?.token as string, b?.rows)).toBe(1);
    expect(wal.length).toBe(1);
    // The disk takes writes again: the held segment is written whole and read back from its file.
    rmSync(dir);
    mkdirSync(dir);
    const seg = wal.peek();
    expect(seg?.file).toBe(join(dir, a?.token as string));
    expect(readFileSync(seg?.file as string, 'utf8')).toBe('{"n":0}\n{"n":1}\n{"n":2}\n');
    expect(wal.heldInMemory).toBe(0);
    wal.shift(a?.token as string);
    expect(wal.length).toBe(0);
    expect(wal.size).toBe(0);
    wal.close();
  });

  it('holds no more bytes of such rows than maxHeldBytes', () => {
    const parent = mkdtempSync(join(tmpdir(), 'wg-wal-'));
    const dir = join(parent, 'wakes');
    const wal = new Wal<{ s: string }>(dir, 1_000_000, { ...OPTS, maxHeldRows: 100, maxHeldBytes: 3000 }, silentLogger);
    rmSync(dir, { recursive: true });
    writeFileSync(dir, '');
    const big = { s: 'x'.repeat(2000) };
    wal.append(big);
    const a = wal.seal();
    expect(wal.keep(a?.token as string, a?.rows)).toBe(0);
    wal.append(big);
    const b = wal.seal();
    // Two lines of 2 KB are more than 3,000 bytes: the second is let go (counted by the caller).
    expect(wal.keep(b?.token as string, b?.rows)).toBe(1);
    expect(wal.heldInMemory).toBe(1);
    wal.close();
  });

  it("sets aside a segment none of whose whole lines it can read (a later version's), never deleting it", () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-wal-'));
    // A later version's lines (this codec cannot decode them), and a segment torn by a kill in its first line.
    writeFileSync(join(dir, '00000000000001-later-0.wal'), 'v9\tnot\tours\nv9\tnor\tthis\n');
    writeFileSync(join(dir, '00000000000002-torn-0.wal'), '{"n":');
    writeFileSync(join(dir, '00000000000003-ok-0.wal'), '{"n":3}\n');
    const wal = new Wal<{ n: number }>(dir, 1_000_000, OPTS, silentLogger);
    const seg = wal.peek();
    expect(seg?.rows).toEqual([]);
    expect(seg?.token).toBe('00000000000002-torn-0.wal');
    wal.shift(seg?.token as string);
    expect(wal.peek()?.rows).toEqual([{ n: 3 }]);
    expect(readdirSync(dir)).toContain('00000000000001-later-0.wal.unreadable');
    expect(readFileSync(join(dir, '00000000000001-later-0.wal.unreadable'), 'utf8')).toBe(
      'v9\tnot\tours\nv9\tnor\tthis\n',
    );
    wal.close();
  });

  it('makes its folder again when it was removed while running, and loses nothing', () => {
    const parent = mkdtempSync(join(tmpdir(), 'wg-wal-'));
    const dir = join(parent, 'wakes');
    const wal = new Wal<{ n: number }>(dir, 1_000_000, OPTS, silentLogger);
    rmSync(dir, { recursive: true });
    wal.append({ n: 1 });
    wal.writePending();
    const s = wal.seal();
    expect(s?.file).toBe(join(dir, s?.token as string));
    expect(readFileSync(s?.file as string, 'utf8')).toBe('{"n":1}\n');
    wal.close();
  });

  it('forgets what a segment removed from the disk by someone else counted', () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-wal-'));
    const wal = new Wal<{ n: number }>(dir, 1_000_000, OPTS, silentLogger);
    wal.append({ n: 1 });
    const s = wal.seal();
    wal.keep(s?.token as string);
    expect(wal.size).toBeGreaterThan(0);
    rmSync(s?.file as string);
    expect(wal.peek()).toBeNull();
    expect(wal.length).toBe(0);
    expect(wal.size).toBe(0);
    wal.close();
  });

  it('sets a timer only while rows wait to be written: an idle log wakes nobody', () => {
    vi.useFakeTimers();
    try {
      const dir = mkdtempSync(join(tmpdir(), 'wg-wal-'));
      const wal = new Wal<{ n: number }>(dir, 1_000_000, { syncIntervalMs: 10, fsyncIntervalMs: 1000 }, silentLogger);
      // The fsync interval only.
      expect(vi.getTimerCount()).toBe(1);
      vi.advanceTimersByTime(5000);
      expect(files(dir)).toEqual([]);
      wal.append({ n: 1 });
      wal.append({ n: 2 });
      expect(vi.getTimerCount()).toBe(2);
      vi.advanceTimersByTime(9);
      expect(files(dir)).toEqual([]);
      vi.advanceTimersByTime(1);
      const [f] = files(dir);
      expect(readFileSync(join(dir, f as string), 'utf8')).toBe('{"n":1}\n{"n":2}\n');
      expect(vi.getTimerCount()).toBe(1);
      // A row after the write arms it again, and is written within the interval of its own append.
      vi.advanceTimersByTime(3000);
      wal.append({ n: 3 });
      vi.advanceTimersByTime(10);
      expect(readFileSync(join(dir, f as string), 'utf8')).toBe('{"n":1}\n{"n":2}\n{"n":3}\n');
      wal.close();
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('seals a batch as a segment named by its token, and lets it go once acknowledged', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-wal-'));
    const wal = new Wal<number>(dir, 1_000_000, OPTS, silentLogger);
    for (let n = 0; n < 3; n++) wal.append(n);
    const s = wal.seal();
    // The file holds exactly the batch, whole lines only: an insert reads it as it is.
    expect(readFileSync(s?.file as string, 'utf8')).toBe('0\n1\n2\n');
    expect(files(dir)).toEqual([s?.token]);
    expect(wal.seal()).toBeNull();
    wal.acknowledge(s?.token as string);
    expect(await gone(dir)).toEqual([]);
    expect(wal.size).toBe(0);
    wal.close();
  });

  it('after a crash, finds every segment, skips a torn last record, and keeps the rest', async () => {
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
    // The torn line is gone from the file too, so an insert that reads it never meets it.
    expect(readFileSync(second?.file as string, 'utf8')).toBe('{"id":"three"}\n');
    expect(b.torn).toBe(1);
    b.shift(second?.token as string);
    expect(await gone(dir)).toEqual([]);
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
      request_body: { data: Buffer.from('tab\there\\n'), bytes: 8, truncated: false, encoding: 'utf8' as const },
      response_body: null,
      diff: null,
    },
  };

  it('is one TabSeparated row (the table row, refused, has-detail, the detail), and reads back whole', async () => {
    const { wakeLogCodec } = await import('../../src/capture/wake-log.js');
    const codec = wakeLogCodec(() => 7);
    const parts = codec.encode(w);
    // With detail, the line is its parts: text as strings, the bodies as their bytes (never strings, not copied), newline included.
    expect(Array.isArray(parts)).toBe(true);
    const plainBody = { data: Buffer.from('{"plain":"json"}'), bytes: 16, truncated: false, encoding: 'utf8' as const };
    expect(
      (codec.encode({ ...w, detail: { ...w.detail, request_body: plainBody } }) as (string | Buffer)[]).includes(
        plainBody.data,
      ),
    ).toBe(true);
    const line = Buffer.concat((parts as (string | Buffer)[]).map((p) => Buffer.from(p))).toString();
    expect(line.endsWith('\n')).toBe(true);
    // 23 table columns, refused, has_detail, 12 detail cells; raw tabs inside values are escaped.
    const cells = line.slice(0, -1).split('\t');
    expect(cells).toHaveLength(37);
    expect(line.slice(0, -1).includes('\n')).toBe(false);
    expect(cells.slice(0, 25)).toEqual([
      'wk_1',
      'production',
      '2026-11-18 11:06:40.123',
      'POST',
      '/a\\tb',
      'r',
      '500',
      '3',
      'c',
      'key_1',
      'local',
      '1',
      '2',
      '127.0.0.1',
      'ua',
      '7',
      '0',
      'wk_0',
      'http/1.1',
      '',
      '',
      '',
      '',
      '1',
      '1',
    ]);
    expect(codec.decode(line.slice(0, -1))).toEqual({ ...w, retention_days: 7, path_truncated: false });
    const plain = codec.encode({ ...w, detail: undefined, refused: false }) as string;
    expect(plain.split('\t')).toHaveLength(37);
    expect(codec.decode(plain)).toEqual({
      ...w,
      detail: undefined,
      refused: false,
      retention_days: 7,
      path_truncated: false,
    });
  });

  it('writes header pairs exactly as JSON.stringify then TabSeparated escaping would, whatever they hold', async () => {
    const { pairsTsv, tsvEscape } = await import('../../src/capture/wake-log.js');
    const tricky = [
      'plain',
      'quote " inside',
      'back\\slash',
      'tab\tnewline\ncr\rnul\u0000bell\u0007',
      'caf\u00e9 \u2615 \u{1F600}',
      'lone \ud800 surrogate',
      'line\u2028separator',
      '',
    ];
    const pairs = tricky.map((v, i) => [tricky[(i + 1) % tricky.length] as string, v] as [string, string]);
    expect(pairsTsv(pairs)).toBe(tsvEscape(JSON.stringify(pairs)));
    expect(pairsTsv(pairs)).toContain('\\\\t'); // JSON's \t, its backslash escaped for TabSeparated
    expect(pairsTsv([['a', 'b']])).toBe('[["a","b"]]');
    expect(pairsTsv([])).toBe('[]');
    expect(pairsTsv(null)).toBe('');
  });

  it('escapes for TabSeparated exactly the characters it must, in short and long strings', async () => {
    const { tsvEscape } = await import('../../src/capture/wake-log.js');
    for (const pad of ['', 'x'.repeat(70)]) {
      for (const [raw, escaped] of [
        ['a\\b', 'a\\\\b'],
        ['a\tb', 'a\\tb'],
        ['a\nb', 'a\\nb'],
        ['a\rb', 'a\\rb'],
        ['a\u0000b', 'a\\0b'],
        ['a\u000bb\u0001\u000c\u000e"', 'a\u000bb\u0001\u000c\u000e"'],
      ]) {
        expect(tsvEscape(pad + raw)).toBe(pad + escaped);
      }
    }
  });

  it('writes times as the engine reads them, to the millisecond, across seconds and before the epoch', async () => {
    const { wakeLogCodec } = await import('../../src/capture/wake-log.js');
    const codec = wakeLogCodec(() => 7);
    for (const t of [0, 5, 99, 1_795_000_000_000, 1_795_000_000_001, 1_795_000_000_999, 1_795_000_001_010, -1]) {
      const line = codec.encode({ ...w, captured_at: t, detail: undefined }) as string;
      expect(line.split('\t')[2]).toBe(new Date(t).toISOString().slice(0, 23).replace('T', ' '));
      expect(codec.decode(line).captured_at).toBe(t);
    }
  });

  it('still reads the lines of the first log format (segments an earlier version left)', async () => {
    const { wakeLogCodec } = await import('../../src/capture/wake-log.js');
    const codec = wakeLogCodec(() => 7);
    const legacy =
      '["wk_1","production",1795000000123,"POST","/a\\tb","r",500,3,"c","key_1","local",1,2,"127.0.0.1","ua",7,0,"wk_0"]' +
      '\t1\t?a=\\t1\t[["x","y\\\\tz"]]\t\ttab\\there\\\\n\t8\t0\tutf8\t\t0\t-1\t\t';
    expect(codec.isCurrent(legacy)).toBe(false);
    expect(codec.decode(legacy)).toEqual({ ...w, retention_days: 7, path_truncated: false });
    // Such a segment is rewritten in the current form before an insert reads its file.
    const dir = mkdtempSync(join(tmpdir(), 'wg-wal-'));
    writeFileSync(join(dir, '00000000000001-old-0.wal'), `${legacy}\n`);
    const wal = new Wal(dir, 1_000_000, OPTS, silentLogger, codec);
    const seg = wal.peek();
    expect(seg?.rows).toEqual([{ ...w, retention_days: 7, path_truncated: false }]);
    const text = readFileSync(seg?.file as string, 'utf8');
    expect(text.endsWith('\n')).toBe(true);
    expect(text.slice(0, -1).split('\t')).toHaveLength(37);
    expect(codec.decode(text.slice(0, -1))).toEqual({ ...w, retention_days: 7, path_truncated: false });
    wal.close();
  });

  it('keeps the protocol, the client certificate and the trace context, and rewrites a line written before them', async () => {
    const { wakeLogCodec } = await import('../../src/capture/wake-log.js');
    const codec = wakeLogCodec(() => 7);
    const more = {
      ...w,
      detail: undefined,
      retention_days: 7,
      path_truncated: false,
      protocol: 'h2',
      tls_subject: 'CN=client one,O=Acme\tTab',
      tls_fingerprint: 'ab'.repeat(32),
      trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
      span_id: '00f067aa0ba902b7',
    };
    const line = codec.encode(more) as string;
    expect(codec.isCurrent(line)).toBe(true);
    expect(codec.decode(line)).toEqual(more);
    // The ids are written unescaped, so a line whose ids are not of their one form (an edited
    // or damaged log) is read without them, never with a tab or a backslash in an id.
    for (const [t, sp] of [
      ['4BF92F3577B34DA6A3CE929D0E0E4736', '00f067aa0ba902b7'],
      ['4bf92f3577b34da6a3ce929d0e0e473\\t', '00f067aa0ba902b7'],
      ['4bf92f3577b34da6a3ce929d0e0e4736', '00f067aa0ba902b'],
      ['', '00f067aa0ba902b7'],
    ] as const) {
      const bad = codec.decode(line.replace(`${more.trace_id}\t${more.span_id}`, `${t}\t${sp}`));
      expect(bad.trace_id).toBeUndefined();
      expect(bad.span_id).toBeUndefined();
      expect(bad.tls_fingerprint).toBe(more.tls_fingerprint);
    }
    // The same wake as the version before these fields wrote it: 32 fields, read without them.
    const cells = line.split('\t');
    const before = [...cells.slice(0, 18), ...cells.slice(23)].join('\t');
    expect(before.split('\t')).toHaveLength(32);
    expect(codec.isCurrent(before)).toBe(false);
    const { protocol, tls_subject, tls_fingerprint, trace_id, span_id, ...older } = more;
    expect(codec.decode(before)).toEqual(older);
    // Such a segment is rewritten in today's form before an insert reads its file.
    const dir = mkdtempSync(join(tmpdir(), 'wg-wal-'));
    writeFileSync(join(dir, '00000000000001-old-0.l.wal'), `${before}\n`);
    const wal = new Wal(dir, 1_000_000, OPTS, silentLogger, codec);
    const seg = wal.peek();
    expect(seg?.rows).toEqual([older]);
    const text = readFileSync(seg?.file as string, 'utf8');
    expect(text.slice(0, -1).split('\t')).toHaveLength(37);
    expect(codec.isCurrent(text.slice(0, -1))).toBe(true);
    wal.close();
  });
});

describe('write-ahead log: a segment that cannot be read', () => {
  it('is set aside (renamed, never deleted), and the backlog behind it is read', () => {
    const dir = mkdtempSync(join(tmpdir(), 'wg-wal-'));
    writeFileSync(join(dir, '00000000000001-a-0.wal'), '{"n":1}\n');
    writeFileSync(join(dir, '00000000000002-a-1.wal'), '{"n":2}\n');
    const errors: string[] = [];
    const log = { ...silentLogger, error: (msg: string) => errors.push(msg) };
    const wal = new Wal<{ n: number }>(dir, 1_000_000, OPTS, log);
    expect(wal.length).toBe(2);
    // The first turns unreadable after the log found it (EIO, EACCES: a directory here, as root reads any file).
    rmSync(join(dir, '00000000000001-a-0.wal'));
    mkdirSync(join(dir, '00000000000001-a-0.wal'));
    const seg = wal.peek();
    expect(seg?.rows).toEqual([{ n: 2 }]);
    expect(wal.length).toBe(1);
    expect(statSync(join(dir, '00000000000001-a-0.wal.unreadable')).isDirectory()).toBe(true);
    expect(errors).toEqual([expect.stringContaining('set aside')]);
    // Its bytes no longer count against the budget.
    expect(wal.size).toBe('{"n":2}\n'.length);
    wal.close();
  });
});
