import { defineConfig } from 'vitest/config';

// chDB binds one data directory per process, so every test file runs in its own
// forked process with its own temporary DATA_DIR. The files mostly wait (on sockets,
// timers, child gateways and the engine), so three run at once on two cores; vitest's
// default here is one fewer than the cores, one at a time, which left a core idle.
export default defineConfig({
  test: {
    pool: 'forks',
    poolOptions: { forks: { singleFork: false, maxForks: 3, minForks: 1 } },
    maxConcurrency: 1,
    fileParallelism: true,
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
