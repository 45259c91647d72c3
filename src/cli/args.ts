/**
 * The command line as users of other CLIs expect it: `--name value` and `--name=value`,
 * boolean `--json`, `-h`, `--` ending the options; a value option given twice, a
 * missing value, a value given to a boolean, or an option the command does not know is
 * one error line (the last naming the nearest option the command knows).
 */
import { isRealDate } from '../real-date.js';

/** Options that take no value. */
const BOOLEAN = new Set(['json', 'offline', 'help', 'version', 'allow-unsafe']);
/** Options that may be given more than once; each value is collected, in order. */
const LIST = new Set(['set', 'ignore']);
/** Options that take one value (any command's; each command says which it accepts). */
const VALUE = new Set([
  'config',
  'url',
  'key',
  'key-file',
  'environment',
  'label',
  'scopes',
  'consumer',
  'rate-limit',
  'replaces',
  'status',
  'at',
  'cursor',
  'limit',
  'events',
  'endpoint',
  'event-type',
  'status-class',
  'path',
  'key-id',
  'trace-id',
  'min-latency-ms',
  'since',
  'until',
  'method',
  'route',
  'management',
  'max',
  'interval-ms',
  'wait-ms',
]);
/** Accepted by every command. */
const COMMON = ['config', 'url', 'key', 'key-file', 'help', 'version', 'json'];
/** What the commands that work on this machine's store (serve, migrate, keys create --offline) take of COMMON. */
export const LOCAL = ['config', 'help', 'version'] as const;

export interface Args {
  /** Positional words: the command, its subcommand and its operands. */
  words: string[];
  flags: Map<string, string>;
  bools: Set<string>;
  /** List-like options (`--set a=1 --set b=2`), each value in the order given. */
  lists: Map<string, string[]>;
  /** Options no command knows, as spelt; refused (with a suggestion) once the command is known. */
  unknown: string[];
}

export class UsageError extends Error {}

/** Parses argv; throws a UsageError (one line, never echoing a value) for a malformed option. */
export function parseArgs(argv: readonly string[]): Args {
  const args: Args = { words: [], flags: new Map(), bools: new Set(), lists: new Map(), unknown: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--') {
      args.words.push(...argv.slice(i + 1));
      break;
    }
    if (a === '-h') {
      args.bools.add('help');
      continue;
    }
    if (a === '-' || !a.startsWith('-')) {
      args.words.push(a);
      continue;
    }
    if (!a.startsWith('--')) {
      args.unknown.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = eq > 0 ? a.slice(2, eq) : a.slice(2);
    if (BOOLEAN.has(name)) {
      if (eq > 0) throw new UsageError(`--${name} takes no value`);
      args.bools.add(name);
      continue;
    }
    if (!VALUE.has(name) && !LIST.has(name)) {
      args.unknown.push(`--${name}`);
      continue;
    }
    let value: string | undefined;
    if (eq > 0) value = a.slice(eq + 1);
    else {
      value = argv[i + 1];
      // Like hide-key.ts's mask: a next word starting with -- is another option, not this one's value.
      if (value?.startsWith('--')) value = undefined;
      else i++;
    }
    if (value === undefined || value === '') throw new UsageError(`--${name} needs a value`);
    if (LIST.has(name)) {
      const l = args.lists.get(name) ?? [];
      l.push(value);
      args.lists.set(name, l);
    } else {
      if (args.flags.has(name)) throw new UsageError(`--${name} is given more than once`);
      args.flags.set(name, value);
    }
  }
  return args;
}

/**
 * Refuses options a command does not know, naming the first and the nearest the
 * command does know: `unknown option --limt (did you mean --limit?)`.
 */
export function onlyFlags(args: Args, allowed: readonly string[], common: readonly string[] = COMMON): void {
  const ok = new Set([...allowed, ...common]);
  const given = [...args.unknown, ...[...args.flags.keys(), ...args.lists.keys(), ...args.bools].map((f) => `--${f}`)];
  for (const spelt of given) {
    const name = spelt.replace(/^--?/, '');
    if (spelt.startsWith('--') && ok.has(name)) continue;
    const near = nearest(name, [...ok]);
    throw new UsageError(`unknown option ${spelt}${near ? ` (did you mean --${near}?)` : ''}`);
  }
}

/**
 * The operand at `at` (`what` names it when missing), after which no word may follow;
 * with `what` null, none at all from `at`. Called after onlyFlags, so a word an unknown
 * option would have taken is reported as the option.
 */
export function operands(args: Args, at: number, what: string | null): string | undefined {
  const v = args.words[at];
  if (what !== null && !v) throw new UsageError(`missing ${what}`);
  const extra = args.words[what === null ? at : at + 1];
  if (extra !== undefined) throw new UsageError(`unexpected ${JSON.stringify(extra)}`);
  return v;
}

/** The known name closest to `name` by edit distance, when it is close enough to be a slip. */
export function nearest(name: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestD = Number.POSITIVE_INFINITY;
  for (const k of known) {
    const d = k.startsWith(name) && name.length >= 2 ? 1 : distance(name, k);
    if (d < bestD) {
      best = k;
      bestD = d;
    }
  }
  return best !== null && bestD <= Math.max(2, Math.floor(name.length / 3)) ? best : null;
}

/** Damerau-Levenshtein distance (optimal string alignment): a swap of neighbours costs one. */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i] as number[];
      const prev = d[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        v = Math.min(v, ((d[i - 2] as number[])[j - 2] as number) + 1);
      row[j] = v;
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

/** ISO 8601 with a zone, as GET /v2/wakes reads it: seconds optional, up to nine fractional digits. */
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$/;
const ISO_NO_ZONE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?)?$/;

/**
 * A time option (`--since`, `--until`, `--at`): ISO 8601 with an explicit zone (`Z` or
 * `±hh:mm`), never read in the machine's local zone; its text and its instant, or a
 * usage error naming the option.
 */
export function timeOption(args: Args, name: string): { text: string; ms: number } | undefined {
  const v = args.flags.get(name);
  if (v === undefined) return undefined;
  const example = '2026-12-01T00:00:00Z';
  if (ISO_NO_ZONE.test(v))
    throw new UsageError(
      `--${name} ${JSON.stringify(v)} has no time zone: add Z (UTC) or an offset such as +02:00 (${example})`,
    );
  const ms = Date.parse(v.replace(/(\.\d{3})\d+/, '$1'));
  if (!ISO.test(v) || !isRealDate(v) || !Number.isFinite(ms))
    throw new UsageError(`--${name} ${JSON.stringify(v)} is not a time: use ISO 8601 with a zone, such as ${example}`);
  return { text: v, ms };
}
