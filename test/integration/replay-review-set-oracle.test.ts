// Regression tests from a review of wake replay (2026-11-28): markers of set values are no oracle.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, flushed, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * docs/api.md: "The replay's own wake marks the values from `set` ... with a salt of its
 * own, so its markers never tell whether a value given equals the original."
 * docs/security.md (a wakes:write key) cannot "learn whether a guess equals a redacted
 * value: values from `set` get markers of their own salt".
 *
 * replay/salts.ts salts apart only the spellings it knows of a set value: as given,
 * encodeURIComponent'd, JSON-escaped. A header value given in set goes through
 * passedValue (proxy/header-value.ts), which percent-encodes the whole value once it
 * holds a character past U+00FF or a control, but leaves `:` `/` `=` etc. alone: a
 * spelling none of the three. The replay's request header is then marked with the
 * ORIGINAL wake's salt, and its marker equals the original's exactly when the guess
 * (so encoded) equals the original value.
 */
describe('set values given for a redacted header are no oracle', () => {
  let origin: TestServer;
  let t: TestGateway;
  const got: (string | undefined)[] = [];

  beforeAll(async () => {
    origin = await startServer((req, res) => {
      got.push(req.headers['x-api-key'] as string | undefined);
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    t = await startGateway({
      routes: [{ name: 'open', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  // biome-ignore lint/suspicious/noExplicitAny: read loosely
  const wake = async (id: string): Promise<any> => {
    const deadline = Date.now() + 6000;
    while (Date.now() < deadline) {
      await flushed(t.gw);
      const g = await fetch(`${t.url}/v2/wakes/${id}`, { headers: bearer(t.admin) });
      if (g.status === 200) return g.json();
      await g.text();
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no wake ${id}`);
  };
  const apiKeyMarker = (w: { request: { headers: [string, string][] } }) =>
    w.request.headers.find(([n]) => n.toLowerCase() === 'x-api-key')?.[1];

  it("a guess that encodes to the original header value does not get the original's marker", async () => {
    // The client's x-api-key (redacted by default): percent-encoded UTF-8 and a colon.
    const secret = '%E6%9D%B1:1';
    const r = await fetch(`${t.url}/open/me`, { headers: { 'x-api-key': secret } });
    await r.text();
    const id = r.headers.get('x-wake-id') as string;
    const original = apiKeyMarker(await wake(id));
    expect(original).toMatch(/^\[redacted:[0-9a-f]{12}\]$/);

    const rep = await fetch(`${t.url}/v2/wakes/${id}/replay`, {
      method: 'POST',
      headers: { ...bearer(t.admin), 'content-type': 'application/json' },
      body: JSON.stringify({ set: { 'x-api-key': '東:1' } }),
    });
    expect(rep.status).toBe(202);
    const { replay_wake_id } = (await rep.json()) as { replay_wake_id: string };
    const replayed = apiKeyMarker(await wake(replay_wake_id));
    // The origin got the original value again: the guess was right.
    expect(got.at(-1)).toBe(secret);
    // ...and the replay's wake must not say so.
    expect(replayed, 'the replay marked the guessed header with the original salt').not.toBe(original);
  });
});
