import { readFileSync } from 'node:fs';

/**
 * `--key SECRET` on the command line, as mysql does with `-p`: it works, a warning says
 * to use `--key-file` or `WAKEGATE_KEY`, and the secret is overwritten in the process's
 * argument area (what `/proc/PID/cmdline` and `ps` show to every user of the machine)
 * as soon as the CLI starts. Setting `process.title` writes over that area on Linux.
 */
export const KEY_WARNING =
  'wakegate: warning: a key given with --key can be read by other users of this machine while the command starts, and stays in shell history; use --key-file PATH (- for stdin) or WAKEGATE_KEY';

/** The command line with the value of every `--key` masked; never longer than the one given. */
export function maskKey(args: readonly string[]): string[] {
  const out = [...args];
  for (let i = 0; i < out.length; i++) {
    const a = out[i] as string;
    if (a.startsWith('--key=')) out[i] = '--key=***'.slice(0, a.length);
    else if (a === '--key' && i + 1 < out.length && !(out[i + 1] as string).startsWith('--'))
      out[i + 1] = '***'.slice(0, (out[i + 1] as string).length);
  }
  return out;
}

/** Whether `args` carry a key on the command line. */
export const hasKeyArg = (args: readonly string[]): boolean =>
  args.some((a) => a === '--key' || a.startsWith('--key='));

/**
 * Hides a `--key` value from this process's command line; true when there was one.
 * The whole original command line (node's own options included) is read back from
 * /proc where there is one, so what remains shown is the same command, masked.
 */
export function hideKeyArg(argv: readonly string[] = process.argv): boolean {
  if (!hasKeyArg(argv)) return false;
  let shown: string[];
  try {
    shown = readFileSync('/proc/self/cmdline', 'utf8').split('\0').slice(0, -1);
  } catch {
    shown = [process.argv0, ...process.execArgv, ...argv.slice(1)];
  }
  process.title = maskKey(shown).join(' ');
  return true;
}
