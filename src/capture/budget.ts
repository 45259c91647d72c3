import { createHash } from 'node:crypto';
import type { CapturedBody } from './detail-types.js';

/**
 * What reading one captured body may cost. A body is redacted on the main thread
 * once its exchange has ended, so a few hostile bytes must never buy much work:
 * a 33-byte brotli body that decodes to 1 MiB of escaped keys once cost 190 ms. Past
 * any budget the body is kept only as its size and SHA-256, with the reason.
 */
export interface BodyBudget {
  /** Bytes a compressed body may decode to (twice the route's max_body_bytes). */
  maxDecoded: number;
  /** Decoded bytes per compressed byte, past the first 8 KiB. */
  maxRatio: number;
  /** Nesting of JSON (and of JSON inside strings, forms and queries) followed. */
  maxDepth: number;
  /** Pattern matches, parameters, parts and nested documents looked at. */
  maxMatches: number;
  /** Values replaced by a marker (each an HMAC). */
  maxMarkers: number;
}

export const budgetFor = (maxBodyBytes: number): BodyBudget => ({
  maxDecoded: Math.max(2 * maxBodyBytes, 16_384),
  maxRatio: 200,
  maxDepth: 32,
  maxMatches: 1024,
  maxMarkers: 256,
});

/** A body over one of its budgets: kept as size and hash, `reason` saying which. */
export class OverBudget extends Error {
  constructor(readonly reason: string) {
    super(reason);
  }
}

/** The spending of one body's budget. */
export class Work {
  matches = 0;
  markers = 0;
  constructor(readonly b: BodyBudget) {}

  match(n = 1): void {
    this.matches += n;
    if (this.matches > this.b.maxMatches) throw new OverBudget(`more than ${this.b.maxMatches} fields or patterns`);
  }

  marker(): void {
    if (++this.markers > this.b.maxMarkers) throw new OverBudget(`more than ${this.b.maxMarkers} redacted values`);
  }

  depth(d: number): void {
    if (d > this.b.maxDepth) throw new OverBudget(`nested deeper than ${this.b.maxDepth}`);
  }
}

/**
 * A body kept only as its size and the SHA-256 of the bytes captured (as sent),
 * with why: over a budget, or a format the redactor cannot read. Stored as a small
 * JSON document under the encoding `omitted`.
 */
export function omittedBody(sent: Buffer, total: number, truncated: boolean, reason: string): CapturedBody {
  const sha256 = createHash('sha256').update(sent).digest('hex');
  return { data: Buffer.from(JSON.stringify({ sha256, reason })), bytes: total, truncated, encoding: 'omitted' };
}

/** What an omitted body's stored text says (null for any other text). */
export function omittedInfo(text: string): { sha256: string; reason: string } | null {
  try {
    const v = JSON.parse(text) as { sha256?: unknown; reason?: unknown };
    return typeof v.sha256 === 'string' && typeof v.reason === 'string' ? { sha256: v.sha256, reason: v.reason } : null;
  } catch {
    return null;
  }
}

/**
 * What reading a request body for gateway keys may cost before it is forwarded. A
 * compressed body is decoded as it streams; past `maxDecoded` bytes, or `maxRatio`
 * decoded bytes per compressed byte once past `freeBytes`, it is refused (413)
 * rather than forwarded unread. `maxHeld`: compressed bytes held back while their
 * decoded text is not yet read (bytes that decode to nothing cannot pile up).
 */
export const KEY_SCAN_BUDGET = {
  maxDecoded: 64 * 1024 * 1024,
  maxRatio: 200,
  freeBytes: 1024 * 1024,
  maxHeld: 8 * 1024 * 1024,
} as const;
