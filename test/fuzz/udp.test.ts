// A short seeded slice of the udp campaign (the full one: `npm run fuzz -- --transport udp`,
// docs/fuzzing.md): a few thousand hostile datagrams at a live device while a real QP
// transfers verified data; every pass criterion of the campaign must hold.
import { describe, expect, it } from 'vitest';
import { summary } from './report.js';
import { runUdpCampaign } from './udp-campaign.js';

const SEED = Number(process.env.FUZZ_SEED ?? 0x5eed);

describe('udp live-device fuzz slice', () => {
  it(`4000 inputs, seed ${SEED}: no crash, no stall, bounded heap, transfer byte-exact, QP RTS, refusals counted`, async () => {
    const r = await runUdpCampaign({ inputs: 4000, seed: SEED, ...(process.env.FUZZ_ROLES ? { roles: process.env.FUZZ_ROLES.split(',') } : {}), progressEvery: 100_000, failDir: 'fuzz-failures' });
    if (r.failures.length || process.env.FUZZ_VERBOSE) console.log(summary(r));
    expect(r.failures).toEqual([]);
    expect(r.inputs).toBe(4000);
    expect(r.rounds).toBeGreaterThan(1);
    expect(r.refusalsDelta).toBeGreaterThan(0);
    expect(r.byRole.on).toBeGreaterThan(0);
    expect(r.extra.qp2Made).toBeGreaterThan(0);
  }, 60_000);
});
