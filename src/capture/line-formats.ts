/**
 * Named values in line formats, as YAML, TOML, `.properties`, `.env` and plain text
 * hold them: `name: value`, `name = value`, `name=value`, after `export ` or a list's
 * `- `, with the name quoted or not, and inside flow mappings and inline tables
 * (`{user: a, password: b}`, `db = { password = "b" }`). A value runs to the end of its
 * line (a quoted one to its closing quote); a YAML block scalar (`|`, `>`), a TOML
 * multi-line string and a `.properties` continuation (`\` at the end) take the lines
 * that belong to them.
 */

export interface LineRedaction {
  /** Whether a name (as written, quotes removed) is one whose value is redacted. */
  named(name: string): boolean;
  /** The marker standing for a value. */
  mark(value: string): string;
  /** Counts one named value against the body's budget (throws past it). */
  count(): void;
}

/** Which types are read as lines: untyped and text bodies, YAML, TOML, .properties and .env. */
export const lineTyped = (ct: string): boolean =>
  ct === '' || ct.startsWith('text/') || /yaml|toml|properties|[-.+]env\b/.test(ct);

/** Whether text has a line that could name a value (`name:` or `name=` after a line's start or a `{`/`,`). */
export const hasLines = (text: string): boolean => LOOSE.test(text);
const LOOSE = /(?:^|[\n{,])[ \t]*(?:-[ \t]+)?(?:export[ \t]+)?["']?[\w.[\]-]+["']?[ \t]*[:=]/;

/** A line `name<sep>value`: its lead (indent, `- `, `export `), name (three ways), separator and value. */
const LINE =
  /^([ \t]*(?:-[ \t]+)?(?:export[ \t]+)?)(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s:=#"'{}[\],][^:=]*?))([ \t]*[:=][ \t]*)(.*)$/;
/** A pair inside a flow mapping or inline table. */
const INLINE =
  /([{,][ \t]*)(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([A-Za-z_][\w.-]*))([ \t]*[:=][ \t]*)("(?:[^"\\]|\\.)*"|'[^']*'|[^,}\]]*)/g;
const BLOCK = /^[|>][-+0-9]*[ \t]*(?:#.*)?$/;
const MARKED = /^["']?(?:\[redacted:|%5Bredacted)/;

const indentOf = (line: string): number => line.length - line.trimStart().length;

/** Whether a type is `.properties` (java.util.Properties): a name may end at whitespace alone, and holds escapes. */
export const propertiesTyped = (ct: string): boolean => ct.indexOf('properties') !== -1;

/**
 * A `.properties` line whose name ends at whitespace (`password hunter2`, or `password :
 * x`): the name runs to its first unescaped space, tab or form feed. Not a comment.
 */
const PROPS_LINE = /^([ \t\f]*)((?:[^\s:=#!\\]|\\.)(?:[^\s:=\\]|\\.)*)([ \t\f]+(?:[:=][ \t\f]*)?)(\S.*)$/;
/** A `.properties` name as java.util.Properties reads it: `\uXXXX` and `\x` escapes undone. */
const propsName = (name: string): string =>
  name.indexOf('\\') === -1
    ? name
    : name.replace(/\\(?:u([0-9a-fA-F]{4})|(.))/g, (_, hex?: string, c?: string) =>
        hex !== undefined ? String.fromCharCode(Number.parseInt(hex, 16)) : (c ?? ''),
      );

/**
 * Text with each named value replaced by its marker. `properties`: read as
 * java.util.Properties reads it too (propertiesTyped): names ending at whitespace, escapes in names.
 */
export function redactLines(text: string, r: LineRedaction, properties = false): string {
  const lines = text.split('\n');
  let changed = false;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i] as string;
    const cr = raw.endsWith('\r') ? '\r' : '';
    const line = cr === '' ? raw : raw.slice(0, -1);
    const m = LINE.exec(line) ?? (properties ? propsLine(line) : null);
    let out = line;
    if (m !== null) {
      const written = (m[2] ?? m[3] ?? m[4] ?? '').trim();
      const name = properties ? propsName(written) : written;
      const value = m[6] as string;
      if (name !== '' && r.named(name) && value !== '' && !MARKED.test(value)) {
        r.count();
        const head = line.slice(0, line.length - value.length);
        const taken = following(lines, i, value, indentOf(line));
        const whole = [value, ...lines.slice(i + 1, i + 1 + taken)].join('\n');
        out = `${head}${quoted(value, r.mark(unquote(whole)))}`;
        if (taken > 0) lines.splice(i + 1, taken);
      } else if (name !== '' && value === '' && r.named(name)) {
        // `password:` with its value on the lines below, indented deeper (YAML reads
        // `password:\n  hunter2` as `password: hunter2`; a nested mapping is its value whole).
        const taken = indentedBelow(lines, i, indentOf(line));
        if (taken > 0) {
          r.count();
          const whole = lines
            .slice(i + 1, i + 1 + taken)
            .map((l) => l.trim())
            .join('\n');
          out = `${line}${/[ \t]$/.test(line) ? '' : ' '}${r.mark(unquote(whole))}`;
          lines.splice(i + 1, taken);
        }
      }
    }
    if (out.indexOf('{') !== -1) out = inline(out, r);
    if (out !== line) {
      lines[i] = out + cr;
      changed = true;
    }
  }
  return changed ? lines.join('\n') : text;
}

/** A `.properties` line whose name ends at whitespace, in LINE's groups (name in the 4th, value in the 6th). */
function propsLine(line: string): RegExpExecArray | null {
  const p = PROPS_LINE.exec(line);
  return p === null ? null : ([p[0], p[1], undefined, undefined, p[2], p[3], p[4]] as unknown as RegExpExecArray);
}

/** How many lines after line `i` are indented deeper than `indent` (blank ones among them; not those after the last). */
function indentedBelow(lines: string[], i: number, indent: number): number {
  let n = 0;
  while (i + 1 + n < lines.length) {
    const next = lines[i + 1 + n] as string;
    if (next.trim() !== '' && indentOf(next) <= indent) break;
    n++;
  }
  while (n > 0 && (lines[i + n] as string).trim() === '') n--;
  return n;
}

/** How many lines after line `i` belong to its value: a block scalar's, a multi-line string's, continuations. */
function following(lines: string[], i: number, value: string, indent: number): number {
  let n = 0;
  if (BLOCK.test(value)) {
    while (i + 1 + n < lines.length) {
      const next = lines[i + 1 + n] as string;
      if (next.trim() !== '' && indentOf(next) <= indent) break;
      n++;
    }
    return n;
  }
  const triple = value.startsWith('"""') ? '"""' : value.startsWith("'''") ? "'''" : null;
  if (triple !== null && value.indexOf(triple, 3) === -1) {
    while (i + 1 + n < lines.length) if ((lines[i + 1 + n++] as string).indexOf(triple) !== -1) break;
    return n;
  }
  let last = value;
  while (/(?:^|[^\\])(?:\\\\)*\\\r?$/.test(last) && i + 1 + n < lines.length) last = lines[i + 1 + n++] as string;
  return n;
}

/** The marker in the value's own quotes (so the document still parses). */
function quoted(value: string, marker: string): string {
  const q = value.charAt(0);
  return q === '"' || q === "'" ? `${q}${marker}${q}` : marker;
}

const unquote = (v: string): string => v.replace(/^(["'])([\s\S]*)\1[ \t]*(?:#.*)?$/, '$2');

function inline(line: string, r: LineRedaction): string {
  return line.replace(
    INLINE,
    (all, lead: string, dq?: string, sq?: string, bare?: string, sep?: string, v?: string) => {
      const name = dq ?? sq ?? bare ?? '';
      const value = (v ?? '').trimEnd();
      if (!r.named(name) || value === '' || MARKED.test(value)) return all;
      r.count();
      const rest = (v ?? '').slice(value.length);
      const key = dq !== undefined ? `"${dq}"` : sq !== undefined ? `'${sq}'` : name;
      return `${lead}${key}${sep}${quoted(value, r.mark(unquote(value)))}${rest}`;
    },
  );
}
