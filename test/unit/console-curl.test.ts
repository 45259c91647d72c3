import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';

// The console's own module, run as the tests run sources; loaded by URL so that this
// project's type check (Node, no DOM) leaves it to the console's (console/tsconfig.json).
const { curlOf } = (await import(new URL('../../console/src/redacted.ts', import.meta.url).href)) as {
  curlOf: (w: unknown, base: string) => string;
};

/**
 * The console's "Copy as curl" (console/src/redacted.ts curlOf) writes what a proxy
 * client sent (method, path, query, headers, body) into text an operator pastes into a
 * shell: whatever that was, the text runs one command, curl, with exactly the request's
 * values as its arguments, and holds no character a terminal would act on.
 */

const MARKER = '[redacted:0123456789ab]';
const ENCODED = /%5[Bb]redacted%3[Aa]0123456789ab%5[Dd]/g;
const BASE = 'http://127.0.0.1:9';
const SHELLS = ['/usr/bin/bash', '/bin/sh'].filter(existsSync);

function wake(o: {
  method: string;
  path: string;
  query: string;
  headers: [string, string][];
  body: string | null;
}): unknown {
  return {
    id: 'wk_x',
    method: o.method,
    path: o.path,
    path_truncated: false,
    status: 200,
    latency_ms: 1,
    consumer: '-',
    captured_at: new Date(0).toISOString(),
    environment: 'production',
    route: 'default',
    key_id: null,
    request_bytes: 0,
    response_bytes: 0,
    replay_of: null,
    diff: null,
    request: {
      query: o.query,
      headers: o.headers,
      body: o.body,
      body_bytes: o.body?.length ?? 0,
      body_truncated: false,
      body_encoding: o.body === null ? null : 'utf8',
    },
    response: null,
  };
}

let batch = 0;

/**
 * Runs each of `texts` in `shell` (one process for them all, each in a directory of
 * its own under `dir`), with curl a function that writes its arguments to a file, no
 * PATH (no program can run) and each redaction variable set to the marker it stands
 * for; returns each one's curl arguments, or throws saying what else happened.
 */
