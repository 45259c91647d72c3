import { createHash } from 'node:crypto';
import { brotliCompressSync, brotliDecompressSync, deflateSync, gzipSync, inflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { budgetFor, omittedInfo } from '../../src/capture/budget.js';
import { BodyTap, buildDetail, DetailBudget, DetailRate, detailSettings, newTap } from '../../src/capture/detail.js';
import { Redactor } from '../../src/capture/redact.js';
import { diffAnswers } from '../../src/replay/diff.js';

/** Bodies the redactor cannot read kept as sent (opaque_bodies: keep). */
const KEEP = { budget: budgetFor(32_768), keepOpaque: true };
const r = new Redactor(Buffer.alloc(32, 1), ['authorization', 'cookie'], ['password', 'card_number', 'token']);
const M = /^\[redacted:[0-9a-f]{12}\]$/;

describe('redaction', () => {
  it('replaces named headers, JSON fields at any depth, form fields, query parameters and any gateway key', () => {
    const h = r.headers([
      'Authorization',
      'Bearer x',
      'X-Other',
      'svc_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
      'Accept',
      '*/*',
    ]);
    expect(h[0]?.[1]).toMatch(M);
    expect(h[1]?.[1]).toMatch(M);
    expect(h[2]).toEqual(['Accept', '*/*']);
    expect(r.query('?a=1&password=p&token=t')).toMatch(
      /^\?a=1&password=%5Bredacted%3A[0-9a-f]{12}%5D&token=%5Bredacted/,
    );
    const j = JSON.parse(
      r
        .body(Buffer.from('{"a":{"b":[{"password":"x","card_number":4111}]},"ok":1}'), 57, 'application/json')
        .data.toString(),
    );
    expect(j.a.b[0].password).toMatch(M);
    expect(j.a.b[0].card_number).toMatch(M);
    expect(j.ok).toBe(1);
    expect(r.body(Buffer.from('user=a&password=b'), 17, 'application/x-www-form-urlencoded').data.toString()).toMatch(
      /^user=a&password=%5Bredacted/,
    );
  });

  it('leaves a body with nothing to redact as the bytes it arrived as (searched, never decoded)', async () => {
    const plain = Buffer.from('{"items":[{"name":"caf\u00e9 \u2615","qty":2}],"note":"tab\there\\n"}');
    const b = r.body(plain, plain.length, 'application/json');
    expect(b.data).toBe(plain);
    expect(b.encoding).toBe('utf8');
    // A key anywhere still goes, even in a body of no redacted content type.
    const key = 'svc_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const withKey = r.body(Buffer.from(`token is ${key}`), 60, 'text/plain');
    expect(withKey.data.toString()).not.toContain(key);
    expect(withKey.data.toString()).toMatch(/^token is \[redacted:[0-9a-f]{12}\]$/);
    // TabSeparated escaping of bytes keeps multi-byte UTF-8 whole and escapes only the five specials.
    const { tsvEscapeBytes } = await import('../../src/capture/wake-log.js');
    expect(tsvEscapeBytes(plain).toString()).toBe(
      '{"items":[{"name":"caf\u00e9 \u2615","qty":2}],"note":"tab\\there\\\\n"}',
    );
    const none = Buffer.from('no specials \u00e9');
    expect(tsvEscapeBytes(none)).toBe(none);
    expect(tsvEscapeBytes(Buffer.from('a\r\n\0b')).toString()).toBe('a\\r\\n\\0b');
  });

  it('redacts a JSON body cut short by pattern, and equal values give equal markers', () => {
    const cut = r.body(
      Buffer.from('{"password": "abc", "card_number": 4111111111111111, "rest": "xxxx'),
      1000,
      'application/json',
    );
    expect(cut.truncated).toBe(true);
    expect(cut.data.toString()).not.toContain('abc');
    expect(cut.data.toString()).not.toContain('4111111111111111');
    expect(r.marker('same')).toBe(r.marker('same'));
    expect(r.marker('same')).not.toBe(r.marker('other'));
    expect(new Redactor(Buffer.alloc(32, 2), [], []).marker('same')).not.toBe(r.marker('same'));
  });

  it('redacts a named field whose key is written with JSON escapes, whole or cut short', () => {
    // "pass\u0077ord" and "card\u005fnumber" are "password" and "card_number" to any JSON parser.
    const escaped = '{"user":{"pass\\u0077ord":"hunter3","name":"ann"},"card\\u005Fnumber":4111,"t\\u006fken":"tk"}';
    const whole = r.body(Buffer.from(escaped), escaped.length, 'application/json').data.toString();
    expect(whole).not.toContain('hunter3');
    expect(whole).not.toContain('4111');
    expect(whole).not.toContain('"tk"');
    const j = JSON.parse(whole);
    expect(j.user.password).toMatch(M);
    expect(j.user.name).toBe('ann');
    const cut = r.body(Buffer.from(escaped.slice(0, -8)), escaped.length, 'application/json').data.toString();
    expect(cut).not.toContain('hunter3');
    expect(cut).not.toContain('4111');
    // A gateway key written with escapes is found as JSON reads it.
    const key = 'svc_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const hidden = `{"note":"${key.replace('v', '\\u0076').replace('A', '\\u0041')}"}`;
    const found = r.body(Buffer.from(hidden), hidden.length, 'application/json').data.toString();
    expect(JSON.parse(found).note).toMatch(M);
    const noFields = new Redactor(Buffer.alloc(32, 1), [], []);
    expect(noFields.body(Buffer.from(hidden), hidden.length, 'application/json').data.toString()).not.toContain(
      'AAAAAAAAAA',
    );
    // Escapes of other characters (a Go encoder's \u003c for "<") leave a body as it arrived.
    const go = Buffer.from('{"html":"\\u003cb\\u003e","n":1}');
    expect(r.body(go, go.length, 'application/json').data).toBe(go);
  });

  it('finds a gateway key written with escapes in JSON cut short, even cut inside the key or an escape', () => {
    const key = 'svc_live_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB';
    const spelled = [...key].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
    const text = `{"note":"${spelled}","n":1,"pad":"xxxx`;
    const noFields = new Redactor(Buffer.alloc(32, 1), [], []);
    for (const red of [r, noFields]) {
      const out = red.body(Buffer.from(text), text.length + 100, 'application/json').data.toString();
      expect(out).toMatch(/^\{"note":"\[redacted:[0-9a-f]{12}\]","n":1,"pad":"xxxx$/);
      // Cut after 30 of the key's characters, in the middle of an escape: still a key (20 base62 and more).
      const cut = text.slice(0, '{"note":"'.length + 30 * 6 + 3);
      const kept = red.body(Buffer.from(cut), text.length, 'application/json').data.toString();
      expect(kept).toMatch(/^\{"note":"\[redacted:[0-9a-f]{12}\]$/);
    }
    // Strings with other escapes, and escapes unknown to JSON, are left as written.
    const other = '{"a":"\\u00e9t\\u00e9 \\q","svc":"svc\\u005fno",';
    expect(r.body(Buffer.from(other), other.length + 9, 'text/plain').data.toString()).toBe(other);
  });

  it('searches JSON and forms sent as text/plain or untyped, and JSON inside other text', () => {
    const plain = r.body(Buffer.from('{"password":"p1"}'), 17, 'text/plain; charset=utf-8').data.toString();
    expect(JSON.parse(plain).password).toMatch(M);
    const untyped = r.body(Buffer.from('[{"token":"t1"}]'), 16, undefined).data.toString();
    expect(JSON.parse(untyped)[0].token).toMatch(M);
    const form = r.body(Buffer.from('a=1&card_number=4111'), 20, undefined).data.toString();
    expect(form).toMatch(/^a=1&card_number=%5Bredacted%3A[0-9a-f]{12}%5D$/);
    const page = '<p>{"token": "t2", "x": 1}</p>';
    expect(r.body(Buffer.from(page), page.length, 'text/html').data.toString()).toMatch(
      /^<p>\{"token": "\[redacted:[0-9a-f]{12}\]", "x": 1\}<\/p>$/,
    );
    // Prose with an equals sign is not a form with named fields: kept as it arrived.
    const prose = Buffer.from('the password = secret is not a form field');
    expect(r.body(prose, prose.length, 'text/plain').data.toString()).toBe(prose.toString());
  });

  it('redacts inside compressed bodies, keeps them compressed, and keeps nothing of one it cannot read', () => {
    const json = Buffer.from('{"password":"pw-inside","ok":1}');
    const j = (b: { data: Buffer }, decode: (x: Buffer) => Buffer) =>
      JSON.parse(decode(Buffer.from(b.data.toString(), 'base64')).toString());
    const brSent = brotliCompressSync(json);
    const br = r.body(brSent, brSent.length, 'application/json', 'br');
    expect(br).toMatchObject({ encoding: 'base64', truncated: false, bytes: brSent.length });
    expect(j(br, brotliDecompressSync)).toEqual({ password: expect.stringMatching(M), ok: 1 });
    const deflated = r.body(deflateSync(json), deflateSync(json).length, 'application/json', ' Deflate ');
    expect(j(deflated, inflateSync).password).toMatch(M);
    // Nothing to redact: the bytes as sent.
    const plain = gzipSync('{"ok":1}');
    expect(Buffer.from(r.body(plain, plain.length, 'application/json', 'gzip').data.toString(), 'base64')).toEqual(
      plain,
    );
    expect(r.body(json, json.length, 'application/json', 'identity').data.toString()).not.toContain('pw-inside');
    // Unreadable: an unknown coding, corrupt bytes, a body cut short, or one too large once decoded.
    const bomb = gzipSync(Buffer.alloc(4 << 20));
    for (const [b, total, coding, reason] of [
      // LZW `compress`: no Node decodes it (zstd, used here before, is known from Node 22.15 on).
      [json, json.length, 'compress', /coding not known/],
      [Buffer.from('not gzip'), 8, 'gzip', /corrupt/],
      [gzipSync(json).subarray(0, 10), 60, 'gzip', /cut short/],
      [bomb, bomb.length, 'gzip', /decodes to more than 65536 bytes/],
    ] as const) {
      const kept = r.body(b, total, 'application/json', coding);
      expect(kept.encoding, coding).toBe('omitted');
      expect(kept.bytes).toBe(total);
      const info = omittedInfo(kept.data.toString());
      expect(info?.reason).toMatch(reason);
      expect(info?.sha256).toBe(createHash('sha256').update(b).digest('hex'));
    }
    // A gateway key among bytes that are not text is replaced too.
    const key = 'svc_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const bin = Buffer.concat([Buffer.from([0xff, 0xfe, 0x00]), Buffer.from(key), Buffer.from([0xc3])]);
    const kept = Buffer.from(
      r.body(bin, bin.length, 'application/octet-stream', undefined, KEEP).data.toString(),
      'base64',
    );
    expect(kept.toString('latin1')).not.toContain(key);
    expect(kept.subarray(0, 3)).toEqual(bin.subarray(0, 3));
    expect(kept.subarray(3).toString('latin1')).toMatch(/^\[redacted:[0-9a-f]{12}\]\xc3$/);
  });

  it('keeps binary bodies as base64, and only the first max bytes of a stream', () => {
    const tap = new BodyTap(4);
    for (const c of [Buffer.from([0xff, 0xfe]), Buffer.from([1, 2, 3]), Buffer.from([9])]) tap.add(c);
    expect(tap.total).toBe(6);
    const b = r.body(tap.take(), tap.total, 'application/octet-stream', undefined, KEEP);
    expect(b).toEqual({
      data: Buffer.from(Buffer.from([0xff, 0xfe, 1, 2]).toString('base64')),
      bytes: 6,
      truncated: true,
      encoding: 'base64',
    });
    const t = newTap(
      detailSettings({ headers: false, bodies: true, maxBodyBytes: 8, rate: new DetailRate(0), keepOpaque: false }),
      '',
      ['content-type', 'text/plain'],
    );
    t.req?.add(Buffer.from('hello'));
    expect(buildDetail(t, r, 'wk_x')).toMatchObject({
      request_headers: null,
      request_body: { data: Buffer.from('hello'), truncated: false },
    });
  });

  it("keeps at most max_per_second exchanges' detail a second, failed ones apart, refilled over time", () => {
    const r = new DetailRate(3);
    const t0 = Date.UTC(2026, 0, 1);
    // A full second's worth at first, then nothing until time passes.
    expect([1, 2, 3, 4].map(() => r.take(t0, 200, 100))).toEqual([true, true, true, false]);
    // Failed exchanges (400 and up, or no answer) have their own tokens: successes did not spend them.
    expect([1, 2, 3, 4].map((i) => r.take(t0, i === 4 ? 0 : 502, 100))).toEqual([true, true, true, false]);
    expect(r.take(t0, 404, 100)).toBe(false);
    // A third of a second earns one token back (3 a second), not more.
    expect(r.take(t0 + 333, 200, 100)).toBe(false);
    expect(r.take(t0 + 334, 200, 100)).toBe(true);
    expect(r.take(t0 + 334, 200, 100)).toBe(false);
    // A long pause refills to a second's worth, no more.
    expect([1, 2, 3, 4].map(() => r.take(t0 + 60_000, 201, 100))).toEqual([true, true, true, false]);
    // A clock that steps back earns nothing and takes nothing extra.
    expect(r.take(t0, 200, 100)).toBe(false);
    // 0 keeps every exchange.
    const all = new DetailRate(0);
    expect(Array.from({ length: 10_000 }, () => all.take(t0, 200, 1e9)).every(Boolean)).toBe(true);
  });

  it('keeps at most max_bytes_per_second of bodies a second, a body larger than that once the bucket is full', () => {
    const r = new DetailRate(0, 1000);
    const t0 = Date.UTC(2026, 0, 1);
    // 400 + 400 + 400: the third goes into debt (200 short), and nothing more is kept until it is paid back.
    expect([1, 2, 3, 4].map(() => r.take(t0, 200, 400))).toEqual([true, true, true, false]);
    expect(r.take(t0 + 200, 200, 1)).toBe(false); // 200 ms earn 200 bytes: the debt is paid, no more
    expect(r.take(t0 + 201, 200, 1)).toBe(true);
    // Failed exchanges have their own bytes.
    expect(r.take(t0 + 201, 503, 900)).toBe(true);
    // A body larger than a second's worth is kept once the bucket is full again, not never.
    expect(r.take(t0 + 10_000, 200, 50_000)).toBe(true);
    expect(r.take(t0 + 20_000, 200, 1)).toBe(false);
    expect(r.take(t0 + 60_000, 200, 1)).toBe(true);
    // Both limits at once: whichever is spent first refuses.
    const both = new DetailRate(2, 1_000_000);
    expect([1, 2, 3].map(() => both.take(t0, 200, 10))).toEqual([true, true, false]);
  });

  it('bounds detail waiting in memory', () => {
    const b = new DetailBudget(100);
    expect(b.take(60)).toBe(true);
    expect(b.take(60)).toBe(false);
    b.give(60);
    expect(b.take(60)).toBe(true);
  });
});

describe('replay diff', () => {
  const json = (v: unknown, extra: [string, string][] = []) => ({
    status: 200,
    headers: [['content-type', 'application/json'], ...extra] as [string, string][],
    body: { body: JSON.stringify(v), bytes: JSON.stringify(v).length, truncated: false, encoding: 'utf8' as const },
  });

  it('compares JSON by path, skips ignored paths and field names, and the headers that always change', () => {
    const a = json({ id: 1, items: [{ n: 1, at: 'x' }], meta: { at: 'y' } }, [
      ['date', 'd1'],
      ['x-v', '1'],
    ]);
    const b = json({ id: 2, items: [{ n: 1, at: 'z' }, { n: 2 }], meta: { at: 'w' } }, [
      ['date', 'd2'],
      ['x-v', '2'],
    ]);
    const d = diffAnswers(a, b, ['at']);
    expect(d.identical).toBe(false);
    expect(d.headers).toEqual([{ name: 'x-v', before: '1', after: '2' }]);
    expect(d.body).toEqual([
      { path: '$.id', before: 1, after: 2 },
      { path: '$.items[1]', before: undefined, after: { n: 2 } },
    ]);
    expect(d.ignored.sort()).toEqual(['$.items[0].at', '$.meta.at']);
    expect(diffAnswers(a, a).identical).toBe(true);
    expect(diffAnswers(a, { ...a, status: 500 }).status).toEqual({ before: 200, after: 500 });
  });

  it('compares other bodies by size and hash, and decompresses gzip bodies kept whole', () => {
    const text = (s: string) => ({
      status: 200,
      headers: [['content-type', 'text/plain']] as [string, string][],
      body: { body: s, bytes: s.length, truncated: false, encoding: 'utf8' as const },
    });
    const d = diffAnswers(text('abc'), text('abd'));
    expect(d.body[0]?.path).toBe('$');
    expect((d.body[0] as { before: { sha256: string } }).before.sha256).toMatch(/^[0-9a-f]{64}$/);
    const gz = (v: unknown) => {
      const z = gzipSync(JSON.stringify(v));
      return {
        status: 200,
        headers: [
          ['content-type', 'application/json'],
          ['content-encoding', 'gzip'],
        ] as [string, string][],
        body: { body: z.toString('base64'), bytes: z.length, truncated: false, encoding: 'base64' as const },
      };
    };
    expect(diffAnswers(gz({ a: 1 }), gz({ a: 2 })).body).toEqual([{ path: '$.a', before: 1, after: 2 }]);
  });
});
