import { GatewayError } from '../errors.js';

const RE2_SPECIAL = /[\\^$.|?*+()[\]{}]/g;

/**
 * Turns a path template into an anchored RE2 pattern: `{name}` matches one
 * segment, a trailing `*` matches any rest, everything else is literal.
 * `/v2/payments/{id}/refunds` matches `/v2/payments/p_1/refunds` only.
 */
export function templateToPattern(template: string): string {
  if (!template.startsWith('/')) throw new GatewayError('invalid_request', 'path: must start with /', 'path');
  if (template.length > 1024) throw new GatewayError('invalid_request', 'path: longer than 1024 characters', 'path');
  let rest = template;
  let tail = '';
  if (rest.endsWith('*')) {
    rest = rest.slice(0, -1);
    tail = '.*';
  }
  if (rest.includes('*')) throw new GatewayError('invalid_request', 'path: * is only allowed at the end', 'path');
  let out = '';
  let i = 0;
  while (i < rest.length) {
    const open = rest.indexOf('{', i);
    if (open === -1) {
      out += rest.slice(i).replace(RE2_SPECIAL, '\\$&');
      break;
    }
    const close = rest.indexOf('}', open);
    if (close === -1 || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(rest.slice(open + 1, close))) {
      throw new GatewayError('invalid_request', 'path: a {name} placeholder is not closed or not a plain name', 'path');
    }
    out += rest.slice(i, open).replace(RE2_SPECIAL, '\\$&');
    out += '[^/]+';
    i = close + 1;
  }
  if (out.includes('}')) throw new GatewayError('invalid_request', 'path: unbalanced }', 'path');
  return `^${out}${tail}$`;
}

/**
 * How a template filters: an exact path when it has no placeholder and no `*`
 * (a plain equality, much cheaper than a regex), else the pattern, with its
 * literal prefix as a cheap pre-filter.
 */
export function templateFilter(template: string): { exact: string | null; prefix: string; pattern: string } {
  const pattern = templateToPattern(template);
  const cut = template.search(/[{*]/);
  return cut === -1
    ? { exact: template, prefix: template, pattern }
    : { exact: null, prefix: template.slice(0, cut), pattern };
}
