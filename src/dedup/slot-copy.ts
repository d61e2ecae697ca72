// A landing-zone slot verified by hashing at its ROUND (a SHA-256 store, or an XXH3 slot whose
// in-band hash was tainted by a rewrite): first copied into device memory no peer can write,
// then hashed there, and the object and the store are filled from that copy only.
//
// Why: the zone stays remotely writable for the channel's life, and on a device whose NIC runs
// on its own thread (workers >= 1) a hostile sender's later RDMA WRITEs into the slot are placed
// while the receiver's thread is in its ROUND step. Hashing the zone and then reading it again
// would let bytes other than the verified ones into the object and the store — on a shared store
// (SHA-256, the copy reused by other scopes) into another peer's transfers.
import { ErrorCode, SabreError } from '../core/errors.js';
import { DEDUP_HASH_BYTES, DedupEndStatus } from '../wire/dedup-spec.js';
import type { ChunkHasher } from './hash.js';
import { Violation } from './recv-types.js';
import type { DedupMemory } from './types.js';

export class SlotCopy {
  readonly #mem: DedupMemory;
  readonly #cap: number;
  /** One slot's worth, made on first use and kept (each allocation can be a call to the NIC thread). */
  #addr = 0;

  constructor(mem: DedupMemory, slotLen: number) {
    this.#mem = mem;
    this.#cap = slotLen;
  }

  /**
   * Copy `lens` chunks laid end to end from `zone` into the private copy and check each against
   * its expected record (`rec(k)`: the array and offset of chunk k's 32-byte hash). Returns the
   * copy's address, or throws the Violation of the first chunk that does not match (`index(k)`
   * names it in the transfer).
   */
  verify(hasher: ChunkHasher, zone: number, lens: readonly number[], rec: (k: number) => [Uint8Array, number], index: (k: number) => number): number {
    let bytes = 0;
    for (const l of lens) bytes += l;
    if (bytes > this.#cap) throw new Violation(DedupEndStatus.Malformed, 0, `a run of ${bytes} bytes exceeds its slot (${this.#cap})`);
    if (this.#addr === 0) {
      try {
        this.#addr = this.#mem.alloc(Math.max(this.#cap, 1), 64);
      } catch (e) {
        throw e instanceof SabreError && e.code === ErrorCode.NoMemory ? new Violation(DedupEndStatus.TooLarge, 0, `no device memory for a private copy of a slot (${this.#cap} bytes)`) : e;
      }
    }
    const u8 = this.#mem.u8();
    u8.copyWithin(this.#addr, zone, zone + bytes);
    const got = hasher.hashRun(this.#addr, lens);
    for (let k = 0; k < lens.length; k++) {
      const [h, at] = rec(k);
      for (let j = 0; j < DEDUP_HASH_BYTES; j++) {
        if (got[k * DEDUP_HASH_BYTES + j] !== h[at + j]) throw new Violation(DedupEndStatus.Mismatch, index(k), `chunk ${index(k)} did not match its hash`);
      }
    }
    return this.#addr;
  }

  free(): void {
    if (this.#addr) this.#mem.free(this.#addr);
    this.#addr = 0;
  }
}
