import { defineConfig } from 'vitest/config';

// chDB binds one data directory per process, so every test file runs in its own
// forked process with its own temporary DATA_DIR.
export default defineConfig({
  test: {
    pool: 'forks',
    poolOptions: { forks: { singleFork: false } },
    maxConcurrency: 1,
    fileParallelism: true,
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
