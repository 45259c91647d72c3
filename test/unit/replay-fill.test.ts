import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { storedBody, type WakeDetail } from '../../src/capture/detail-types.js';
import { Redactor } from '../../src/capture/redact.js';
import { fillRedacted } from '../../src/replay/fill.js';
import { replaySalts } from '../../src/replay/salts.js';
import { doc, type Json, markedPaths, NAMES, REDACTED, replaced, scalar, WHOLE, word } from '../helpers/marked.js';

const r = new Redactor(Buffer.alloc(32, 9), ['authorization'], REDACTED);

const query = fc.array(fc.tuple(fc.constantFrom(...NAMES), word), { maxLength: 4 });

/** The request of a wake `wk_orig` as capture stores it. */
function captured(body: Json, params: [string, string][]): WakeDetail {
  r.forWake('wk_orig');
  const text = JSON.stringify(body);
  const q = params.length ? `?${params.map(([k, v]) => `${k}=${v}`).join('&')}` : '';
  const b = r.body(Buffer.from(text), Buffer.byteLength(text), 'application/json');
  return {
    query: r.query(q),
    request_headers: [['content-type', 'application/json']],
    response_headers: null,
    request_body: storedBody(b),
    response_body: null,
    diff: null,
  };
}

const queryMarkers = (q: string): Map<string, string[]> => {
  const m = new Map<string, string[]>();
  for (const [k, v] of new URLSearchParams(q)) if (WHOLE.test(v)) m.set(k, [...(m.get(k) ?? []), v]);
  return m;
};

