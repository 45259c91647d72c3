import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { diffAnswers } from '../../src/replay/diff.js';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * DESIGN "Wake detail and replay": `diff` compares JSON bodies "value by value by JSON
 * path" (numbers by their exact value, past 2^53 too); `ignore` names paths or field
 * names to skip, and header names in any case.
 */
describe('replay diff: big numbers and ignored headers', () => {
  let origin: TestServer;
  let t: TestGateway;
  let n = 0;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      req.on('end', () => {
        n++;
        if (req.url?.startsWith('/api/big')) {
          // An id past 2^53: the first answer and the replay's differ by one.
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(`{"id": ${n === 1 ? '9007199254740993' : '9007199254740992'}}`);
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json', 'X-Version': String(n) });
        res.end('{}');
      });
    });
    t = await startGateway({
      routes: [{ name: 'api', prefix: '/api', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  const api = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${t.url}${path}`, {
      method,
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: r.status, body: await r.json() };
  };
  /** Sends `path` through the gateway, replays its wake, and waits for the replay's diff. */
  const replayDiff = async (path: string, body: unknown) => {
    n = 0;
    const r = await fetch(`${t.url}${path}`);
    await r.arrayBuffer();
    const id = r.headers.get('x-wake-id') as string;
    await flushed(t.gw);
    const rep = await api('POST', `/v2/wakes/${id}/replay`, body);
    expect(rep.status).toBe(202);
    for (let i = 0; i < 100; i++) {
      await flushed(t.gw);
      const w = await api('GET', `/v2/wakes/${rep.body.replay_wake_id}`);
      if (w.status === 200 && w.body.diff) return w.body.diff;
      await new Promise((res) => setTimeout(res, 50));
    }
    throw new Error('no diff');
  };

  it('a JSON number past 2^53 that changed (9007199254740993 -> 9007199254740992) is not "identical"', async () => {
    const diff = await replayDiff('/api/big', {});
    expect(diff.identical).toBe(false);
    expect(diff.body.map((d: { path: string }) => d.path)).toEqual(['$.id']);
    // No double holds 9007199254740993: it is given as written.
    expect(diff.body[0]).toMatchObject({ before: '9007199254740993', after: 9007199254740992 });
  });

  it('ignore names a header case-insensitively (ignore: ["X-Version"] skips x-version)', async () => {
    const diff = await replayDiff('/api/hdr', { ignore: ['X-Version'] });
    expect(diff.headers).toEqual([]);
    expect(diff.identical).toBe(true);
    expect(diff.ignored).toEqual(['x-version']);
  });
});

describe('diffAnswers: JSON numbers by exact value', () => {
  const json = (text: string) => ({
    status: 200,
    headers: [['content-type', 'application/json']] as [string, string][],
    body: { body: text, bytes: Buffer.byteLength(text), truncated: false, encoding: 'utf8' as const },
  });
  const diff = (a: string, b: string, ignore: string[] = []) => diffAnswers(json(a), json(b), ignore);

  it('numbers written differently but equal as values are equal (1, 1.0, 1e0, 10e-1; 0 and -0)', () => {
    expect(diff('{"a":1,"b":[0.5],"c":0}', '{"a":1.0,"b":[5e-1],"c":-0}').identical).toBe(true);
    expect(diff('{"a":1}', '{"a":1e0}').identical).toBe(true);
    expect(diff('{"a":1}', '{"a":10e-1}').identical).toBe(true);
    expect(diff('{"a":100}', '{"a":1E2}').identical).toBe(true);
  });

  it('numbers past a double differ digit by digit, in the body and as ignored', () => {
    expect(diff('[12345678901234567890]', '[12345678901234567891]').body).toEqual([
      { path: '$[0]', before: '12345678901234567890', after: '12345678901234567891' },
    ]);
    expect(diff('{"x":1e400}', '{"x":2e400}').body).toEqual([{ path: '$.x', before: '1e400', after: '2e400' }]);
    expect(diff('{"x":0.1000000000000000000001}', '{"x":0.1}').identical).toBe(false);
    const d = diff('{"at":9007199254740993}', '{"at":9007199254740992}', ['at']);
    expect(d.identical).toBe(true);
    expect(d.ignored).toEqual(['$.at']);
  });

  it('a value only one side has is given as plain JSON, a __proto__ key included', () => {
    const d = diff('{"a":{"n":1.50,"__proto__":{"x":1}}}', '{}');
    expect(d.body).toHaveLength(1);
    expect(JSON.stringify(d.body[0]?.before)).toBe('{"n":1.5,"__proto__":{"x":1}}');
    expect(diff('{"toString":1}', '{}').body).toEqual([{ path: '$.toString', before: 1, after: undefined }]);
  });
});
