import { createHash } from 'node:crypto';

/** A Lua script run by its SHA-1 (EVALSHA), loaded on first use. */
export interface Script {
  readonly source: string;
  readonly sha: string;
}

export const script = (source: string): Script => ({ source, sha: createHash('sha1').update(source).digest('hex') });
