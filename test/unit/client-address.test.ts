import { describe, expect, it } from 'vitest';
import { clientAddress } from '../../src/admission/client-address.js';
import { trustedProxies } from '../../src/proxy/trust.js';

const trusted = trustedProxies(['10.0.0.0/8', '2001:db8::/32']);

describe('the client address behind trusted proxies', () => {
  it('is the connection address unless that is a trusted proxy with X-Forwarded-For', () => {
    expect(clientAddress('192.0.2.7', '198.51.100.1', trusted)).toBe('192.0.2.7');
    expect(clientAddress('10.0.0.2', undefined, trusted)).toBe('10.0.0.2');
    expect(clientAddress('10.0.0.2', '198.51.100.1', trusted)).toBe('198.51.100.1');
  });

  it('reads from the right, past trusted hops, and never what a client wrote to the left', () => {
    expect(clientAddress('10.0.0.2', '6.6.6.6, 198.51.100.1, 10.0.0.9', trusted)).toBe('198.51.100.1');
    expect(clientAddress('10.0.0.2', ['6.6.6.6', '198.51.100.1'], trusted)).toBe('198.51.100.1');
    // Every hop trusted: the leftmost.
    expect(clientAddress('10.0.0.2', '10.1.1.1, 10.0.0.9', trusted)).toBe('10.1.1.1');
  });

  it('takes addresses with ports or brackets, and stops at anything that is not an address', () => {
    expect(clientAddress('10.0.0.2', '198.51.100.1:4321', trusted)).toBe('198.51.100.1');
    expect(clientAddress('10.0.0.2', '[2001:dead::1]:443', trusted)).toBe('2001:dead::1');
    expect(clientAddress('10.0.0.2', '2001:dead::1', trusted)).toBe('2001:dead::1');
    expect(clientAddress('10.0.0.2', 'unknown', trusted)).toBe('10.0.0.2');
    expect(clientAddress('10.0.0.2', 'x, 10.0.0.9', trusted)).toBe('10.0.0.9');
    expect(clientAddress('10.0.0.2', ' , ', trusted)).toBe('10.0.0.2');
    expect(clientAddress('10.0.0.2', '', trusted)).toBe('10.0.0.2');
  });
});
