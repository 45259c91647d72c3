import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

/** A source module (a .ts file under src/), by its absolute path. */
const SOURCE = new RegExp(`^${join(import.meta.dirname, 'src').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/.*\\.ts$`);

// chDB binds one data directory per process, so every test file runs in its own
// forked process with its own temporary DATA_DIR. The files mostly wait (on sockets,
// timers, child gateways and the engine), so three run at once on two cores; vitest's
// default here is one fewer than the cores, one at a time, which left a core idle.
//
// The sources a test imports are loaded by Node itself, through the hooks the child
// gateways and edge threads use (test/helpers/ts-hooks.mjs: esbuild, its output kept
// by content hash across processes and runs), not through vitest's transform: that
// one is redone in every run and handed to each file's process module by module
// over IPC. Still the sources as they are, never a build.
export default defineConfig({
  test: {
    pool: 'forks',
    poolOptions: {
      forks: {
        singleFork: false,
        maxForks: 3,
        minForks: 1,
        execArgv: ['--import', join(import.meta.dirname, 'test', 'helpers', 'ts-register.mjs')],
      },
    },
    server: { deps: { external: [SOURCE] } },
    maxConcurrency: 1,
    fileParallelism: true,
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
