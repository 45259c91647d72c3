import type { WalCodec } from '../capture/wal.js';

/** An event as it is raised, recorded and fanned out (SPEC.md's event envelope without its delivery fields). */
export interface EventRecord {
  id: string;
  type: string;
  environment: string;
  /** Milliseconds since the epoch. */
  created_at: number;
  /**
   * The event's data as JSON text: serialized once, when the event is raised, then
   * written to the log, stored and put in each delivery's body as it is.
   */
  data: string;
}

/** An event with its data read back as an object (what a reader of the table inspects). */
export type EventView = Omit<EventRecord, 'data'> & { data: Record<string, unknown> };

/** An event's data, read back (for a rule that looks inside one, and for tests). */
export const eventData = (e: Pick<EventRecord, 'data'>): Record<string, unknown> =>
  JSON.parse(e.data) as Record<string, unknown>;

/** The body of a delivery: DESIGN.md's event envelope, around the data as it was serialized. */
export function envelope(e: EventRecord): string {
  return `{"id":${JSON.stringify(e.id)},"type":${JSON.stringify(e.type)},"created":${Math.floor(e.created_at / 1000)},"environment":${JSON.stringify(e.environment)},"data":${e.data}}`;
}

/**
 * The events' write-ahead log line: the data goes in as the JSON it already is. A line
 * read back (after a crash) gets its data re-serialized, as every earlier version's
 * line held it as an object.
 */
export const eventLogCodec: WalCodec<EventRecord> = {
  encode: (e) =>
    `{"id":${JSON.stringify(e.id)},"type":${JSON.stringify(e.type)},"environment":${JSON.stringify(e.environment)},"created_at":${e.created_at},"data":${e.data}}`,
  decode: (line) => {
    const r = JSON.parse(line) as Omit<EventRecord, 'data'> & { data: unknown };
    return { ...r, data: typeof r.data === 'string' ? r.data : JSON.stringify(r.data) };
  },
};
