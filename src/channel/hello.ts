// The fixed region every channel end registers at its start, and the HELLO that describes it to
// the peer: where the region's parts lie (computed from the options, never stored: an idle
// channel keeps no descriptor objects for them) and what a peer's HELLO must satisfy before the
// core (./core.ts) takes any of it. Kept apart from the core so the core stays the state machine.
import { CHAN_HELLO_BUF, CHAN_MBOX_SLOT, CHAN_SEQ_MOD, CHAN_VERSION } from '../wire/channel-spec.js';
import type { ResolvedOptions } from './options.js';
import { checkGrant } from './outbound.js';
import type { Grant, Hdr, Hello } from './wire.js';

/** Phase 0's slots start on a cache line of their own in the fixed region. */
const SLOTS_ALIGN = 64;

/**
 * The HELLO receive buffer lies at 0, the mailbox at CHAN_HELLO_BUF, the send scratch after it,
 * phase 0's slots after that on a cache line.
 */
export function scratchOff(o: ResolvedOptions): number {
  return CHAN_HELLO_BUF + o.ctrlSlots * CHAN_MBOX_SLOT;
}

/**
 * The scratch sends every control message, the HELLO (the largest) and data up to its size; larger
 * inline writes go from a stage registered at the first of them (./outbound.ts): none when idle.
 */
export const SCRATCH_LEN = CHAN_HELLO_BUF;

export function slots0Off(o: ResolvedOptions): number {
  return Math.ceil((scratchOff(o) + SCRATCH_LEN) / SLOTS_ALIGN) * SLOTS_ALIGN;
}

/** Why a decoded HELLO cannot be taken (undefined: it can). */
export function checkHello(h: Hello, hdr: Hdr, g: Grant): string | undefined {
  return h.version !== CHAN_VERSION ? `version ${h.version}` :
    h.ctrlSlots < 4 || h.ctrlSlots > 64 ? `${h.ctrlSlots} mailbox slots` :
    h.window < 1 || h.window > CHAN_SEQ_MOD / 2 ? `window ${h.window}` :
    h.maxEager < 1 || h.maxMessage < h.maxEager ? `maxEager ${h.maxEager} / maxMessage ${h.maxMessage}` :
    hdr.ctrlCredits > h.ctrlSlots || (hdr.ctrlCredits === 1) ? `${hdr.ctrlCredits} mailbox credits of ${h.ctrlSlots}` :
    checkGrant(g, 0, h.maxEager) ?? (hdr.slotCredits > g.slots ? `${hdr.slotCredits} slot credits of ${g.slots}` : undefined);
}
