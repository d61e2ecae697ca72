// A short seeded slice of the tcp campaign (the full one: `npm run fuzz -- --transport tcp`,
// docs/fuzzing.md): a few thousand hostile MPA requests and FPDUs at a live device — from raw
// connections and on the path of a victim connection — while a real QP transfers verified data.
import { describe, expect, it } from 'vitest';
import { summary } from './report.js';
import { runTcpCampaign } from './tcp-campaign.js';

const SEED = Number(process.env.FUZZ_SEED ?? 0x5eed);

describe('tcp live-device fuzz slice', () => {
  it(`3000 inputs, seed ${SEED}: no crash, no stall, bounded heap, transfer byte-exact, QP RTS, refusals counted`, async () => {
    const r = await runTcpCampaign({ inputs: 3000, seed: SEED, progressEvery: 100_000, failDir: 'fuzz-failures', ...(process.env.FUZZ_ROLES ? { roles: process.env.FUZZ_ROLES.split(',') } : {}) });
    if (r.failures.length || process.env.FUZZ_VERBOSE) console.log(summary(r));
    expect(r.failures).toEqual([]);
    expect(r.inputs).toBeGreaterThanOrEqual(2500);
    expect(r.rounds).toBeGreaterThan(1);
    expect(r.refusalsDelta).toBeGreaterThan(0);
    expect(r.byRole.path).toBeGreaterThan(0);
  }, 60_000);

  // Without the path the victim pair adds no counts, so every session V ended must be matched
  // by its own counter: the tight form of the refusal check (it caught the uncounted ends on a
  // peer's Terminate that the full slice's slack hid on most runs).
  it(`sessions only, seed ${SEED}: every connection V ended moved a counter`, async () => {
    const r = await runTcpCampaign({ inputs: 1500, seed: SEED, progressEvery: 100_000, failDir: 'fuzz-failures', roles: ['conn'] });
    if (r.failures.length || process.env.FUZZ_VERBOSE) console.log(summary(r));
    expect(r.failures).toEqual([]);
    expect(r.byRole.path).toBe(0);
    expect(r.refusedSent).toBeGreaterThan(50);
  }, 60_000);
});
