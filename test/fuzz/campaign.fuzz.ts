// The full campaign, run by `npm run fuzz` (scripts/fuzz.mjs) through vitest with
// test/fuzz/vitest.fuzz.config.ts; not part of `npm test` (the name does not end in .test.ts).
// Parameters come from the environment the script sets: FUZZ_INPUTS, FUZZ_SEED, FUZZ_TRANSPORT,
// FUZZ_ROLES; FUZZ_INTEGRITY (udp: xxh3 or crc32c) overrides the seed's pick.
import { expect, it } from 'vitest';
import { summary, type CampaignResult } from './report.js';
import { runUdpCampaign } from './udp-campaign.js';

const inputs = Number(process.env.FUZZ_INPUTS ?? 1_000_000);
const seed = Number(process.env.FUZZ_SEED ?? 1);
const transports = (process.env.FUZZ_TRANSPORT ?? 'udp,tcp').split(',');
const roles = process.env.FUZZ_ROLES ? process.env.FUZZ_ROLES.split(',') : undefined;
const integrity = process.env.FUZZ_INTEGRITY === 'xxh3' || process.env.FUZZ_INTEGRITY === 'crc32c' ? process.env.FUZZ_INTEGRITY : undefined;
if (process.env.FUZZ_INTEGRITY && !integrity) throw new Error(`FUZZ_INTEGRITY must be xxh3 or crc32c, got ${process.env.FUZZ_INTEGRITY}`);
const log = (line: string): void => {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
};

for (const transport of transports) {
  it(`${transport}: ${inputs} inputs, seed ${seed}`, async () => {
    let r: CampaignResult;
    if (transport === 'udp') r = await runUdpCampaign({ inputs, seed, log, ...(roles ? { roles } : {}), ...(integrity ? { integrity } : {}) });
    else if (transport === 'tcp') {
      const { runTcpCampaign } = await import('./tcp-campaign.js');
      r = await runTcpCampaign({ inputs, seed, log, ...(roles ? { roles } : {}) });
    } else throw new Error(`unknown transport ${transport}`);
    log(summary(r));
    log(`classes: ${JSON.stringify(r.byClass)}`);
    if (r.failures.length) log(`REPRODUCE: npm run fuzz -- --transport ${transport} --seed ${seed} --inputs ${r.inputs}`);
    expect(r.failures).toEqual([]);
  }, 24 * 3600 * 1000);
}
