import type { DetailSalts } from '../capture/detail.js';

/**
 * How a replay's own wake is marked. Without `set`, as the wake it replays (its id is
 * the salt), so the two diff equal for equal values. With `set`, the values the caller
 * supplied (`values`, in every spelling the redactor meets them in: as given,
 * percent-encoded in a query or form, escaped in JSON text) and everything redacted in
 * the answer (which may echo them, or something the origin derived from them) are
 * marked with the replay's own id: no replay tells its caller whether a guess equals
 * the original value.
 */
export function replaySalts(originalId: string, ownId: string, values: readonly string[]): DetailSalts {
  if (values.length === 0) return { request: originalId, response: originalId, fresh: null };
  const spelled = new Set<string>();
  for (const v of values) {
    spelled.add(v);
    spelled.add(encodeURIComponent(v));
    spelled.add(JSON.stringify(v).slice(1, -1));
  }
  return { request: originalId, response: ownId, fresh: { salt: ownId, values: spelled } };
}
