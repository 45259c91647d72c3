import { describe, expect, it } from 'vitest';
import { cleanMappings } from '../../src/store/engine-pages.js';

/** One smaps entry: its head line and the fields that matter here. */
const entry = (range: string, perms: string, path: string, rssKb: number, anonKb: number) =>
  [
    `${range} ${perms} 00000000 103:01 4212345${path ? `                    ${path}` : ''}`,
    'Size:             1024 kB',
    `Rss:              ${rssKb} kB`,
    'Pss:              100 kB',
    `Private_Dirty:    ${anonKb} kB`,
    'Referenced:       100 kB',
    `Anonymous:        ${anonKb} kB`,
    'VmFlags: rd mr mw me sd',
  ].join('\n');

const LIB = '/app/node_modules/@chdb/lib-linux-x64-gnu/libchdb.so';

describe("cleanMappings: the engine library mappings that hold only the file's own pages", () => {
  const smaps = [
    entry('7f0000000000-7f0000100000', 'r--p', LIB, 800, 0), // headers, .rela.dyn, .rodata
    entry('7f0000100000-7f0000300000', 'r-xp', LIB, 1500, 0), // .text
    entry('7f0000300000-7f0000340000', 'r--p', LIB, 256, 256), // RELRO: relocated copies
    entry('7f0000340000-7f0000350000', 'rw-p', LIB, 64, 64), // .data
    entry('7f0000350000-7f0000360000', 'r--s', LIB, 64, 0), // shared: not this process's to drop
    entry('7f1000000000-7f1000100000', 'r-xp', '/usr/bin/node', 900, 0), // another file
    entry('7f2000000000-7f2000100000', 'r-xp', '/app/libchdb.so.bak', 10, 0), // a name that only starts alike
    entry('7f3000000000-7f3000100000', 'rw-p', '', 900, 900), // anonymous memory
  ].join('\n');

  it('takes the read-only and executable private mappings with no anonymous pages, with their resident bytes', () => {
    expect(cleanMappings(smaps, /\/libchdb\.so$/)).toEqual([
      { start: 0x7f0000000000, length: 0x100000, resident: 800 * 1024 },
      { start: 0x7f0000100000, length: 0x200000, resident: 1500 * 1024 },
    ]);
  });

  it('leaves out a mapping whose Anonymous line is missing (an smaps it cannot read whole)', () => {
    const cut = entry('7f0000000000-7f0000100000', 'r--p', LIB, 800, 0)
      .split('\n')
      .filter((l) => !l.startsWith('Anonymous'))
      .join('\n');
    expect(cleanMappings(cut, /\/libchdb\.so$/)).toEqual([]);
  });

  it('finds nothing in an empty text or one without the library', () => {
    expect(cleanMappings('', /\/libchdb\.so$/)).toEqual([]);
    expect(
      cleanMappings(entry('7f1000000000-7f1000100000', 'r-xp', '/usr/bin/node', 900, 0), /\/libchdb\.so$/),
    ).toEqual([]);
  });
});
