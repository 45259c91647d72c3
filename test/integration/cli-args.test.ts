import { execFile } from 'node:child_process';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Args, onlyFlags, parseArgs, UsageError } from '../../src/cli/args.js';
import { GATEWAY } from '../helpers/child.js';

function cli(args: string[]) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(
      process.execPath,
      [...GATEWAY, ...args],
      { env: { PATH: process.env.PATH ?? '' }, timeout: 60_000 },
      (err, stdout, stderr) =>
        resolve({
          code: err ? ((err as { code?: number }).code ?? 1) : 0,
          stdout: String(stdout),
          stderr: String(stderr),
        }),
    ),
  );
}

/** Runs `f` over `items`, `n` at a time (each CLI start is most of a second of a shared core). */
async function pool<T, R>(items: readonly T[], n: number, f: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      for (let i = next++; i < items.length; i = next++) out[i] = await f(items[i] as T);
    }),
  );
  return out;
}

/** Issue #36, Operating it: options parse as users of other CLIs expect; a bad one is one line. */
describe('CLI option parsing', () => {
  const BAD: [string[], string][] = [
    [['wakes', 'list', '--limt', '5'], 'unknown option --limt (did you mean --limit?)'],
    [['wakes', 'list', '--statsu=404'], 'unknown option --statsu (did you mean --status?)'],
    [['replay', 'wk_x', '--alow-unsafe'], 'unknown option --alow-unsafe (did you mean --allow-unsafe?)'],
    [['keys', 'create', '--lable', 'x'], 'unknown option --lable (did you mean --label?)'],
    [['deliveries', 'list', '--event_type', 'x'], 'unknown option --event_type (did you mean --event-type?)'],
    [['wakes', 'list', '--label', 'x'], 'unknown option --label'],
    [['wakes', 'list', '--zzzzzzzz'], 'unknown option --zzzzzzzz'],
    [['keys', 'list', '-x'], 'unknown option -x'],
    [['wakes', 'list', '--limit', '1', '--limit=2'], '--limit is given more than once'],
    [['wakes', 'list', '--url=http://a', '--url', 'http://b'], '--url is given more than once'],
    [['wakes', 'list', '--limit'], '--limit needs a value'],
    [['wakes', 'list', '--limit', '--json'], '--limit needs a value'],
    [['wakes', 'list', '--limit='], '--limit needs a value'],
    [['wakes', 'list', '--json=yes'], '--json takes no value'],
    [['wakes', 'show'], 'missing WAKE_ID'],
    [['wakes', 'show', 'wk_a', 'wk_b'], 'unexpected "wk_b"'],
    [['wakes', 'list', '--', '--json'], 'unexpected "--json"'],
    [['wakes', 'lsit'], 'unknown command "wakes lsit" (did you mean wakes list?)'],
    [['wakes', 'tail', '--max', '0'], '--max must be a whole number from 1 to 1000000000'],
    [['replay'], 'missing WAKE_ID (wakegate replay WAKE_ID)'],
    [['wakse', 'list'], 'unknown command "wakse" (did you mean wakes?)'],
    [['replay', 'wk_x', '--set', 'novalue'], '--set takes name=value'],
    [['replay', 'wk_x', '--set', 'a=1', '--set=a=2'], '--set gives "a" more than once'],
  ];

  it('each bad command line: exit 2 and exactly one stderr line saying what is wrong', async () => {
    const results = await pool(BAD, 3, ([args]) => cli(args));
    BAD.forEach(([args, message], i) => {
      const r = results[i] as Awaited<ReturnType<typeof cli>>;
      const what = args.join(' ');
      expect(r.code, what).toBe(2);
      expect(r.stdout, what).toBe('');
      expect(r.stderr.split('\n'), what).toEqual([expect.stringContaining(`wakegate: ${message}`), '']);
    });
  }, 180_000);

  it('-h, --help and --version on every command, the new ones too', async () => {
    const cases = [
      ['wakes', '--help'],
      ['wakes', 'list', '-h'],
      ['wakes', 'show', '--help'],
      ['wakes', 'tail', '--help'],
      ['replay', '--help'],
      ['replay', 'wk_x', '--set', 'a=1', '-h'],
      ['help', 'replay'],
    ];
    const results = await pool(cases, 3, cli);
    cases.forEach((args, i) => {
      const r = results[i] as Awaited<ReturnType<typeof cli>>;
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout, args.join(' ')).toMatch(/Usage:\n {2}wakegate (wakes|replay)/);
    });
    const v = await cli(['wakes', 'list', '--version']);
    expect(v.stdout).toMatch(/^wakegate \d+\.\d+\.\d+\n$/);
  }, 120_000);

  /** An option as given: its name, its value (null for a boolean), how it is spelt. */
  interface Given {
    name: string;
    value: string | null;
    joined: boolean;
  }
  const spell = (g: Given): string[] =>
    g.value === null ? [`--${g.name}`] : g.joined ? [`--${g.name}=${g.value}`] : [`--${g.name}`, g.value];
  // A value never starts with `--` (that is the next option); anything else goes, `=` and `-x` included.
  const value = fc.string({ minLength: 1, maxLength: 12, unit: 'grapheme' }).filter((v) => !v.startsWith('--'));
  const single = ['status', 'path', 'consumer', 'since', 'limit', 'cursor', 'url', 'environment', 'key-id'];
  const given = fc.record({
    singles: fc
      .subarray(single)
      .chain((names) =>
        fc.tuple(...names.map((name) => fc.record({ name: fc.constant(name), value, joined: fc.boolean() }))),
      ),
    bools: fc.subarray(['json', 'allow-unsafe']),
    sets: fc.array(fc.record({ name: fc.constant('set'), value, joined: fc.boolean() }), { maxLength: 4 }),
    words: fc.array(fc.stringMatching(/^[a-z_][a-z0-9_]{0,8}$/), { maxLength: 3 }),
    afterDashes: fc.array(fc.constantFrom('--json', '-h', '--limit=3', 'x'), { maxLength: 3 }),
  });

  /** What a parse means, lists compared as multisets (a permutation reorders them). */
  const meaning = (a: Args) => ({
    words: a.words,
    flags: Object.fromEntries([...a.flags].sort()),
    bools: [...a.bools].sort(),
    lists: Object.fromEntries([...a.lists].map(([k, v]) => [k, [...v].sort()]).sort()),
    unknown: a.unknown,
  });

  it('property: any permutation of valid options, in either spelling, among the words, parses to the same result', () => {
    fc.assert(
      fc.property(
        given,
        fc.infiniteStream(fc.nat()),
        fc.array(fc.boolean(), { minLength: 20, maxLength: 20 }),
        (g, order, respell) => {
          const options: Given[] = [
            ...(g.singles as Given[]),
            ...g.bools.map((name) => ({ name, value: null, joined: false })),
            ...g.sets,
          ];
          const tail = g.afterDashes.length ? ['--', ...g.afterDashes] : [];
          const canonical = parseArgs([...g.words, ...options.flatMap(spell), ...tail]);
          // Another order of the options (words keep theirs), each spelt either way.
          const shuffled = options.map((o, i) => ({ o: { ...o, joined: respell[i % 20] as boolean }, k: 0 }));
          const it = order[Symbol.iterator]();
          for (const s of shuffled) s.k = it.next().value as number;
          shuffled.sort((a, b) => a.k - b.k);
          const argv: string[] = [];
          const words = [...g.words];
          for (const s of shuffled) {
            if (words.length && s.k % 2 === 0) argv.push(words.shift() as string);
            argv.push(...spell(s.o));
          }
          argv.push(...words, ...tail);
          const parsed = parseArgs(argv);
          expect(meaning(parsed)).toEqual(meaning(canonical));
          // Every option given is there with its value; words after -- are words.
          for (const o of g.singles as Given[]) expect(parsed.flags.get(o.name)).toBe(o.value);
          expect(parsed.lists.get('set') ?? []).toHaveLength(g.sets.length);
          expect(parsed.words).toEqual([...g.words, ...g.afterDashes]);
          expect(parsed.unknown).toEqual([]);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('property: a one-value option given twice, in any spellings, is refused in one line naming it', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('status', 'limit', 'url', 'key'),
        value,
        value,
        fc.boolean(),
        fc.boolean(),
        (n, a, b, j1, j2) => {
          const argv = [...spell({ name: n, value: a, joined: j1 }), ...spell({ name: n, value: b, joined: j2 })];
          expect(() => parseArgs(argv)).toThrow(new UsageError(`--${n} is given more than once`));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('property: an unknown option is refused by the command, in one line, never echoing a value', () => {
    const name = fc
      .stringMatching(/^[a-z][a-z-]{0,14}$/)
      .filter((n) => !['json', 'help', 'version', 'offline', 'allow-unsafe'].includes(n));
    fc.assert(
      fc.property(name, value, (n, v) => {
        let args: Args;
        try {
          args = parseArgs(['wakes', 'list', `--${n}=${v}`]);
        } catch {
          return; // a known option of another kind; its own errors are covered above
        }
        if (['status', 'limit', 'url', 'key', 'key-file', 'config'].includes(n)) return;
        try {
          onlyFlags(args, ['status', 'limit']);
          expect.unreachable();
        } catch (e) {
          expect((e as Error).message).toMatch(
            new RegExp(`^unknown option --${n}( \\(did you mean --[a-z-]+\\?\\))?$`),
          );
        }
      }),
      { numRuns: 500 },
    );
  });
});
