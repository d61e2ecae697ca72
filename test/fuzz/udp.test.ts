// A short seeded slice of the udp campaign (the full one: `npm run fuzz -- --transport udp`,
// docs/fuzzing.md): a few thousand hostile datagrams at a live device while a real QP
// transfers verified data; every pass criterion of the campaign must hold. Run under both
// integrity modes the victim can settle (docs/integrity.md): an attacker sealing with the wrong
// trailer kind is stopped at badIntegrity, so its inputs would never reach the checks they aim at.
import { describe, expect, it } from 'vitest';
import { summary } from './report.js';
import { runUdpCampaign } from './udp-campaign.js';

const SEED = Number(process.env.FUZZ_SEED ?? 0x5eed);
const ROLES = process.env.FUZZ_ROLES ? { roles: process.env.FUZZ_ROLES.split(',') } : {};

describe.each(['xxh3', 'crc32c'] as const)('udp live-device fuzz slice, integrity %s', (integrity) => {
  it(`4000 inputs, seed ${SEED}: no crash, no stall, bounded heap, transfer byte-exact, QP RTS, refusals counted`, async () => {
    const r = await runUdpCampaign({ inputs: 4000, seed: SEED, integrity, ...ROLES, progressEvery: 100_000, failDir: 'fuzz-failures' });
    if (r.failures.length || process.env.FUZZ_VERBOSE) console.log(summary(r));
    expect(r.failures).toEqual([]);
    expect(r.integrity).toBe(integrity);
    expect(r.inputs).toBe(4000);
    expect(r.rounds).toBeGreaterThan(1);
    expect(r.refusalsDelta).toBeGreaterThan(0);
    expect(r.byRole.on).toBeGreaterThan(0);
    expect(r.extra.qp2Made).toBeGreaterThan(0);
    // The srd pair moved verified messages, and the validated attacker reached V's srd QP (its flows: P's and its own).
    expect(r.extra.srdMessages).toBeGreaterThan(0);
    expect(r.extra.srdFlowsV).toBeGreaterThan(1);
  }, 60_000);

  // The on-path attacker alone, so every counter that moves is its doing: its mutations (PSNs
  // behind the ack or past the window, acks and SACK blocks out of range) must get past the
  // trailer check to the checks they target. With a wrong trailer kind all three stayed at 0.
  it(`on-path inputs alone, seed ${SEED}: they reach badAck, badSack and rxOutOfWindow, none stops at the trailer`, async () => {
    const r = await runUdpCampaign({ inputs: 4000, seed: SEED, integrity, roles: ['on'], progressEvery: 100_000, failDir: 'fuzz-failures' });
    if (r.failures.length || process.env.FUZZ_VERBOSE) console.log(summary(r));
    expect(r.failures).toEqual([]);
    expect(r.byRole.on).toBeGreaterThan(300);
    expect(r.counters.badAck ?? 0).toBeGreaterThan(0);
    expect(r.counters.badSack ?? 0).toBeGreaterThan(0);
    expect(r.counters.rxOutOfWindow ?? 0).toBeGreaterThan(0);
    expect(r.counters.badIntegrity ?? 0).toBe(0);
    expect(r.counters.badHash ?? 0).toBe(0);
  }, 60_000);
});
