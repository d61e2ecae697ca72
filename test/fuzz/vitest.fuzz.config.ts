// vitest configuration of the full fuzz campaigns (scripts/fuzz.mjs): the live-device one
// (campaign.fuzz.ts) and the message surfaces (surfaces.fuzz.ts), no time limit, progress lines
// straight to the terminal. The script picks the files to run.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/fuzz/campaign.fuzz.ts', 'test/fuzz/surfaces.fuzz.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 0,
    hookTimeout: 60_000,
    disableConsoleIntercept: true,
    reporters: ['default'],
  },
});
