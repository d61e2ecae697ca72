// XXH3-64 (xxHash 0.8 `XXH3_64bits_withSeed`) of bytes wherever they live, for the UDP
// transport's integrity trailer (docs/integrity.md) and for plain Uint8Arrays (sabre/kernels).
//
// A `Xxh3Parts` hashes the concatenation of a gather list without joining it: parts that lie in
// the hasher's memory (device memory: registered regions, the receive area) are read there in
// place, the others (headers built in JS, small payloads) are first copied into a staging area.
// One part in memory: the one-shot kernel. Several: the streaming record (the same record and
// update step as XXH3-128; only the digest differs), so a 64 KiB payload is never copied.
import { ErrorCode, SabreError } from '../core/errors.js';
import { own, SCRATCH_BYTES, XXH3_64_AREA } from './scratch.js';

/** The kernel exports a hasher needs (any instance over the memory: own, or a device's). */
export interface Xxh3Memory {
  u8(): Uint8Array;
  readonly kernels: {
    xxh3_64(ptr: number, len: number, seed: bigint, outPtr: number): void;
    xxh128Reset(statePtr: number, seed: bigint): void;
    xxh128Update(statePtr: number, ptr: number, len: number): void;
    xxh3_64Digest(statePtr: number, outPtr: number): void;
  };
}

/** Bytes a hasher needs at its `state` address: the 640-byte stream record. */
export const XXH3_STATE_BYTES = 640;
/** Below this many bytes in memory a part is staged with the rest: one call beats a stream. */
const INPLACE_MIN = 1024;

export class Xxh3Parts {
  /**
   * `state`: 64-aligned, XXH3_STATE_BYTES long; `out`: 8 bytes; `stage`: `stageBytes` long. All
   * in `mem`, all private to this hasher (it runs on one thread at a time).
   */
  constructor(
    private readonly mem: Xxh3Memory,
    private readonly state: number,
    private readonly out: number,
    private readonly stage: number,
    private readonly stageBytes: number,
  ) {}

  /** XXH3-64 (seed 0) of parts[from, to) concatenated, LE into dst[at, at + 8). */
  hash(parts: readonly Uint8Array[], from: number, to: number, dst: Uint8Array, at: number): void {
    this.#run(parts, from, to);
    const u8 = this.mem.u8();
    for (let i = 0; i < 8; i++) dst[at + i] = u8[this.out + i]!;
  }

  /** Whether data[0, len - 8) hashes to the 8 bytes (LE) that end `data`. */
  check(data: Uint8Array): boolean {
    const n = data.length - 8;
    if (n < 0) return false;
    const u8 = this.mem.u8();
    let t = data;
    let at = n;
    if (data.buffer !== u8.buffer && data.length <= this.stageBytes) {
      // Staged whole, trailer included: one copy, no view, and the compare reads memory only.
      u8.set(data, this.stage);
      this.mem.kernels.xxh3_64(this.stage, n, 0n, this.out);
      t = u8;
      at = this.stage + n;
    } else {
      this.#run1(data, n);
    }
    let diff = 0;
    for (let i = 0; i < 8; i++) diff |= u8[this.out + i]! ^ t[at + i]!;
    return diff === 0;
  }

  /** The hash as a bigint (tests, the user API). */
  value(): bigint {
    const u8 = this.mem.u8();
    let v = 0n;
    for (let i = 7; i >= 0; i--) v = (v << 8n) | BigInt(u8[this.out + i]!);
    return v;
  }

  #run1(data: Uint8Array, len: number): void {
    const u8 = this.mem.u8();
    if (data.buffer === u8.buffer) {
      this.mem.kernels.xxh3_64(data.byteOffset, len, 0n, this.out);
    } else if (len <= this.stageBytes) {
      u8.set(len === data.length ? data : data.subarray(0, len), this.stage);
      this.mem.kernels.xxh3_64(this.stage, len, 0n, this.out);
    } else {
      this.#stream([data.subarray(0, len)], 0, 1);
    }
  }

  #run(parts: readonly Uint8Array[], from: number, to: number): void {
    if (to - from === 1) {
      this.#run1(parts[from]!, parts[from]!.length);
      return;
    }
    const u8 = this.mem.u8();
    const buf = u8.buffer;
    const k = this.mem.kernels;
    // Everything small or outside memory and it fits the stage: join there, one call.
    let total = 0;
    let inPlace = false;
    for (let i = from; i < to; i++) {
      const p = parts[i]!;
      total += p.length;
      if (p.buffer === buf && p.length >= INPLACE_MIN) inPlace = true;
    }
    if (!inPlace && total <= this.stageBytes) {
      let at = this.stage;
      for (let i = from; i < to; i++) {
        u8.set(parts[i]!, at);
        at += parts[i]!.length;
      }
      k.xxh3_64(this.stage, total, 0n, this.out);
      return;
    }
    this.#stream(parts, from, to);
  }

  #stream(parts: readonly Uint8Array[], from: number, to: number): void {
    const u8 = this.mem.u8();
    const buf = u8.buffer;
    const k = this.mem.kernels;
    k.xxh128Reset(this.state, 0n);
    // Consecutive parts outside memory are staged together, so the stream sees few updates.
    let staged = 0;
    for (let i = from; i < to; i++) {
      const p = parts[i]!;
      if (p.buffer === buf && p.length >= INPLACE_MIN) {
        if (staged > 0) k.xxh128Update(this.state, this.stage, staged);
        staged = 0;
        k.xxh128Update(this.state, p.byteOffset, p.length);
        continue;
      }
      for (let off = 0; off < p.length;) {
        if (staged === this.stageBytes) {
          k.xxh128Update(this.state, this.stage, staged);
          staged = 0;
        }
        const n = Math.min(p.length - off, this.stageBytes - staged);
        u8.set(off === 0 && n === p.length ? p : p.subarray(off, off + n), this.stage + staged);
        staged += n;
        off += n;
      }
    }
    if (staged > 0) k.xxh128Update(this.state, this.stage, staged);
    k.xxh3_64Digest(this.state, this.out);
  }
}

const ownMem: Xxh3Memory = { u8: () => own.u8, kernels: own.kernels };
/** The hasher over the kernel context's private memory (state area slot, scratch window). */
export const ownXxh3 = new Xxh3Parts(ownMem, own.stateBase + XXH3_64_AREA + 64, own.stateBase + XXH3_64_AREA, own.scratchBase, SCRATCH_BYTES);

/** XXH3-64 (xxHash 0.8 `XXH3_64bits`, seed 0) of `data`, as an unsigned 64-bit bigint. */
export function xxh3_64(data: Uint8Array): bigint {
  if (!(data instanceof Uint8Array)) throw new SabreError(ErrorCode.InvalidArgument, 'xxh3_64: data must be a Uint8Array');
  ownXxh3.hash([data], 0, 1, scratch8, 0);
  return ownXxh3.value();
}
const scratch8 = new Uint8Array(8);
