import { describe, expect, it } from 'vitest';
import { parseArgs, timeOption } from '../../src/cli/args.js';

describe('timeOption (src/cli/args.ts): times the CLI reads', () => {
  it('reads a valid ISO 8601 time with a zone in a year before 100', () => {
    // Date.UTC maps years 0..99 to 1900..1999, so realDate() refuses a time that Date.parse reads.
    const v = '0050-06-01T00:00:00Z';
    expect(Date.parse(v)).toBe(Date.parse('0050-06-01T00:00:00.000Z'));
    const args = parseArgs(['wakes', 'list', '--since', v]);
    expect(timeOption(args, 'since')).toEqual({ text: v, ms: Date.parse(v) });
  });
});
