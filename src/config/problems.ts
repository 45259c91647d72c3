import { LineCounter, parseDocument } from 'yaml';
import type { z } from 'zod';

/**
 * Turns the schema library's findings into the plain lines a user reads: the key
 * path, why in plain words (`is required`, `must be a whole number, not "x"`,
 * `is not a known setting (did you mean "port"?)`), and where the file says it.
 */

export interface Problem {
  path: string;
  reason: string;
}

type Seg = string | number;

export function pathText(segs: readonly PropertyKey[]): string {
  return segs
    .map((p) => (typeof p === 'number' ? `[${p}]` : String(p)))
    .join('.')
    .replace(/\.\[/g, '[');
}

function valueAt(root: unknown, segs: readonly PropertyKey[]): unknown {
  let cur = root;
  for (const s of segs) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[s];
  }
  return cur;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') return `the text ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  return `${typeof v === 'number' ? '' : `${typeof v} `}${String(v)}`.trim();
}

/** A setting holding a secret (a password, a key, a token, a URL that may hold credentials). */
function secretSetting(path: readonly PropertyKey[]): boolean {
  const last = String(path[path.length - 1] ?? '');
  // tracing.headers carry the collector's credentials: the whole setting, written in any
  // shape (OpenTelemetry's `key=value` text, a header line), and each of its values (not
  // capture.detail.headers, a boolean, whose wrong value is shown as it was written).
  if (path[0] === 'tracing' && path[1] === 'headers') return true;
  return /password|secret|token|_key$|^key$|admin_key|encryption|credentials|_url$/i.test(last);
}

/** What kind of value a YAML value is, without the value. */
function kindOfValue(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') return 'text';
  return typeof v === 'number' ? 'a number' : `a ${typeof v}`;
}

const KIND: Record<string, string> = {
  int: 'a whole number',
  number: 'a number',
  string: 'text',
  boolean: 'true or false',
  object: 'a mapping of keys to values',
  record: 'a mapping of keys to values',
  array: 'a list',
  nan: 'a number',
};

// biome-ignore lint/suspicious/noExplicitAny: walks the schema library's internal definition
type Def = any;

/** The schema at `segs`, unwrapping defaults, nullables and pipes; null when it cannot be followed. */
function schemaAt(schema: z.ZodType, segs: readonly Seg[]): Def | null {
  let cur: Def = schema;
  const unwrap = () => {
    for (let i = 0; i < 8 && cur; i++) {
      const d = cur._zod?.def;
      if (!d) return;
      if (['default', 'nullable', 'optional', 'prefault', 'readonly', 'catch'].includes(d.type)) cur = d.innerType;
      else if (d.type === 'pipe') cur = d.in;
      else return;
    }
  };
  for (const s of segs) {
    unwrap();
    const d = cur?._zod?.def;
    if (!d) return null;
    if (d.type === 'object') cur = d.shape[s];
    else if (d.type === 'array') cur = d.element;
    else if (d.type === 'record') cur = d.valueType;
    else return null;
  }
  unwrap();
  return cur ?? null;
}

function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0] as number;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const keep = row[j] as number;
      row[j] = Math.min((row[j] as number) + 1, (row[j - 1] as number) + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = keep;
    }
  }
  return row[b.length] as number;
}

/** The known key nearest to `key`, when it is near enough to be a likely misspelling. */
export function nearest(key: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestD = Number.POSITIVE_INFINITY;
  for (const k of known) {
    const d = distance(key.toLowerCase(), k.toLowerCase());
    if (d < bestD) {
      bestD = d;
      best = k;
    }
  }
  return best !== null && bestD <= Math.max(2, Math.floor(key.length / 3)) ? best : null;
}

function tooSmall(issue: { origin?: string; minimum?: unknown; inclusive?: boolean }): string {
  const n = Number(issue.minimum);
  if (issue.origin === 'string') return n <= 1 ? 'must not be empty' : `must be at least ${n} characters long`;
  if (issue.origin === 'array') return `needs at least ${n} item${n === 1 ? '' : 's'}`;
  return issue.inclusive === false ? `must be greater than ${n}` : `must be at least ${n}`;
}

function tooBig(issue: { origin?: string; maximum?: unknown; inclusive?: boolean }): string {
  const n = Number(issue.maximum);
  if (issue.origin === 'string') return `must be at most ${n} characters long`;
  if (issue.origin === 'array') return `may have at most ${n} items`;
  return issue.inclusive === false ? `must be less than ${n}` : `must be at most ${n}`;
}

/** A custom message the schema gave (ours are plain), else null for the library's own phrasing. */
const own = (m: string): string | null => (/^(Invalid|Unrecognized|Too (small|big)|Expected)/.test(m) ? null : m);

/** What the schema node wants, in words: `a whole number` for an integer, else by the issue's kind. */
function kindOf(expected: string, sch: Def | null): string {
  if (expected === 'number' && /int/.test(String(sch?.format ?? ''))) return KIND.int as string;
  return KIND[expected] ?? expected;
}

