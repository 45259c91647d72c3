import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { startGateway } from '../helpers/gateway.js';

/** The start warning of test/unit/route-exposure.test.ts's pairs, through a real gateway's start. */
const ORIGIN = 'http://127.0.0.1:9';
describe('a keyed route whose origin paths a public route reaches', () => {
  it('is named in one warning at start, and the gateway serves as configured', async () => {
    const lines: string[] = [];
    const t = await startGateway(
      {
        routes: [
          {
            name: 'pay',
            prefix: '/payments',
            strip_prefix: true,
            scopes: { read: 'p:read', write: 'p:write' },
            origins: { production: ORIGIN },
          },
          { name: 'site', prefix: '/', auth: 'none', origins: { production: ORIGIN } },
        ],
      },
      { log: createLogger('info', (l) => lines.push(l)) },
    );
    try {
      const warned = lines.filter((l) => l.includes('needs a key, but its requests go to'));
      expect(warned).toHaveLength(1);
      expect(warned[0]).toContain('"level":"warn"');
      expect(warned[0]).toContain('routes pay and site (production)');
    } finally {
      await t.cleanup();
    }
  });
});
