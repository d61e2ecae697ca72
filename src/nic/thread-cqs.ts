// The CQs of a thread port (./thread-port.ts): the id each is known by to the NIC thread, and
// its word in the shared control table (CQ_BASE + slot: completions the application took, the
// NIC thread's room to write more). Slots of dropped CQs serve the next.
import { ErrorCode, SabreError } from '../core/errors.js';
import type { PortCq } from './port.js';
import { CQ_SLOTS } from './thread-proto.js';

export class ThreadCqs {
  readonly #byId = new Map<number, { cq: PortCq; slot: number }>();
  readonly #freeSlots: number[] = [];
  #slotNext = 0;
  #idNext = 1;

  /** A new CQ's id and slot (not yet in the table: `add` it once the NIC thread has it). */
  reserve(): { id: number; slot: number } {
    const slot = this.#freeSlots.pop() ?? this.#slotNext++;
    if (slot >= CQ_SLOTS) throw new SabreError(ErrorCode.LimitExceeded, `a device has at most ${CQ_SLOTS} CQs`);
    return { id: this.#idNext++, slot };
  }

  add(id: number, slot: number, cq: PortCq): void {
    this.#byId.set(id, { cq, slot });
  }

  get(id: number): PortCq | undefined {
    return this.#byId.get(id)?.cq;
  }

  /** Drop `cq`: its ids (for the NIC thread to forget), its slot free again. */
  drop(cq: PortCq): number[] {
    const ids: number[] = [];
    for (const [id, e] of this.#byId) {
      if (e.cq !== cq) continue;
      this.#byId.delete(id);
      this.#freeSlots.push(e.slot);
      ids.push(id);
    }
    return ids;
  }

  idOf(cq: PortCq): number {
    for (const [id, e] of this.#byId) if (e.cq === cq) return id;
    throw new SabreError(ErrorCode.InvalidArgument, 'a CQ of another device');
  }
}
