/**
 * The redacted field names as applications spell them. `access_token`, `accessToken`,
 * `AccessToken`, `access-token` and `ACCESS TOKEN` are one name: compared in lower
 * case with `_ - .` and spaces left out. A nested parameter name is named when any of
 * its parts is (`user.password` as Spring and qs `allowDots` nest, `user[password]`
 * and `a[b][token]` as Rails and PHP do).
 */
export class FieldNames {
  private readonly names: Set<string>;
  /** Whether text mentions any named field in any of its spellings (a cheap first look). */
  private readonly mention: RegExp | null;
  /** A named field written as a JSON key, perhaps inside an escaped JSON string (`\"password\":`). */
  private readonly jsonKey: RegExp | null;
  readonly ascii: boolean;

  constructor(fields: readonly string[]) {
    this.names = new Set(fields.map(normalName).filter((n) => n !== ''));
    const alts = [...this.names].map(spellings).join('|');
    this.mention = alts ? new RegExp(`(?:${alts})`, 'i') : null;
    this.jsonKey = alts ? new RegExp(`"(?:${alts})\\\\*"\\s*:`, 'i') : null;
    this.ascii = fields.every((f) => /^[\x20-\x7e]*$/.test(f));
  }

  /** Whether a field or parameter name (as decoded) is named, whole or by one of its nested parts. */
  has(name: string): boolean {
    if (this.names.has(normalName(name))) return true;
    if (!NESTED.test(name)) return false;
    for (const part of name.split(PARTS)) if (part !== '' && this.names.has(normalName(part))) return true;
    return false;
  }

  /**
   * Whether a name written with separators (`DB_PASSWORD`, `AWS_SECRET_ACCESS_KEY`,
   * `app.api-key`) has a named part, or two adjacent parts that are named together.
   */
  hasPart(name: string): boolean {
    const parts = name.split(PART_SEPARATORS);
    if (parts.length < 2) return false;
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i] as string;
      if (p !== '' && this.names.has(p.toLowerCase())) return true;
      const pair = `${p}${parts[i + 1] ?? ''}`.toLowerCase();
      if (i + 1 < parts.length && this.names.has(pair)) return true;
    }
    return false;
  }

  mentions(text: string): boolean {
    return this.mention?.test(text) === true;
  }

  /** Whether JSON text has a named field as a key (escaped JSON inside strings included). */
  keyed(text: string): boolean {
    return this.jsonKey?.test(text) === true;
  }
}

export const normalName = (n: string): string => n.toLowerCase().replace(SEPARATORS, '');

const SEPARATORS = /[-_. ]/g;
const NESTED = /[.[\]]/;
const PARTS = /[.[\]]+/;
const PART_SEPARATORS = /[-_. ]+/;

/** A pattern of a normalized name's spellings: any separator between any two of its letters. */
function spellings(n: string): string {
  return [...n].map((c) => c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[-_. ]?');
}
