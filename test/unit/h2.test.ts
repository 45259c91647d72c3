import { describe, expect, it } from 'vitest';
import { originHeaders } from '../../src/h2/fields.js';
import { RESET_WINDOW_MS, ResetWindow } from '../../src/h2/resets.js';

describe('HTTP/2 rapid-reset window', () => {
  it('allows max_resets_per_10s in a window, refuses the next, and starts over after 10 s', () => {
    const w = new ResetWindow(3);
    const t0 = 1_000_000;
    expect([w.reset(t0), w.reset(t0 + 1), w.reset(t0 + 2)]).toEqual([false, false, false]);
    expect(w.reset(t0 + 3)).toBe(true);
    expect(w.reset(t0 + RESET_WINDOW_MS - 1)).toBe(true);
    expect(w.reset(t0 + RESET_WINDOW_MS)).toBe(false);
  });
});

describe('HTTP/2 request fields for an HTTP/1.1 origin', () => {
  it('drops pseudo-headers, gives :authority as Host, joins Cookie fields (RFC 9113 §8.2.3)', () => {
    const raw = [
      ':method',
      'GET',
      ':authority',
      'api.example',
      ':path',
      '/x',
      'cookie',
      'a=1',
      'x-y',
      'z',
      'cookie',
      'b=2',
    ];
    expect(originHeaders(raw)).toEqual(['cookie', 'a=1; b=2', 'x-y', 'z', 'host', 'api.example']);
  });

  it('keeps a Host the client sent itself', () => {
    expect(originHeaders([':authority', 'a.example', 'host', 'b.example'])).toEqual(['host', 'b.example']);
  });
});
