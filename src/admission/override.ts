/**
 * Method override headers: X-HTTP-Method-Override (Express's method-override, Laravel,
 * Symfony, Rails, Google APIs), X-HTTP-Method (OData) and X-Method-Override. An origin
 * that honours one runs the method it names, not the request line's, so a GET carrying
 * `X-HTTP-Method-Override: DELETE` is a DELETE to it. Such a request needs what its
 * strictest reading needs: any element of any such header (several lines, comma lists)
 * that is not a read method makes it a write. The header is never stripped (clients
 * behind proxies that pass only GET and POST rely on it).
 *
 * Names are matched without case and with `_` as `-`: a CGI-style origin (PHP, Rack,
 * WSGI) reads `X_HTTP_Method_Override` as HTTP_X_HTTP_METHOD_OVERRIDE too.
 */

const NAMES = ['x-http-method', 'x-method-override', 'x-http-method-override'] as const;

/** Whether `name` is one of the override headers, in any case and with `_` for `-`; no allocation. */
export function isOverrideName(name: string): boolean {
  const n = name.length;
  // 13, 17 and 22 characters, starting with x: most names are out at the first test.
  const want = n === 13 ? NAMES[0] : n === 17 ? NAMES[1] : n === 22 ? NAMES[2] : null;
  if (want === null || (name.charCodeAt(0) | 32) !== 120) return false;
  for (let i = 1; i < n; i++) {
    let c = name.charCodeAt(i);
    if (c === 95) c = 45;
    else if (c >= 65 && c <= 90) c |= 32;
    if (c !== want.charCodeAt(i)) return false;
  }
  return true;
}

/** Whether `v[s..e)` is GET, HEAD or OPTIONS, without case. */
function readAt(v: string, s: number, e: number): boolean {
  const want = e - s === 3 ? 'get' : e - s === 4 ? 'head' : e - s === 7 ? 'options' : null;
  if (want === null) return false;
  for (let i = s; i < e; i++) {
    const c = v.charCodeAt(i);
    if ((c >= 65 && c <= 90 ? c | 32 : c) !== want.charCodeAt(i - s)) return false;
  }
  return true;
}

const isOws = (c: number): boolean => c === 32 || c === 9;

/**
 * Whether one override header value names a method that is not a read: any element of
 * its comma list, trimmed of spaces and tabs, other than GET, HEAD or OPTIONS (in any
 * case). Empty elements are no method (RFC 9110 §5.6.1): a value of only those is none.
 */
export function overridesToWrite(v: string): boolean {
  const n = v.length;
  let i = 0;
  while (i <= n) {
    let j = v.indexOf(',', i);
    if (j === -1) j = n;
    let s = i;
    let e = j;
    while (s < e && isOws(v.charCodeAt(s))) s++;
    while (e > s && isOws(v.charCodeAt(e - 1))) e--;
    if (e > s && !readAt(v, s, e)) return true;
    i = j + 1;
  }
  return false;
}

/**
 * Whether the header lines `raw` (name, value, name, value..., as node's rawHeaders)
 * carry an override to a method that is not a read. One pass over the names; nothing
 * is allocated.
 */
export function rawOverridesToWrite(raw: readonly string[]): boolean {
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (isOverrideName(raw[i] as string) && overridesToWrite(raw[i + 1] as string)) return true;
  }
  return false;
}

/** The same of header pairs, as a wake's detail keeps them (null: none kept). */
export function pairsOverrideToWrite(headers: readonly (readonly [string, string])[] | null): boolean {
  if (headers === null) return false;
  for (const [name, value] of headers) if (isOverrideName(name) && overridesToWrite(value)) return true;
  return false;
}

/** The same of a headers object (node's IncomingHttpHeaders: repeated lines joined, or a list). */
export function objectOverridesToWrite(headers: Readonly<Record<string, string | string[] | undefined>>): boolean {
  for (const name in headers) {
    if (!isOverrideName(name)) continue;
    const v = headers[name];
    if (v === undefined) continue;
    if (typeof v === 'string' ? overridesToWrite(v) : v.some(overridesToWrite)) return true;
  }
  return false;
}