describe('replay set: fills redacted values only, and its markers are no oracle (issue #34 item 9)', () => {
  it('property: refused naming set.<name>, or sent as captured with only the redacted values filled, never marked as the original', () => {
    fc.assert(
      fc.property(
        doc,
        query,
        fc.array(fc.oneof(scalar, fc.constant('__original__')), { minLength: 12, maxLength: 12 }),
        fc.subarray(['drop-one', '$', 'object', 'array', 'unredacted', 'unknown'] as const, { maxLength: 2 }),
        (plain, params, picks, extras) => {
          const detail = captured(plain, params);
          const paths = markedPaths(JSON.parse(detail.request_body?.body ?? 'null') as Json, plain);
          const qNames = [...queryMarkers(detail.query).keys()];
          const originals = new Map<string, unknown>(paths);
          for (const n of qNames) originals.set(n, params.find(([k]) => k === n)?.[1]);
          // Every redacted value given: a guess, or the original value itself (the oracle attack).
          const set: Record<string, unknown> = {};
          [...originals.keys()].forEach((n, i) => {
            const p = picks[i % picks.length];
            set[n] = p === '__original__' ? originals.get(n) : p;
          });
          const first = Object.keys(set)[0];
          for (const e of extras) {
            if (e === 'drop-one') {
              if (first !== undefined) delete set[first];
            } else if (e === '$') set.$ = '{}';
            else if (e === 'object') set[first ?? '$.card'] = { x: 1 };
            else if (e === 'array') set[first ?? '$.items'] = ['1'];
            else if (e === 'unredacted') set['$.amount'] = 1;
            else set.nope = 'x';
          }

          const res = fillRedacted(detail, set, (n) => n === 'authorization');
          const invalid = Object.entries(set).filter(
            ([n, v]) => n === '$' || (v !== null && typeof v === 'object') || !originals.has(n),
          );
          if (invalid.length > 0) {
            expect(res.ok).toBe(false);
            if (res.ok) return;
            expect(res.refusal.kind).toBe('set');
            if (res.refusal.kind === 'set') expect(invalid.map(([n]) => n)).toContain(res.refusal.name);
            return;
          }
          const absent = [...originals.keys()].filter((n) => !Object.hasOwn(set, n));
          if (absent.length > 0) {
            expect(res).toMatchObject({ ok: false, refusal: { kind: 'missing' } });
            if (!res.ok && res.refusal.kind === 'missing') expect(new Set(res.refusal.names)).toEqual(new Set(absent));
            return;
          }
          expect(res.ok).toBe(true);
          if (!res.ok) return;
          // Exactly the original body and query, only the redacted values filled.
          expect(JSON.parse(res.filled.body?.toString() ?? 'null')).toEqual(
            replaced(plain, set, new Set(paths.keys())),
          );
          const wantQuery = params.map(
            ([k, v]) => `${k}=${qNames.includes(k) ? encodeURIComponent(String(set[k])) : v}`,
          );
          expect(res.filled.query).toBe(params.length ? `?${wantQuery.join('&')}` : '');
          expect(
            res.filled.query.includes('redacted') || (res.filled.body?.toString() ?? '').includes('[redacted:'),
          ).toBe(false);
          // The replay's own wake: no marker of a set value equals the original's, even for the original value.
          const salts = replaySalts('wk_orig', 'wk_replay', res.values);
          r.forWake(salts.request, salts.fresh);
          const body = res.filled.body ?? Buffer.alloc(0);
          const again = JSON.parse(r.body(body, body.length, 'application/json').data.toString()) as Json;
          const before = JSON.parse(detail.request_body?.body ?? 'null') as Json;
          const was = markedPaths(before, before);
          for (const [p, m] of markedPaths(again, again)) expect(m, p).not.toBe(was.get(p));
          const qBefore = queryMarkers(detail.query);
          for (const [n, ms] of queryMarkers(r.query(res.filled.query)))
            for (const m of ms) expect(qBefore.get(n) ?? []).not.toContain(m);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('without set, a replay is marked as the wake it replays (their diff tells equal from changed)', () => {
    const salts = replaySalts('wk_orig', 'wk_replay', []);
    const a = r.forWake('wk_orig').body(Buffer.from('{"token":"t1"}'), 14, 'application/json').data.toString();
    const b = r.forWake(salts.request, salts.fresh).body(Buffer.from('{"token":"t1"}'), 14, 'application/json');
    expect(b.data.toString()).toBe(a);
    expect(salts.response).toBe('wk_orig');
    // Unrelated wakes: the same value, unrelated markers.
    expect(r.forWake('wk_other').body(Buffer.from('{"token":"t1"}'), 14, 'application/json').data.toString()).not.toBe(
      a,
    );
  });

  it('markers no set name can reach are refused (409), never sent: inside a string, in a body neither JSON nor a form, in UTF-16', () => {
    const base = (body: string | Buffer, ct: string, encoding: 'utf8' | 'base64' = 'utf8'): WakeDetail => ({
      query: '',
      request_headers: [['content-type', ct]],
      response_headers: null,
      request_body: {
        body: typeof body === 'string' ? body : body.toString('base64'),
        bytes: body.length,
        truncated: false,
        encoding,
      },
      response_body: null,
      diff: null,
    });
    const m = '[redacted:0123456789ab]';
    for (const [d, set] of [
      [base(JSON.stringify({ payload: JSON.stringify({ password: m }) }), 'application/json'), { '$.payload': 'x' }],
      [base(`password: ${m}\n`, 'application/yaml'), {}],
      [base(Buffer.from(`{"password":"${m}"}`, 'utf16le'), 'application/json; charset=utf-16le', 'base64'), {}],
    ] as const) {
      const res = fillRedacted(d, set, () => false);
      expect(res.ok).toBe(false);
      if (!res.ok) expect(['unreachable', 'set']).toContain(res.refusal.kind);
    }
    const yaml = fillRedacted(base(`password: ${m}\n`, 'application/yaml'), {}, () => false);
    expect(yaml).toMatchObject({ ok: false, refusal: { kind: 'unreachable' } });
    // A form sent as text/plain is read as the redactor read it: by field name.
    const plain = fillRedacted(
      base(`user=ann&password=${encodeURIComponent(m)}`, 'text/plain'),
      { password: 'p w' },
      () => false,
    );
    expect(plain.ok && plain.filled.body?.toString()).toBe('user=ann&password=p%20w');
  });
});
