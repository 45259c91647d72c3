import { createRequire } from 'node:module';
import type * as Redis from '@redis/client';
import type * as Undici from 'undici';

const require = createRequire(import.meta.url);
let undiciModule: typeof Undici | null = null;
let redisModule: typeof Redis | null = null;

/**
 * Packages loaded the first time something needs them, not at start: undici serves
 * replays, tracing's export and the proxy's fallback client, Redis a fleet. A gateway
 * that uses neither spends neither their start-up (about 0.1 s of CPU each) nor their
 * memory (about 20 MB each, measured by importing each into a bare Node process).
 */
export const undici = (): typeof Undici => {
  undiciModule ??= require('undici') as typeof Undici;
  return undiciModule;
};

export const redis = (): typeof Redis => {
  redisModule ??= require('@redis/client') as typeof Redis;
  return redisModule;
};