function reasonFor(issue: z.core.$ZodIssue, value: unknown, sch: Def | null): string {
  switch (issue.code) {
    case 'invalid_type':
      if (value === undefined) return 'is required';
      return `must be ${kindOf(issue.expected, sch)}, not ${describe(value)}`;
    case 'too_small':
      return own(issue.message) ?? tooSmall(issue as never);
    case 'too_big':
      return own(issue.message) ?? tooBig(issue as never);
    case 'invalid_value':
      return (
        own(issue.message) ??
        `must be ${issue.values.length === 1 ? '' : 'one of '}${issue.values.map((v) => JSON.stringify(v)).join(', ')}, not ${describe(value)}`
      );
    case 'invalid_format':
      return own(issue.message) ?? (issue.format === 'url' ? 'must be a URL' : `must be a valid ${issue.format}`);
    case 'invalid_union': {
      const alts = issue.errors
        .map((branch, i) => {
          const first = branch[0];
          return first
            ? reasonFor(first, value, sch?._zod?.def?.options?.[i] ?? null)
                .replace(/, not .*$/, '')
                .replace(/^must be /, '')
            : null;
        })
        .filter((s): s is string => s !== null);
      return alts.length ? `must be ${[...new Set(alts)].join(' or ')}, not ${describe(value)}` : 'has a wrong value';
    }
    case 'not_multiple_of':
      return `must be a multiple of ${String(issue.divisor)}`;
    case 'invalid_key': {
      // A mapping's key its schema refuses (an environment name): the key schema's own words.
      const inner = (issue as { issues?: z.core.$ZodIssue[] }).issues?.[0];
      return (inner && own(inner.message)) ?? 'is not an accepted name here';
    }
    default:
      return own(issue.message) ?? 'has a wrong value';
  }
}

/** Every finding of the schema, one plain problem each (an unknown key is one problem per key). */
export function plainProblems(issues: readonly z.core.$ZodIssue[], merged: unknown, schema: z.ZodType): Problem[] {
  const out: Problem[] = [];
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      const parent = schemaAt(schema, issue.path as Seg[]);
      const known = parent?._zod?.def?.type === 'object' ? Object.keys(parent._zod.def.shape) : [];
      for (const key of issue.keys) {
        const near = nearest(key, known);
        out.push({
          path: pathText([...issue.path, key]),
          reason: `is not a known setting${near ? ` (did you mean ${JSON.stringify(near)}?)` : ''}`,
        });
      }
      continue;
    }
    const sch = schemaAt(schema, issue.path as Seg[]);
    const value = valueAt(merged, issue.path);
    // A secret's value is never repeated, only what kind of value it is (quote it in YAML: "123").
    const reason = secretSetting(issue.path)
      ? reasonFor(issue, value, sch).replace(/, not .*$/s, `, not ${kindOfValue(value)}; the value is not shown`)
      : reasonFor(issue, value, sch);
    out.push({ path: pathText(issue.path), reason });
  }
  return out;
}

/** Splits `routes[0].origins.production` into its segments. */
export function segments(path: string): Seg[] {
  const out: Seg[] = [];
  for (const part of path.split('.')) {
    const m = /^([^[]*)((?:\[\d+\])*)$/.exec(part);
    if (!m) {
      out.push(part);
      continue;
    }
    if (m[1]) out.push(m[1]);
    for (const idx of (m[2] ?? '').matchAll(/\[(\d+)\]/g)) out.push(Number(idx[1]));
  }
  return out;
}

/**
 * Where in the YAML text a key path is written: the key itself when present, else
 * the nearest enclosing entry that is (a missing key is reported at its parent).
 * `line:column`, both from 1; null when nothing of the path is in the file.
 */
export function locator(text: string): (path: string) => string | null {
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter, keepSourceTokens: false });
  const at = (offset: number) => {
    const p = counter.linePos(offset);
    return `${p.line}:${p.col}`;
  };
  return (path) => {
    const segs = segments(path);
    // biome-ignore lint/suspicious/noExplicitAny: the YAML library's node types are walked generically
    let node: any = doc.contents;
    let found: number | null = null;
    for (const s of segs) {
      if (!node || typeof node !== 'object') break;
      if (Array.isArray(node.items) && node.constructor?.name === 'YAMLSeq') {
        const item = typeof s === 'number' ? node.items[s] : undefined;
        if (!item) break;
        node = item;
        found = item.range?.[0] ?? found;
        continue;
      }
      if (Array.isArray(node.items)) {
        // biome-ignore lint/suspicious/noExplicitAny: a YAML pair
        const pair = node.items.find((p: any) => String(p?.key?.value ?? p?.key) === String(s));
        if (!pair) break;
        found = pair.key?.range?.[0] ?? found;
        node = pair.value;
        continue;
      }
      break;
    }
    return found === null ? null : at(found);
  };
}
