import { describe, expect, it } from 'vitest';
import { isRefused } from '../../src/capture/batcher.js';
import { refusalMarked, refusesValues } from '../../src/store/refusal.js';

describe('storage refusing a batch for good', () => {
  it('is told by a ClickHouse server error type about values', () => {
    expect(refusesValues({ type: 'CANNOT_PARSE_INPUT_ASSERTION_FAILED', message: 'x' })).toBe(true);
    expect(refusesValues({ type: 'VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE', message: 'x' })).toBe(true);
    // About the server's state, not the batch: tried again.
    for (const type of ['MEMORY_LIMIT_EXCEEDED', 'TOO_MANY_PARTS', 'UNKNOWN_TABLE', 'TIMEOUT_EXCEEDED'])
      expect(refusesValues({ type, message: 'Code: 241. DB::Exception: Memory limit exceeded' })).toBe(false);
  });

  it('is told by the embedded engine’s message, which carries no code', () => {
    expect(refusesValues(new Error("Cannot parse input: expected '\\t' before: 'e3'"))).toBe(true);
    expect(refusesValues(new Error('Code: 27. DB::Exception: Cannot parse input: expected'))).toBe(true);
    expect(refusesValues(new Error('connect ECONNREFUSED 127.0.0.1:8123'))).toBe(false);
    expect(refusesValues(new Error('insert timed out after 30000 ms'))).toBe(false);
    expect(refusesValues(null)).toBe(false);
  });

  it('marks such an error so the batcher can tell it, and passes any other as it is', async () => {
    const parse = new Error('Cannot parse input: expected');
    await expect(refusalMarked(() => Promise.reject(parse))).rejects.toSatisfy(isRefused);
    const down = new Error('socket hang up');
    await expect(refusalMarked(() => Promise.reject(down))).rejects.toBe(down);
    expect(await refusalMarked(async () => 7)).toBe(7);
  });
});
