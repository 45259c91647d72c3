// Regression tests from a review of the CLI (2026-11-28): reaching the gateway (ports, redirects, a --url that is not a wakegate).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wakegate } from '../helpers/cli-run.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';

/** Ports the WHATWG fetch standard calls "bad" (it refuses them), none of them special to the gateway. */
const BAD_PORTS = [10080, 6665, 6666, 6667, 6668, 6669, 6697, 4190, 6679];

const free = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });

describe('the CLI reaches a gateway wherever it listens, and says what it found when it is not one', () => {
  let t: TestGateway;
  let port = 0;
  let notGateway: TestServer;
  let redirect: TestServer;
  beforeAll(async () => {
    for (const p of BAD_PORTS) {
      if (await free(p)) {
        port = p;
        break;
      }
    }
    if (port === 0) throw new Error(`none of ${BAD_PORTS.join(', ')} is free on 127.0.0.1`);
    // PORT may be any port: the gateway itself listens on this one and answers.
    t = await startGateway({ server: { port } });
    // What --url may point at by mistake: an origin or a health service answering JSON to everything.
    notGateway = await startServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"status":"ok"}');
    });
    // A front proxy sending http:// to where the gateway really is (as an http-to-https redirect does);
    // its management listener, which serves /v2 too, on a port fetch() takes.
    redirect = await startServer((req, res) => {
      req.resume();
      res.writeHead(301, { location: `${t.managementUrl}${req.url}` });
      res.end();
    });
  }, 60_000);
  afterAll(async () => {
    await t?.cleanup();
    await notGateway?.close();
    await redirect?.close();
  });

  /**
   * client.ts calls the API with Node's fetch(), which follows the WHATWG fetch standard's
   * "bad port" list and refuses to connect to 10080, 6665-6669, 6000, 5060 and some sixty
   * others, before any packet is sent. A gateway run with PORT=10080 is up and answers
   * curl, yet every CLI command says `cannot reach the gateway at http://127.0.0.1:10080
   * (fetch failed); is it running?`: the operator is sent to look for a fault that is
   * not there. A command-line client should connect to the port it is given (as curl does).
   */
  it('talks to a gateway listening on a port fetch() calls "bad"', async () => {
    const url = `http://127.0.0.1:${port}`;
    // The gateway is there and answers on that port.
    const direct = await new Promise<string>((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1', () =>
        s.write('GET /v2/api-keys HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'),
      );
      let d = '';
      s.on('data', (c) => {
        d += c;
      });
      s.on('end', () => resolve(d.split('\r\n')[0] as string));
      s.on('error', reject);
    });
    expect(direct).toBe('HTTP/1.1 401 Unauthorized');
    const r = await wakegate(['keys', 'list'], { WAKEGATE_URL: url, WAKEGATE_KEY: t.admin });
    expect(r.stderr).not.toContain('cannot reach');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^ID\s+LABEL/);
  }, 60_000);

  /**
   * --url pointed at something that answers 200 with JSON that is not the API's (an
   * origin, a health endpoint): `keys list` and `wakes list` end with
   * `wakegate: Cannot read properties of undefined (reading 'length')`, JavaScript's
   * own words, naming nothing the operator gave. The non-JSON case already says
   * "is --url a wakegate?"; this one should say as much.
   */
  it('says the answer is not a wakegate API answer, not a JavaScript TypeError', async () => {
    for (const cmd of [
      ['keys', 'list'],
      ['wakes', 'list'],
    ]) {
      const r = await wakegate(cmd, { WAKEGATE_URL: notGateway.url, WAKEGATE_KEY: t.admin });
      expect(r.code).toBe(1);
      expect(r.stderr).not.toMatch(/Cannot read properties|undefined|is not a function|TypeError/);
      expect(r.stderr).toContain(notGateway.url);
    }
  }, 60_000);

  /**
   * A --url that redirects (a front proxy's http -> https, another host or port):
   * fetch() follows it and, as the fetch standard asks on a cross-origin redirect,
   * drops the Authorization header. The gateway then answers 401 and the operator
   * reads `401 authentication_required: an Authorization: Bearer header with a valid
   * key is required` although the key is right and was given. (A 301 or 302 would also
   * turn `keys create`'s POST into a GET.) The CLI should not follow it silently: one
   * line saying --url redirects, and to where.
   */
  it('says that --url redirects, and to where, instead of a 401 for a key it did send', async () => {
    const r = await wakegate(['keys', 'list'], { WAKEGATE_URL: redirect.url, WAKEGATE_KEY: t.admin });
    expect(r.code).toBe(1);
    // Not the gateway's 401 (a port number may hold the digits 401: the status and its type are looked for).
    expect(r.stderr).not.toMatch(/\b401 authentication_required\b|authentication_required/);
    expect(r.stderr).toMatch(/redirect/i);
    expect(r.stderr).toContain(t.managementUrl);
  }, 60_000);
});
