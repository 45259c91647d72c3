import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startServer, type TestServer } from '../helpers/origin.js';
import { rawExchange } from '../helpers/raw.js';

/**
 * A regression test (found by an attack review, since fixed). What it was (upgrade-offer.ts serve(), the Expect branch): Node's server acts on Expect
 * only for HTTP/1.1 (RFC 9110 §10.1.1: a server MUST ignore a 100-continue expectation
 * in an HTTP/1.0 request); serve() acts on it for any version. An HTTP/1.0 request with
 * an offer and `Expect: 100-continue` gets an interim `100 Continue` an HTTP/1.0 client
 * does not know, and one with any other Expect gets 417 where the same request without
 * the offer is served.
 */
const OFFER = 'Connection: Upgrade\r\nUpgrade: h2c\r\n';

describe('an HTTP/1.0 request with an offer and an Expect', () => {
  let origin: TestServer;
  let t: TestGateway;
  let port: number;
  beforeAll(async () => {
    origin = await startServer((req, res) => {
      req.resume();
      res.end(`ok ${req.url}`);
    });
    t = await startGateway({
      routes: [{ name: 'public', prefix: '/open', auth: 'none', origins: { production: origin.url } }],
    });
    port = Number(new URL(t.url).port);
  });
  afterAll(async () => {
    await t.cleanup();
    await origin.close();
  });

  for (const expectation of ['100-continue', 'something-else']) {
    it(`Expect: ${expectation} is answered as without the offer`, async () => {
      const plain = await rawExchange(port, `GET /open/e HTTP/1.0\r\nHost: x\r\nExpect: ${expectation}\r\n\r\n`, 3000);
      const offered = await rawExchange(
        port,
        `GET /open/e HTTP/1.0\r\nHost: x\r\nExpect: ${expectation}\r\n${OFFER}\r\n`,
        3000,
      );
      const statusLines = (text: string) => text.match(/^HTTP\/1\.1 \d{3}/gm);
      console.log({ expectation, plain: statusLines(plain.text), offered: statusLines(offered.text) });
      expect(statusLines(offered.text)).toEqual(statusLines(plain.text));
    });
  }
});
