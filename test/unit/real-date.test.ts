import { describe, expect, it } from 'vitest';
import { isRealDate } from '../../src/api/parse.js';
import { parseArgs, timeOption } from '../../src/cli/args.js';

describe('isRealDate (the API and the CLI alike)', () => {
  it('takes dates that exist, years 0 to 99 included', () => {
    for (const s of ['2026-11-27T05:00:00Z', '2028-02-29T23:59:59Z', '0050-01-01T00:00:00Z', '0000-03-01T00:00Z'])
      expect(isRealDate(s), s).toBe(true);
  });

  it('refuses what JavaScript would shift: Feb 30, hour 24, minute 60, a 29 February of a common year', () => {
    for (const s of [
      '2027-02-30T00:00:00Z',
      '2026-11-27T24:00:00Z',
      '2026-11-27T10:60:00Z',
      '2027-02-29T00:00Z',
      '0050-02-29T00:00:00Z',
    ])
      expect(isRealDate(s), s).toBe(false);
  });

  it('is what the CLI reads --since with', () => {
    expect(timeOption(parseArgs(['wakes', '--since', '0050-01-01T00:00:00Z']), 'since')?.text).toBe(
      '0050-01-01T00:00:00Z',
    );
    expect(() => timeOption(parseArgs(['wakes', '--since', '2027-02-30T00:00:00Z']), 'since')).toThrow();
  });
});
