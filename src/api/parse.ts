import { z } from 'zod';
import { GatewayError } from '../errors.js';

export { isRealDate } from '../real-date.js';

/**
 * A query parameter holding a whole number in [min, max]. Any number of digits is read (as a
 * BigInt), so a value far past a bound is told that bound, not that it is no whole number.
 */
export const intParam = (min: number, max: number) =>
  z
    .string()
    .regex(/^-?\d+$/, 'must be a whole number')
    .transform((s, ctx) => {
      const n = BigInt(s);
      const message = n < BigInt(min) ? `must be at least ${min}` : n > BigInt(max) ? `must be at most ${max}` : null;
      if (message === null) return Number(n);
      ctx.addIssue({ code: 'custom', message, input: s });
      return z.NEVER;
    })
    // What the OpenAPI document says of it: an integer in [min, max] (sent as text in a query).
    .meta({ type: 'integer', minimum: min, maximum: max });

function paramOf(issue: z.core.$ZodIssue, prefix: string): string {
  if (issue.code === 'unrecognized_keys') return [...issue.path, issue.keys[0]].join('.') || prefix;
  const p = issue.path
    .map((s, i) => (typeof s === 'number' ? `[${s}]` : i === 0 ? String(s) : `.${String(s)}`))
    .join('');
  return p || prefix;
}

/** What a schema node expects, in words (zod's `expected`). */
const KIND: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'a whole number',
  boolean: 'a boolean (true or false)',
  object: 'a JSON object',
  record: 'a JSON object',
  array: 'an array',
};

/** What a JSON value is, in words. */
function kindOfValue(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'string') return 'a string';
  if (typeof v === 'boolean') return 'a boolean';
  return `a ${typeof v}`;
}

/** Whether the raw input holds a key at `path` (own keys only), and its value. */
function at(input: unknown, path: readonly PropertyKey[]): { present: boolean; value: unknown } {
  let cur = input;
  for (const s of path) {
    if (cur === null || typeof cur !== 'object' || !Object.hasOwn(cur, s)) return { present: false, value: undefined };
    cur = (cur as Record<PropertyKey, unknown>)[s];
  }
  return { present: cur !== undefined, value: cur };
}

/**
 * The problem in words: `is required` only when the key is absent; a key given with
 * a value of the wrong type `must be a <type>, not <what it is>`; a query parameter
 * given twice (which arrives as a list) `is given more than once`.
 */
function describe(issue: z.core.$ZodIssue, input: unknown, what: 'query' | 'body'): string {
  if (issue.code === 'unrecognized_keys') return `unknown parameter ${JSON.stringify(issue.keys[0])}`;
  const { present, value } = at(input, issue.path);
  if (!present) return 'is required';
  if (issue.code !== 'invalid_type') return issue.message;
  if (what === 'query' && issue.path.length === 1 && Array.isArray(value) && issue.expected !== 'array')
    return 'is given more than once';
  return `must be ${KIND[issue.expected] ?? issue.expected}, not ${kindOfValue(value)}`;
}

/**
 * Parses input with a schema; the first problem (a parameter it does not take, before
 * any other) becomes 400 invalid_request naming the offending parameter (`param`).
 */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, what: 'query' | 'body'): z.output<S> {
  if (what === 'body' && (input === undefined || input === null)) input = {};
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  // A field the operation does not take is said first: what was sent by mistake, not a
  // field it takes that the mistake left out (PATCH {"label": …} is no tls_fingerprint missing).
  const issues = r.error.issues;
  const issue = (issues.find((i) => i.code === 'unrecognized_keys') ?? issues[0]) as z.core.$ZodIssue;
  const param = paramOf(issue, what);
  throw new GatewayError('invalid_request', `${param}: ${describe(issue, input, what)}`, param);
}
