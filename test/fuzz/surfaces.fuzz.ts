// The message-surface campaigns, run by `npm run fuzz -- --surface channel,files`
// (scripts/fuzz.mjs) through vitest with test/fuzz/vitest.fuzz.config.ts; not part of `npm test`
// (test/fuzz/messages.test.ts runs a short slice). Parameters come from the environment the
// script sets: FUZZ_INPUTS, FUZZ_SEED, FUZZ_SURFACE.
import { expect, it } from 'vitest';
import { runChannelCampaign } from './channel-campaign.js';
import { runFilesCampaign } from './files-campaign.js';
import { surfaceSummary } from './surface.js';

const inputs = Number(process.env.FUZZ_INPUTS ?? 1_000_000);
const seed = Number(process.env.FUZZ_SEED ?? 1);
const surfaces = (process.env.FUZZ_SURFACE ?? '').split(',').filter(Boolean);
const log = (line: string): void => {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
};

for (const surface of surfaces) {
  it(`${surface}: ${inputs} inputs, seed ${seed}`, async () => {
    const run = surface === 'channel' ? runChannelCampaign : surface === 'files' ? runFilesCampaign : undefined;
    if (!run) throw new Error(`unknown surface ${surface} (channel, files)`);
    const r = await run({ inputs, seed, log });
    log(surfaceSummary(r, 60));
    if (r.crashes || r.stalls) log(`REPRODUCE: npm run fuzz -- --surface ${surface} --seed ${seed} --inputs ${inputs}`);
    expect({ crashes: r.crashes, stalls: r.stalls }).toEqual({ crashes: 0, stalls: 0 });
  }, 24 * 3600 * 1000);
}
