// Regression tests from a review of the CLI (2026-11-28): tables with wide and combining characters.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wakegate } from '../helpers/cli-run.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * The columns a terminal shows a string in: a combining mark takes none, an East Asian
 * wide or fullwidth character (CJK, kana, hangul, fullwidth forms) two, anything else one.
 * Enough for the labels below; it is what wcwidth(3) answers for them.
 */
function columns(s: string): number {
  let n = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0) as number;
    if (/\p{M}/u.test(ch)) continue;
    const wide =
      (c >= 0x1100 && c <= 0x115f) ||
      (c >= 0x2e80 && c <= 0xa4cf) ||
      (c >= 0xac00 && c <= 0xd7a3) ||
      (c >= 0xf900 && c <= 0xfaff) ||
      (c >= 0xfe30 && c <= 0xfe4f) ||
      (c >= 0xff00 && c <= 0xff60) ||
      (c >= 0xffe0 && c <= 0xffe6);
    n += wide ? 2 : 1;
  }
  return n;
}

/**
 * src/cli/table.ts pads each cell with String.prototype.padEnd and measures it with
 * .length (UTF-16 code units), not with the columns a terminal gives it. A label of
 * Japanese text (`東京チーム`: 5 code units, 10 columns) pushes every later column of its
 * row five columns to the right; `x\u0301` (x with a combining acute accent, which has no precomposed form, so the
 * API's NFC keeps it: 2 code units, 1 column) pulls its row one column to the left. An operator reading `keys list` sees the
 * ENVIRONMENT, CONSUMER and STATUS of those keys under the wrong headings.
 */
describe('keys list aligns its columns as the terminal shows them', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startGateway();
    for (const label of ['東京チーム', 'x\u0301 ops', 'plain']) {
      await t.gw.keys.create({ label, environment: 'production', scopes: ['wakes:read'] }, 'production');
    }
  }, 60_000);
  afterAll(async () => {
    await t.cleanup();
  });

  it('puts ENVIRONMENT at the same terminal column on every row, whatever the label holds', async () => {
    const r = await wakegate(['keys', 'list'], { WAKEGATE_URL: t.url, WAKEGATE_KEY: t.admin });
    expect(r.code, r.stderr).toBe(0);
    const rows = r.stdout.trimEnd().split('\n');
    const header = rows[0] as string;
    const at = header.indexOf('ENVIRONMENT');
    expect(at).toBeGreaterThan(0);
    // Where each row's "production" (its ENVIRONMENT cell) starts, in terminal columns.
    const starts = Object.fromEntries(
      rows.slice(1).map((row) => {
        const i = row.indexOf('production');
        return [row.split(/\s{2,}/)[1], columns(row.slice(0, i))];
      }),
    );
    expect(starts).toEqual({ 'bootstrap admin': at, 東京チーム: at, 'x\u0301 ops': at, plain: at });
  }, 60_000);
});
