/**
 * Text fit for a terminal: control characters (ESC and the other C0 and C1 codes)
 * shown as `\u{..}`, so a label or consumer can never retitle the terminal or erase
 * lines (an operator's screen is not the API's to drive).
 */
export const printable = (s: string): string => s.replace(CONTROL, escaped);
/**
 * The same, keeping line breaks (a body's lines, shown as lines): every other control
 * character still escaped.
 */
export const printableLines = (s: string): string => s.replace(/\r\n/g, '\n').replace(CONTROL_NOT_LF, escaped);
const escaped = (c: string): string => `\\u{${(c.codePointAt(0) as number).toString(16)}}`;
/**
 * C0, DEL and C1; and the bidirectional controls (U+200E, U+200F, U+202A to U+202E, U+2066
 * to U+2069), which would have the terminal draw the rest of a line in another order: a
 * label `deploy<U+202E>nimda` reads as "deployadmin".
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL_NOT_LF = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * The columns a terminal draws `s` in: combining marks and zero-width characters take
 * none, East Asian wide and fullwidth characters (CJK, kana, Hangul, fullwidth forms)
 * and emoji two, the rest one.
 */
export function columnsOf(s: string): number {
  let n = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0) as number;
    if (ZERO_WIDTH.test(ch)) continue;
    n += WIDE.test(ch) || (c >= 0x1f300 && c <= 0x1faff) ? 2 : 1;
  }
  return n;
}
const ZERO_WIDTH = /^[\p{Mn}\p{Me}\u200b-\u200d\u2060\ufeff]$/u;
const WIDE =
  /^[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6\u{20000}-\u{3fffd}]$/u;

/** `s` padded with spaces to `width` terminal columns. */
const padColumns = (s: string, width: number): string => s + ' '.repeat(Math.max(0, width - columnsOf(s)));

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
  const widths = columns.map((c, i) => Math.max(c.length, ...data.map((d) => columnsOf(d[i] as string))));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : padColumns(c, widths[i] as number)))
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
