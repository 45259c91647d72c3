import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type EventRecord, envelope, eventData, eventLogCodec } from '../../src/events/event.js';

/** Issue #35: an event's data is serialized once, when it is raised; the rest carries that text. */
describe('an event record', () => {
  const records = fc.record({
    id: fc.string(),
    type: fc.string(),
    environment: fc.string(),
    created_at: fc.integer({ min: 0, max: 4_102_444_800_000 }),
    data: fc.dictionary(fc.string(), fc.jsonValue()),
  });

  it('property: the delivery body is the envelope JSON.stringify would make, key order included', () => {
    fc.assert(
      fc.property(records, (r) => {
        const e: EventRecord = { ...r, data: JSON.stringify(r.data) };
        const body = envelope(e);
        expect(body).toBe(
          JSON.stringify({
            id: r.id,
            type: r.type,
            created: Math.floor(r.created_at / 1000),
            environment: r.environment,
            data: JSON.parse(e.data),
          }),
        );
        expect(eventData(e)).toEqual(JSON.parse(e.data));
      }),
      { numRuns: 300 },
    );
  });

  it("property: the log's line reads back as the record, and an earlier version's line (data an object) too", () => {
    fc.assert(
      fc.property(records, (r) => {
        const e: EventRecord = { ...r, data: JSON.stringify(r.data) };
        const line = eventLogCodec.encode(e) as string;
        expect(JSON.parse(line)).toEqual({ ...r, data: JSON.parse(e.data) });
        expect(eventLogCodec.decode(line)).toEqual(e);
        const older = JSON.stringify({ ...r, data: JSON.parse(e.data) });
        expect(eventLogCodec.decode(older)).toEqual(e);
      }),
      { numRuns: 300 },
    );
  });
});
