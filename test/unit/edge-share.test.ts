import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { captureShare, shareOf } from '../../src/edge.js';

const cfg = loadConfig({
  values: {
    capture: { detail: { max_per_second: 1000, max_bytes_per_second: 0 } },
    routes: [
      { name: 'a', prefix: '/a', auth: 'none', origins: { production: 'http://127.0.0.1:1' } },
      {
        name: 'b',
        prefix: '/b',
        auth: 'none',
        origins: { production: 'http://127.0.0.1:1' },
        capture: { detail: { max_per_second: 9, max_bytes_per_second: 0 } },
      },
    ],
  },
  env: { DATA_DIR: '/tmp/unused' },
});

describe('bounds shared out among edge threads', () => {
  it('one thread keeps the config as it is', () => {
    expect(shareOf(cfg, 1)).toBe(cfg);
    expect(captureShare(cfg, 1, true)).toBe(cfg);
  });

  it("capture's disk and memory budgets are split among the edges and the control thread's pipeline", () => {
    for (const shared of [shareOf(cfg, 3), captureShare(cfg, 3, true)]) {
      expect(shared.storage.spool_max_bytes).toBe(Math.ceil(cfg.storage.spool_max_bytes / 4));
      expect(shared.capture.max_buffered_rows).toBe(Math.ceil(cfg.capture.max_buffered_rows / 4));
      expect(shared.capture.detail_max_buffered_bytes).toBe(Math.ceil(cfg.capture.detail_max_buffered_bytes / 4));
    }
  });

  it('detail rates are split among the edges (which serve the routes); 0, no limit, stays 0', () => {
    const edge = shareOf(cfg, 3);
    expect(edge.capture.detail.max_per_second).toBe(334);
    expect(edge.capture.detail.max_bytes_per_second).toBe(0);
    expect(edge.routes.find((r) => r.name === 'a')?.capture.detail).toEqual({});
    expect(edge.routes.find((r) => r.name === 'b')?.capture.detail).toEqual({
      max_per_second: 3,
      max_bytes_per_second: 0,
    });
    // The control thread serves no route: its rates are left as they are.
    expect(captureShare(cfg, 3, true).capture.detail.max_per_second).toBe(1000);
  });

  it('a share is never below 1', () => {
    const tiny = { ...cfg, routes: [{ ...cfg.routes[1], capture: { detail: { max_per_second: 1 } } }] } as typeof cfg;
    expect(shareOf(tiny, 4).routes[0]?.capture.detail.max_per_second).toBe(1);
  });
});
