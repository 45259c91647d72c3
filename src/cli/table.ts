/**
 * Text fit for a terminal: control characters (ESC and the other C0 and C1 codes)
 * shown as `\u{..}`, so a label or consumer can never retitle the terminal or erase
 * lines (an operator's screen is not the API's to drive).
 */
export const printable = (s: string): string => s.replace(CONTROL, (c) => `\\u{${c.charCodeAt(0).toString(16)}}`);
/** C0, DEL and C1. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

/** A plain text table: a header row and aligned columns, for people (scripts use --json). */
export function table(rows: readonly Record<string, unknown>[], columns: readonly string[]): string {
  if (rows.length === 0) return '(none)\n';
  const cell = (v: unknown): string =>
    printable(
      v === null || v === undefined
        ? '-'
        : Array.isArray(v)
          ? v.join(',')
          : typeof v === 'object'
            ? JSON.stringify(v)
            : String(v),
    );
  const data = rows.map((r) => columns.map((c) => cell(r[c])));
  const widths = columns.map((c, i) => Math.max(c.length, ...data.map((d) => (d[i] as string).length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] as number)))
      .join('  ')
      .trimEnd();
  return `${[line(columns.map((c) => c.toUpperCase())), ...data.map(line)].join('\n')}\n`;
}

/** One object as `key: value` lines. */
export function fields(obj: Record<string, unknown>): string {
  const w = Math.max(...Object.keys(obj).map((k) => k.length));
  return `${Object.entries(obj)
    .map(
      ([k, v]) =>
        `${k.padEnd(w)}  ${printable(v === null || v === undefined ? '-' : typeof v === 'object' ? JSON.stringify(v) : String(v))}`,
    )
    .join('\n')}\n`;
}
