import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/log.js';
import { startGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/**
 * docs/configuration.md: a bad configuration lists every problem, one line each: the key
 * path, why in plain words, and where the file says it (`file:line:column`).
 */
// Regression tests from a review of the CLI, configuration and operations (each failed before its fix).
describe('config problems, as an operator reads them', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'wakegate-review-config-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const load = (name: string, text: string): string => {
    const file = join(dir, name);
    writeFileSync(file, text);
    try {
      loadConfig({ file, env: {} });
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      return (e as Error).message;
    }
    throw new Error('the config loaded');
  };

  it('an environment name that is not a lower-case identifier says why, not "has a wrong value"', () => {
    const msg = load('env.yaml', 'environments:\n  Staging: { class: test }\n');
    // Actual: `config: environments.Staging: has a wrong value (env.yaml:2:3)`: the value is
    // fine, the name is not, and the schema's own words ("environment names are lower-case
    // identifiers", schema.ts) are lost (zod's invalid_key issue falls to reasonFor's default).
    expect(msg).toMatch(/^config: environments\.Staging: .*lower-case/);
  });

  it('a YAML syntax error is one line ending with file:line:column', () => {
    const msg = load('dup.yaml', 'server:\n  port: 8080\n  port: 8081\n');
    // Actual: `config: (file): /tmp/.../dup.yaml is not valid YAML: Map keys must be unique at
    // line 3, column 3:` (the yaml library's first line, cut before its code frame).
    expect(msg.split('\n')).toHaveLength(1);
    expect(msg).toMatch(/\(.*dup\.yaml:3:3\)$/);
  });
});

describe('an origin URL whose parts the proxy silently drops', () => {
  let origin: TestServer;
  let seen: { url: string; headers: IncomingHttpHeaders }[];
  beforeAll(async () => {
    seen = [];
    origin = await startServer((req, res) => {
      seen.push({ url: req.url ?? '', headers: req.headers });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
  });
  afterAll(async () => {
    await origin.close();
  });

  /**
   * Starts a gateway with one keyless route to `url`, sends GET /app/x through it and
   * returns what the origin got; null when the config refused the URL (naming it).
   */
  async function through(url: string): Promise<{ url: string; headers: IncomingHttpHeaders } | null> {
    let t: Awaited<ReturnType<typeof startGateway>>;
    try {
      t = await startGateway({
        routes: [{ name: 'app', prefix: '/app', auth: 'none', origins: { production: url } }],
      });
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      expect((e as Error).message).toMatch(/^config: routes\[0\]\.origins\.production: /);
      return null;
    }
    try {
      seen.length = 0;
      const r = await fetch(`${t.url}/app/x`);
      expect(r.status).toBe(200);
      await r.text();
      return seen[0] ?? null;
    } finally {
      await t.cleanup();
    }
  }

  it('user:password@ in an origin is sent as Basic authentication, or refused by the config', async () => {
    const got = await through(`http://svc:pa55word@127.0.0.1:${origin.port}`);
    if (got === null) return;
    // Actual: the config takes it without a word and the origin gets no authorization at all
    // (admission/routes.ts parseOrigin keeps host, port and path only). The start line even
    // masks `https://TOKEN@host` in ORIGIN_URL "a common way to hold a credential" (startup.ts).
    expect(got.headers.authorization).toBe(`Basic ${Buffer.from('svc:pa55word').toString('base64')}`);
  });

  it('a query in an origin URL reaches the origin, or is refused by the config', async () => {
    const got = await through(`http://127.0.0.1:${origin.port}/base?tenant=7`);
    if (got === null) return;
    // Actual: the origin gets `/base/app/x`: `?tenant=7` is dropped without a word.
    expect(got.url).toContain('tenant=7');
  });
});

describe('a route that the management paths shadow', () => {
  it('a route under /v2/webhooks is refused or warned about at start: it can never be reached', async () => {
    const lines: string[] = [];
    let t: Awaited<ReturnType<typeof startGateway>>;
    try {
      t = await startGateway(
        {
          routes: [
            // The app's own webhook receiver, say Stripe's: /v2/webhooks/stripe.
            {
              name: 'hooks',
              prefix: '/v2/webhooks/stripe',
              auth: 'none',
              origins: { production: 'http://127.0.0.1:9' },
            },
          ],
        },
        { log: createLogger('info', (l) => lines.push(l)) },
      );
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      expect((e as Error).message).toMatch(/routes\[0\]\.prefix/);
      return;
    }
    try {
      // The gateway's own /v2/webhooks answers, never the route (docs/configuration.md "Routes").
      // (A proxied request would get 502 from the dead origin; the gateway's API answers instead.)
      const r = await fetch(`${t.url}/v2/webhooks/stripe`, { method: 'POST', body: '{}' });
      await r.arrayBuffer();
      expect(r.status).not.toBe(502);
      // Actual: no warning; the start line lists "hooks /v2/webhooks/stripe" as if it served.
      const warned = lines.filter((l) => l.includes('"level":"warn"') && l.includes('hooks'));
      expect(warned, lines.join('')).toHaveLength(1);
    } finally {
      await t.cleanup();
    }
  });
});
