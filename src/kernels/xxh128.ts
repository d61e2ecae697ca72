// XXH3-128 for ordinary Uint8Arrays, one-shot and streaming, over the kernel context's private
// shared memory. The device data path (M4) keeps its stream records in device memory and calls
// the kernel exports directly; nothing here is on that path.
//
// Where stream state lives: each stream owns its 640-byte record as a plain JS buffer, and one
// working slot in the context's state area holds the record of whichever stream ran last
// (write-back: the record is copied out only when another stream needs the slot, and copied in
// only when a non-resident stream is updated). Why not one slot per stream: the state area has
// room for ~100 records, a dropped stream would hold its slot until a FinalizationRegistry
// noticed, and running out would make `createXxh128` fail for reasons the caller cannot see.
// With the working slot, streams cost only GC-managed memory, and the common pattern (one
// stream updated many times in a row) copies nothing. Records are position-independent, which
// is what lets the kernel resume one at any address.
//
// Layout used in own.stateBase (this module is the only user of the state area today):
//   +0     16-byte result
//   +64    working slot (the resident stream's record)
//   +704   one-shot slot (streams inputs larger than the scratch window)
import { ErrorCode, SabreError } from '../core/errors.js';
import { own, forEachChunk, SCRATCH_BYTES } from './scratch.js';

const STATE_SIZE = own.kernels.xxh128StateSize();
const RECORD_STRIDE = Math.ceil(STATE_SIZE / 64) * 64;
const OUT = own.stateBase;
const WORK_SLOT = own.stateBase + 64;
const ONESHOT_SLOT = WORK_SLOT + RECORD_STRIDE;
const U64_MAX = (1n << 64n) - 1n;
const view = new DataView(own.memory.buffer);

export interface Xxh128Hasher {
  /** Append bytes to the stream. Returns the same hasher, for chaining. */
  update(data: Uint8Array): Xxh128Hasher;
  /** XXH3-128 of everything appended so far; the stream stays usable (more updates may follow). */
  digest(): bigint;
}

function toSeed(fn: string, seed: unknown): bigint {
  if (seed === undefined) return 0n;
  if (typeof seed === 'bigint') {
    if (seed >= 0n && seed <= U64_MAX) return seed;
  } else if (typeof seed === 'number') {
    // Above 2^53 a number may already have lost bits, so such seeds must come as bigints.
    if (Number.isSafeInteger(seed) && seed >= 0) return BigInt(seed);
  }
  throw new SabreError(
    ErrorCode.InvalidArgument,
    `${fn}: seed must be a uint64 (a bigint, or a non-negative safe integer), got ${String(seed)}`,
  );
}

function checkData(fn: string, data: unknown): asserts data is Uint8Array {
  if (!(data instanceof Uint8Array)) {
    throw new SabreError(ErrorCode.InvalidArgument, `${fn}: data must be a Uint8Array`);
  }
}

function readResult(): bigint {
  return (view.getBigUint64(OUT + 8, true) << 64n) | view.getBigUint64(OUT, true);
}

/**
 * XXH3-128 (xxHash 0.8 `XXH3_128bits_withSeed`) of `data`, as the 128-bit number
 * high64 << 64 | low64 — the value whose 32-digit hex is the canonical XXH128 form.
 */
export function xxh128(data: Uint8Array, seed?: number | bigint): bigint {
  checkData('xxh128', data);
  const s = toSeed('xxh128', seed);
  const { kernels } = own;
  if (data.length <= SCRATCH_BYTES) {
    forEachChunk(data, (ptr, len) => kernels.xxh128(ptr, len, s, OUT));
  } else {
    kernels.xxh128Reset(ONESHOT_SLOT, s);
    forEachChunk(data, (ptr, len) => kernels.xxh128Update(ONESHOT_SLOT, ptr, len));
    kernels.xxh128Digest(ONESHOT_SLOT, OUT);
  }
  return readResult();
}

/** The stream whose record is currently in the working slot (its own buffer is then stale). */
let resident: Xxh128Stream | null = null;

class Xxh128Stream implements Xxh128Hasher {
  readonly #record = new Uint8Array(STATE_SIZE);

  constructor(seed: bigint) {
    this.#acquire(false);
    own.kernels.xxh128Reset(WORK_SLOT, seed);
  }

  /** Make this stream's record the working slot's, writing the previous owner's back. */
  #acquire(load: boolean): void {
    if (resident === this) return;
    const { u8 } = own;
    if (resident !== null) resident.#record.set(u8.subarray(WORK_SLOT, WORK_SLOT + STATE_SIZE));
    if (load) u8.set(this.#record, WORK_SLOT);
    resident = this;
  }

  update(data: Uint8Array): Xxh128Hasher {
    checkData('Xxh128Hasher.update', data);
    this.#acquire(true);
    const { kernels } = own;
    forEachChunk(data, (ptr, len) => kernels.xxh128Update(WORK_SLOT, ptr, len));
    return this;
  }

  digest(): bigint {
    this.#acquire(true);
    own.kernels.xxh128Digest(WORK_SLOT, OUT);
    return readResult();
  }
}

/** A streaming XXH3-128: `createXxh128(seed).update(a).update(b).digest() === xxh128(a ‖ b, seed)`. */
export function createXxh128(seed?: number | bigint): Xxh128Hasher {
  return new Xxh128Stream(toSeed('createXxh128', seed));
}
