// vitest configuration of the full fuzz campaign (scripts/fuzz.mjs): only campaign.fuzz.ts,
// no time limit, progress lines straight to the terminal.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/fuzz/campaign.fuzz.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 0,
    hookTimeout: 60_000,
    disableConsoleIntercept: true,
    reporters: ['default'],
  },
});
