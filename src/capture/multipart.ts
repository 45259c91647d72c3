/**
 * multipart/form-data (RFC 7578) as servers read it: parts split on the boundary of
 * the Content-Type's own `boundary` parameter (not `xboundary`), with CRLF or bare LF
 * line ends (many parsers accept both), and each part's field name from `name="…"`
 * or the RFC 2231 form `name*=utf-8''…`. Where parsers read a part's name differently
 * (PHP reads `name=` only and unquotes `'…'`; Werkzeug takes the last parameter;
 * others take `name*=` first), every reading is given.
 */

/** The boundary of a multipart Content-Type: its own parameter, quoted or not. */
export function boundaryOf(contentType: string): string | null {
  const m = BOUNDARY.exec(contentType);
  return m === null ? null : (m[1] ?? m[2] ?? null);
}

const BOUNDARY = /(?:^|;)\s*boundary\s*=\s*(?:"([^"]+)"|([^\s;]+))/i;
const DISPOSITION = /(?:^|\n)content-disposition:[^\r\n]*/i;
const PART_NAMES = /(?:^|[;\s])name\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))/gi;
const PART_NAMES_EXT = /(?:^|[;\s])name\*\s*=\s*([^\s;]+)/gi;

/** One part of a multipart body, as offsets into its text. */
export interface Part {
  /** Where the part's content starts and ends (before the line end of the next delimiter). */
  start: number;
  end: number;
  /** The field name as each common parser reads it (decoded; none when it has no name). */
  names: readonly string[];
  /** The part's own Content-Type ('' for none): a multipart one nests parts (RFC 2388 §5.4). */
  type: string;
}

/**
 * The parts of a multipart body (latin1 text, so bytes stay bytes). `each` is told
 * of every part before the next is looked for (it may stop the walk by throwing).
 */
export function eachPart(text: string, boundary: string, each: (p: Part) => void): void {
  const delimiter = `--${boundary}`;
  let at = delimiterAt(text, delimiter, 0);
  while (at !== -1) {
    const from = at + delimiter.length;
    if (text.startsWith('--', from)) return;
    const next = delimiterAt(text, delimiter, from);
    // The content ends before the line end that precedes the next delimiter (CRLF or LF).
    let end = next === -1 ? text.length : next;
    if (next !== -1 && text.charCodeAt(end - 1) === 10) end -= text.charCodeAt(end - 2) === 13 ? 2 : 1;
    const crlf = text.indexOf('\r\n\r\n', from);
    const lf = text.indexOf('\n\n', from);
    let sep = -1;
    let sepLen = 0;
    if (crlf !== -1 && (lf === -1 || crlf <= lf)) {
      sep = crlf;
      sepLen = 4;
    } else if (lf !== -1) {
      sep = lf;
      sepLen = 2;
    }
    if (sep !== -1 && sep < end) {
      const headers = text.slice(from, sep);
      each({ start: sep + sepLen, end, names: partNames(headers), type: partType(headers) });
    }
    at = next;
  }
}

/**
 * The next delimiter at or after `from` as RFC 2046 has it: at a line start (the body's
 * start, or after CRLF or a bare LF) and followed by `--`, padding or a line end. The
 * boundary's characters elsewhere (mid-line in a value, or as the start of a longer
 * word) are content, as the origin's parser reads them.
 */
function delimiterAt(text: string, delimiter: string, from: number): number {
  for (let at = text.indexOf(delimiter, from); at !== -1; at = text.indexOf(delimiter, at + 1)) {
    if (at !== 0 && text.charCodeAt(at - 1) !== 10) continue;
    const end = at + delimiter.length;
    const c = text.charCodeAt(end);
    // CR, LF, space, tab, the close's `--`, or the end of what was kept.
    if (Number.isNaN(c) || c === 13 || c === 10 || c === 32 || c === 9 || text.startsWith('--', end)) return at;
  }
  return -1;
}

/**
 * A part's field name from its headers, as each parser may read it: every `name*=`
 * (RFC 2231) and every `name=` (the first or the last; quoted with `"`, or unquoted,
 * its single quotes kept or taken off as PHP does).
 */
function partNames(headers: string): string[] {
  // A header folded onto lines that start with a space or tab (obsolete, RFC 5322 §2.2.3) is
  // one line to the parsers that unfold it (dicer: busboy 0.x, @fastify/busboy, older multer).
  const d = DISPOSITION.exec(FOLDED.test(headers) ? headers.replace(FOLDS, ' ') : headers);
  if (d === null) return NO_NAMES;
  const out: string[] = [];
  for (const m of d[0].matchAll(PART_NAMES_EXT)) out.push(extValue(m[1] as string));
  for (const m of d[0].matchAll(PART_NAMES)) {
    if (m[1] !== undefined) {
      // Browsers percent-encode quotes and line breaks in names; older senders escape with backslashes.
      out.push(percentDecode(m[1].replace(/\\(.)/g, '$1')));
      continue;
    }
    const raw = m[2] as string;
    out.push(percentDecode(raw));
    if (raw.length > 1 && raw.startsWith("'") && raw.endsWith("'")) out.push(percentDecode(raw.slice(1, -1)));
  }
  return out;
}
const NO_NAMES: string[] = [];
const CONTENT_TYPE = /(?:^|\n)content-type:[ \t]*([^\r\n]*(?:\r?\n[ \t][^\r\n]*)*)/i;

/** A part's Content-Type header (unfolded), or ''. */
function partType(headers: string): string {
  const m = CONTENT_TYPE.exec(headers);
  return m === null ? '' : (m[1] as string).replace(FOLDS, ' ').trim();
}
const FOLDED = /\n[ \t]/;
const FOLDS = /\r?\n[ \t]+/g;

/** An RFC 2231/5987 value: `charset'lang'percent-encoded`. */
function extValue(v: string): string {
  const q = v.indexOf("'");
  const q2 = q === -1 ? -1 : v.indexOf("'", q + 1);
  return percentDecode(q2 === -1 ? v : v.slice(q2 + 1));
}

function percentDecode(s: string): string {
  if (s.indexOf('%') === -1) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return s.replace(/%([0-9a-f]{2})/gi, (_m, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
  }
}
