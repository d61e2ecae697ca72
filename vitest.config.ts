import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Two files at a time on two cores: most files wait on sockets, child processes and timers
    // (a full run keeps ~1.1 cores busy with one), and the suites are built to pass under load.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
