/** Flags that take no value. */
const BOOLEAN = new Set(['json', 'offline', 'help', 'version']);

export interface Args {
  /** Positional words: the command, its subcommand and its operands. */
  words: string[];
  flags: Map<string, string>;
  bools: Set<string>;
}

export class UsageError extends Error {}

/** `--name value`, `--name=value`, boolean `--json`, `-h`; everything else is a word. */
export function parseArgs(argv: readonly string[]): Args {
  const words: string[] = [];
  const flags = new Map<string, string>();
  const bools = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '-h') {
      bools.add('help');
      continue;
    }
    if (!a.startsWith('--') || a === '--') {
      if (a !== '--') words.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = eq > 0 ? a.slice(2, eq) : a.slice(2);
    if (BOOLEAN.has(name)) {
      if (eq > 0) throw new UsageError(`--${name} takes no value`);
      bools.add(name);
      continue;
    }
    if (eq > 0) {
      flags.set(name, a.slice(eq + 1));
      continue;
    }
    const v = argv[i + 1];
    if (v === undefined || v.startsWith('--')) throw new UsageError(`--${name} needs a value`);
    flags.set(name, v);
    i++;
  }
  return { words, flags, bools };
}

/** Refuses flags a command does not know, naming the first. */
export function onlyFlags(args: Args, allowed: readonly string[]): void {
  const ok = new Set([...allowed, 'config', 'url', 'key', 'key-file']);
  for (const f of [...args.flags.keys(), ...args.bools]) {
    if (!ok.has(f) && !BOOLEAN.has(f)) throw new UsageError(`unknown option --${f}`);
  }
}
