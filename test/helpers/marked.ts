import fc from 'fast-check';

/** JSON bodies with redacted fields, and where their markers stand: for replay tests. */
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** A redaction marker and nothing else. */
export const WHOLE = /^\[redacted:[0-9a-f]{12}\]$/;
/** Field names a body is made of: some redacted (with the default redact_fields), some not. */
export const REDACTED = ['password', 'secret', 'token', 'card_number', 'cvc'];
export const NAMES = ['amount', 'name', 'note', 'card', 'items', ...REDACTED];

export const word = fc.stringMatching(/^[A-Za-z0-9]{1,8}$/);
export const scalar = fc.oneof(word, fc.integer({ min: -999, max: 9999 }), fc.boolean(), fc.constant(null));
/** A JSON object of NAMES, nested a little. */
export const { doc } = fc.letrec<{ doc: Json; value: Json }>((tie) => ({
  doc: fc.dictionary(fc.constantFrom(...NAMES), tie('value'), { minKeys: 1, maxKeys: 5 }),
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalar,
    fc.array(tie('value'), { maxLength: 3 }),
    tie('doc'),
  ),
}));

const pathOf = (base: string, key: string): string =>
  /^[A-Za-z_$][\w$]*$/.test(key) ? `${base}.${key}` : `${base}[${JSON.stringify(key)}]`;

/** Every JSON path whose value is a marker, with the value at the same path in `plain`. */
export function markedPaths(marked: Json, plain: Json, path = '$', out = new Map<string, Json>()): Map<string, Json> {
  if (typeof marked === 'string' && WHOLE.test(marked)) out.set(path, plain);
  else if (Array.isArray(marked)) {
    for (const [i, x] of marked.entries()) markedPaths(x, (plain as Json[])[i] as Json, `${path}[${i}]`, out);
  } else if (marked !== null && typeof marked === 'object')
    for (const [k, x] of Object.entries(marked))
      markedPaths(x, (plain as Record<string, Json>)[k] as Json, pathOf(path, k), out);
  return out;
}

/** `plain` with the values at `paths` replaced from `set`. */
export function replaced(plain: Json, set: Record<string, unknown>, paths: Set<string>, path = '$'): unknown {
  if (paths.has(path)) return set[path];
  if (Array.isArray(plain)) return plain.map((x, i) => replaced(x, set, paths, `${path}[${i}]`));
  if (plain !== null && typeof plain === 'object')
    return Object.fromEntries(Object.entries(plain).map(([k, x]) => [k, replaced(x, set, paths, pathOf(path, k))]));
  return plain;
}
