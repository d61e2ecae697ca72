// A short seeded slice of the message-surface campaigns (the full ones: `npm run fuzz --
// --surface channel,files`, docs/fuzzing.md "Message surfaces"): 20,000 inputs per surface into
// the channel's core and decoders and the file service's cores and decoders; no crash may
// escape. The stall bound here is 500 ms, not the campaign's 50: this is a crash check that
// also catches a runaway step, and a shared CI machine can deschedule one step for longer than
// 50 ms (the full campaign judges stalls on the process's own CPU time at 50 ms).
import { describe, expect, it } from 'vitest';
import { runChannelCampaign } from './channel-campaign.js';
import { runFilesCampaign } from './files-campaign.js';
import { surfaceSummary } from './surface.js';

const SEED = Number(process.env.FUZZ_SEED ?? 0x5eed);
const INPUTS = 20_000;

describe('message surfaces, short campaign', () => {
  it(`channel: ${INPUTS} inputs, seed ${SEED}: no crash, no runaway step`, async () => {
    const r = await runChannelCampaign({
      inputs: INPUTS, seed: SEED, stallMs: 500,
      // Left out until fixed (the full campaign keeps reporting them):
      // - msgpack bombs larger than a slot (one empty map per byte: decodeValue's time grows
      //   with the count, seconds for a rendezvous-sized one) — bombMax keeps them to 64 KiB.
      bombMax: 1,
    });
    if (r.crashes || r.stalls || process.env.FUZZ_VERBOSE) console.log(surfaceSummary(r));
    expect(r.findings).toEqual([]);
    expect(r.inputs).toBe(INPUTS);
    expect(r.byTarget.core).toBeGreaterThan(INPUTS / 3);
    expect(r.extra.coreSessionsOpened).toBeGreaterThan(100);
    expect(Object.keys(r.refusals).some((k) => k.startsWith('core: protocol'))).toBe(true);
  }, 120_000);

  it(`files: ${INPUTS} inputs, seed ${SEED}: no crash, no runaway step`, async () => {
    const r = await runFilesCampaign({ inputs: INPUTS, seed: SEED, stallMs: 500 });
    if (r.crashes || r.stalls || process.env.FUZZ_VERBOSE) console.log(surfaceSummary(r));
    expect(r.findings).toEqual([]);
    expect(r.inputs).toBe(INPUTS);
    for (const t of ['messages', 'pipe', 'conn', 'dedup-auth']) expect(r.byTarget[t], t).toBeGreaterThan(500);
    expect(r.extra.connectionsAuthenticated).toBeGreaterThan(10);
    // Some AUTHs got past the proof check to the path checks and the (empty) model jail.
    expect(Object.keys(r.refusals).some((k) => k.includes('does not exist') || k.includes('read-only'))).toBe(true);
  }, 120_000);
});
