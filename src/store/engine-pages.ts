import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** A range of the process's address space. */
export interface Mapping {
  start: number;
  length: number;
  /** Its resident bytes when the smaps text was read. */
  resident: number;
}

/** Read-only mappings of the engine's library, by `/proc/self/smaps`'s path column. */
const ENGINE_LIBRARY = /\/libchdb\.so$/;

/**
 * The mappings of `file` in an smaps text (`/proc/<pid>/smaps`) that hold nothing but
 * the file's own pages: not writable, and no page of them copied into private memory
 * (`Anonymous: 0 kB`). A segment the loader relocated and then made read-only (RELRO)
 * holds such copies, and is left out: dropping them would lose the relocations.
 */
export function cleanMappings(smaps: string, file: RegExp): Mapping[] {
  const out: Mapping[] = [];
  let current: { start: number; length: number; fits: boolean; anonymous: number | null; resident: number } | null =
    null;
  const close = () => {
    if (current?.fits && current.anonymous === 0)
      out.push({ start: current.start, length: current.length, resident: current.resident });
  };
  for (const line of smaps.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      close();
      const start = Number.parseInt(head[1] as string, 16);
      const end = Number.parseInt(head[2] as string, 16);
      const perms = head[3] as string;
      const path = (head[4] ?? '').trim();
      current = {
        start,
        length: end - start,
        fits: perms[1] === '-' && perms[3] === 'p' && file.test(path) && end > start,
        anonymous: null,
        resident: 0,
      };
      continue;
    }
    const anon = /^Anonymous:\s+(\d+) kB$/.exec(line);
    if (anon && current) current.anonymous = Number(anon[1]);
    const rss = /^Rss:\s+(\d+) kB$/.exec(line);
    if (rss && current) current.resident = Number(rss[1]) * 1024;
  }
  close();
  return out;
}

type Madvise = (addr: number, length: number, advice: number) => number;
const MADV_DONTNEED = 4;
let madvise: Madvise | null | undefined;

/** libc's madvise through koffi (prebuilt, no compiler), or null where it cannot be had. */
function libcMadvise(): Madvise | null {
  if (madvise !== undefined) return madvise;
  madvise = null;
  if (process.platform !== 'linux') return null;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as {
      load(name: string): { func(signature: string): Madvise };
    };
    madvise = koffi.load('libc.so.6').func('int madvise(uintptr_t addr, size_t length, int advice)');
  } catch {
    madvise = null;
  }
  return madvise;
}

/**
 * Lets go of the embedded engine's library pages that only its load touched.
 *
 * libchdb.so maps about 380 MB of code and read-only data; loading it reads through
 * much of that (relocation tables, static initialisers) and those pages stay in the
 * process's resident set, about 115 MB of an idle gateway's 300, though most are never
 * touched again. They are clean pages of the file: once let go (MADV_DONTNEED), a page
 * touched again is read back from the page cache (a minor fault, or a disk read if the
 * cache lost it). Only mappings with no private copies in them are let go
 * (`cleanMappings`). Returns the resident bytes let go, or null where this cannot be done (not
 * Linux, no smaps, no libc, the library not loaded).
 */
export function releaseEngineLoadPages(smapsFile = '/proc/self/smaps'): number | null {
  const advise = libcMadvise();
  if (!advise) return null;
  let smaps: string;
  try {
    smaps = readFileSync(smapsFile, 'utf8');
  } catch {
    return null;
  }
  const ranges = cleanMappings(smaps, ENGINE_LIBRARY);
  if (ranges.length === 0) return null;
  let released = 0;
  for (const r of ranges) if (advise(r.start, r.length, MADV_DONTNEED) === 0) released += r.resident;
  return released;
}
