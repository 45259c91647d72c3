import { z } from 'zod';
import { GatewayError } from '../errors.js';

/**
 * Whether an ISO 8601 text names a real calendar date and time: JavaScript's parser
 * shifts 2027-02-30 to March 2 and 24:00 to the next day, which a user never meant.
 */
export function isRealDate(s: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?/.exec(s);
  if (m === null) return false;
  const [y, mo, d, h, mi, se] = m.slice(1).map((x) => Number(x ?? 0)) as number[];
  const t = new Date(Date.UTC(y as number, (mo as number) - 1, d, h, mi, se));
  return (
    t.getUTCFullYear() === y &&
    t.getUTCMonth() === (mo as number) - 1 &&
    t.getUTCDate() === d &&
    t.getUTCHours() === h &&
    t.getUTCMinutes() === mi &&
    t.getUTCSeconds() === se
  );
}

/** A query parameter holding a whole number in [min, max]. */
export const intParam = (min: number, max: number) =>
  z
    .string()
    .regex(/^-?\d{1,10}$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`))
    // What the OpenAPI document says of it: an integer in [min, max] (sent as text in a query).
    .meta({ type: 'integer', minimum: min, maximum: max });

function paramOf(issue: z.core.$ZodIssue, prefix: string): string {
  if (issue.code === 'unrecognized_keys') return [...issue.path, issue.keys[0]].join('.') || prefix;
  const p = issue.path
    .map((s, i) => (typeof s === 'number' ? `[${s}]` : i === 0 ? String(s) : `.${String(s)}`))
    .join('');
  return p || prefix;
}

function describe(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') return `unknown parameter ${JSON.stringify(issue.keys[0])}`;
  if (issue.code === 'invalid_type' && issue.input === undefined) return 'is required';
  return issue.message;
}

/**
 * Parses input with a schema; the first problem becomes 400 invalid_request naming
 * the offending parameter (`param`).
 */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, what: 'query' | 'body'): z.output<S> {
  if (what === 'body' && (input === undefined || input === null)) input = {};
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const issue = r.error.issues[0] as z.core.$ZodIssue;
  const param = paramOf(issue, what);
  throw new GatewayError('invalid_request', `${param}: ${describe(issue)}`, param);
}