function run(shell: string, dir: string, texts: readonly string[]): string[][] {
  const root = join(dir, `b${batch++}`);
  mkdirSync(root);
  const lines = [`curl() { printf '%s\\0' "$@" > args; }`];
  texts.forEach((text, i) => {
    mkdirSync(join(root, `d${i}`));
    const set = /^# Redacted values: set (.*) before running this\.$/m.exec(text)?.[1] ?? '';
    const vars = [...set.matchAll(/(?:^|, )([A-Z][A-Z0-9_]*) \(/g)].map((m) => `${m[1]}='${MARKER}'`);
    lines.push(`cd '${root}/d${i}'`, ...vars, text);
  });
  // stdin not a socket: bash would take that for sshd and read ~/.bashrc.
  const r = spawnSync(shell, ['-c', `${lines.join('\n')}\n`], {
    cwd: root,
    env: { PATH: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 10_000,
  });
  const stderr = r.stderr.toString();
  if (r.status !== 0 || stderr !== '') throw new Error(`${shell} exited ${r.status}: ${stderr}\n${texts.join('\n')}`);
  const top = readdirSync(root).sort();
  const dirs = texts.map((_, i) => `d${i}`).sort();
  if (top.join() !== dirs.join()) throw new Error(`${shell} left ${JSON.stringify(top)}`);
  return texts.map((text, i) => {
    const files = readdirSync(join(root, `d${i}`));
    if (files.join() !== 'args')
      throw new Error(`${shell} left ${JSON.stringify(files)}, not curl's arguments alone:\n${text}`);
    // Each argument as its bytes in hex: a header's bytes are not always UTF-8 text.
    const raw = readFileSync(join(root, `d${i}`, 'args'));
    const args: string[] = [];
    for (let at = 0; at < raw.length; ) {
      const end = raw.indexOf(0, at);
      args.push(raw.subarray(at, end).toString('hex'));
      at = end + 1;
    }
    return args;
  });
}

describe('Copy as curl is safe to paste, whatever the request held', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wakegate-curl-'));
  const work = join(dir, 'runs');
  mkdirSync(work);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a query parameter name with a newline cannot end the comment line and run a command of its own', () => {
    // Sent to the proxy as GET /orders/7?q%0Atouch%20<dir>/pwned%0A=%5Bredacted%3A0123456789ab%5D: stored as sent.
    const pwned = join(dir, 'pwned');
    const text = curlOf(
      wake({
        method: 'GET',
        path: '/orders/7',
        query: `?q%0Atouch%20${encodeURIComponent(pwned)}%0A=%5Bredacted%3A0123456789ab%5D`,
        headers: [['accept', '*/*']],
        body: null,
      }),
      BASE,
    );
    expect(
      text.split('\n').filter((l: string) => !l.startsWith('#')),
      text,
    ).toHaveLength(1);
    expect(text).toContain('(query "q\\ntouch ');
    for (const shell of SHELLS) {
      spawnSync(shell, ['-c', `curl() { :; }\n${text}`], { cwd: dir, stdio: 'ignore', timeout: 10_000 });
      expect(existsSync(pwned), `${shell} ran a command of the request's:\n${text}`).toBe(false);
    }
  });

  it('for any method, path, query, headers and body: one curl with exactly those values, nothing else run', () => {
    expect(SHELLS.length).toBeGreaterThan(0);
    // Any code point, Latin-1 (C0 and C1 controls, DEL) most often. (`unit: 'binary'` builds
    // a table of every code point first: seconds of CPU.)
    const char = fc
      .oneof({ weight: 3, arbitrary: fc.integer({ min: 0, max: 0xff }) }, fc.integer({ min: 0x100, max: 0x10ffff }))
      .filter((c) => c < 0xd800 || c > 0xdfff)
      .map((c) => String.fromCodePoint(c));
    // Shell syntax, controls a terminal acts on (CR, ^U, ^W, ESC, DEL, C1's CSI), line and
    // direction marks, percent-encoded controls (a query's names are decoded), markers whole
    // and inside text, and commands that would leave a file if they ran.
    const piece = fc.oneof(
      { weight: 3, arbitrary: fc.string({ unit: char, maxLength: 3 }) },
      {
        weight: 5,
        arbitrary: fc.constantFrom(
          ...["'", '"', '\\', '$', '`', '$(', ')', '${', '}', ';', '&', '|', '<', '>', '#', '!', '*', '~', ' '],
          ...['\t', '\n', '\r', '\0', '\x15', '\x17', '\x1b[2K', '\x7f', '\x9b', '\u2028', '\u202e'],
          ...['%0A', '%0D', '%00', '%7F', '%C2%9B', '%27', '=', '&', '[', ']', 'a', 'é', '?'],
          ...[MARKER, '%5Bredacted%3A0123456789ab%5D', '\ntouch pwned\n', '>pwned', ';echo x>pwned;'],
          ...['$(echo x>pwned)', '`echo x>pwned`', "'; echo x>pwned; '", '"; echo x>pwned; "'],
        ),
      },
    );
    const text = fc.array(piece, { maxLength: 10 }).map((a) => a.join(''));
    const body = fc.oneof(
      fc.constant(null),
      text,
      fc.dictionary(text, fc.oneof(text, fc.constant(MARKER)), { maxKeys: 3 }).map((o) => JSON.stringify(o)),
    );
    const contentType = fc.constantFrom<[string, string][]>(
      [],
      [['content-type', 'application/json']],
      [['content-type', 'application/x-www-form-urlencoded']],
    );
    const request = fc.record({
      method: fc.oneof(fc.constantFrom('GET', 'POST', 'PURGE'), text),
      path: text.map((p) => `/${p}`),
      query: fc.oneof(
        fc.constant(''),
        text.map((q) => `?${q}`),
      ),
      headers: fc
        .tuple(contentType, fc.array(fc.tuple(text, text), { maxLength: 3 }))
        .map(([a, b]) => [...a, ...b] as [string, string][]),
      body,
    });
    // Several requests a shell process (starting one is most of the cost), each run apart.
    fc.assert(
      fc.property(fc.array(request, { minLength: 1, maxLength: 8 }), (rs) => {
        const copied = rs.map((r) => curlOf(wake(r), BASE));
        const expected = rs.map((r, i) => {
          const text = copied[i] as string;
          // Nothing a terminal acts on when pasted: no control character but newline.
          // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
          expect(text).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f-\x9f]/);
          const redacted = text.startsWith('# Redacted values: ');
          // A NUL cannot be in a shell argument: left out (a comment line says so).
          const sent = (s: string) => (redacted ? s.replace(ENCODED, MARKER) : s).replace(/\0/g, '');
          // Arguments as bytes: text as UTF-8; a header line as the bytes its characters stand
          // for (the API gives header values one character per byte, latin1), unless it holds
          // a character past U+00FF, which no byte is (then as UTF-8 text).
          const hex = (t: string, enc: 'utf8' | 'latin1' = 'utf8') => Buffer.from(sent(t), enc).toString('hex');
          const args = [hex(`${BASE}${r.path}${r.query}`)];
          for (const [k, v] of r.headers) {
            const line = `${k}: ${v}`;
            if (/^(host|content-length|connection)$/i.test(k)) continue;
            // biome-ignore lint/suspicious/noControlCharactersInRegex: any character past a byte's range
            args.push(hex('-H'), hex(line, /[^\x00-\xff]/.test(line) ? 'utf8' : 'latin1'));
          }
          if (r.body) args.push(hex('--data-raw'), hex(r.body));
          // The method is quoted as it is (no marker is replaced in it).
          const method = Buffer.from(r.method.replace(/\0/g, '')).toString('hex');
          return [hex('-g'), hex('-X'), method, ...args];
        });
        for (const shell of SHELLS) expect(run(shell, work, copied), copied.join('\n')).toEqual(expected);
      }),
      { numRuns: 25 },
    );
  }, 60_000);
});
