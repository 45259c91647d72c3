/**
 * A caller's `tracestate` as the gateway passes it on when it takes part in the trace
 * (W3C Trace Context Level 1 §3.3): its fields joined into one list (§3.3.1: several
 * fields are one list), malformed and repeated members dropped (§3.3.1.3 keys, §3.3.1.4
 * values, keys unique), at most 32 members, and at most 512 characters, reached by first
 * dropping members longer than 128 (from the end, until it fits) and then members from
 * the end (§3.3.1.5). An origin's
 * tracer that finds a list past those bounds may throw the whole of it away (OpenTelemetry's
 * does), which loses every vendor's entry, not only the bad one's. Null when nothing is left.
 */

const MAX_MEMBERS = 32;
const MAX_LENGTH = 512;
const LONG_MEMBER = 128;

// simple-key, or tenant-id "@" system-id (§3.3.1.3.1).
const KEY = /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})$/;
// Printable ASCII but `,` and `=`, not ending in a space (§3.3.1.3.2).
const VALUE = /^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/** The caller's tracestate fields as one bounded list (see above), or null when none of it is kept. */
export function boundTracestate(fields: readonly string[]): string | null {
  const members: string[] = [];
  const keys = new Set<string>();
  for (const field of fields) {
    for (const part of field.split(',')) {
      const m = part.trim();
      if (m === '') continue; // empty members are allowed and mean nothing (§3.3.1.2)
      const eq = m.indexOf('=');
      if (eq <= 0) continue;
      const key = m.slice(0, eq);
      if (keys.has(key) || !KEY.test(key) || !VALUE.test(m.slice(eq + 1))) continue;
      keys.add(key);
      members.push(m);
    }
  }
  if (members.length > MAX_MEMBERS) members.length = MAX_MEMBERS;
  return members.length === 0 ? null : withinLength(members);
}

/**
 * The list joined, shortened to MAX_LENGTH as §3.3.1.5 says: members longer than 128 go
 * first, from the end, only until it fits; then members from the end.
 */
function withinLength(members: string[]): string | null {
  let length = joinedLength(members);
  for (let i = members.length - 1; i >= 0 && length > MAX_LENGTH; i--) {
    const m = members[i] as string;
    if (m.length <= LONG_MEMBER) continue;
    members.splice(i, 1);
    length -= m.length + (members.length > 0 ? 1 : 0);
  }
  while (length > MAX_LENGTH && members.length > 0) {
    const last = members.pop() as string;
    length -= last.length + (members.length > 0 ? 1 : 0);
  }
  return members.length === 0 ? null : members.join(',');
}

function joinedLength(members: readonly string[]): number {
  let n = members.length > 0 ? members.length - 1 : 0;
  for (const m of members) n += m.length;
  return n;
}
