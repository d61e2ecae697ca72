// Byte helpers shared by the wire codecs: shifts over the caller's Uint8Array. A DataView
// cached per underlying buffer decoded slower than shifts (the cache check deoptimises), and
// only a DataView the caller holds for good beats shifts on the bare field reads (tinybench,
// headers in a SharedArrayBuffer).
import { SabreError, ErrorCode } from '../core/errors.js';

export type WireResult<T> = { ok: true; value: T; length: number } | { ok: false; error: string };

export const TWO_32 = 0x1_0000_0000;

export function fail(error: string): { ok: false; error: string } {
  return { ok: false, error };
}

export function rd16(b: Uint8Array, o: number): number {
  return (b[o]! << 8) | b[o + 1]!;
}

export function rd32(b: Uint8Array, o: number): number {
  return ((b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!) >>> 0;
}

export function wr16(b: Uint8Array, o: number, v: number): void {
  b[o] = v >>> 8;
  b[o + 1] = v;
}

export function wr32(b: Uint8Array, o: number, v: number): void {
  b[o] = v >>> 24;
  b[o + 1] = v >>> 16;
  b[o + 2] = v >>> 8;
  b[o + 3] = v;
}

/** Little-endian u32 (the CRC32C trailers). */
export function rd32le(b: Uint8Array, o: number): number {
  return (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
}

export function wr32le(b: Uint8Array, o: number, v: number): void {
  b[o] = v;
  b[o + 1] = v >>> 8;
  b[o + 2] = v >>> 16;
  b[o + 3] = v >>> 24;
}

/** A u64 that must stay a safe integer; returns -1 when it is >= 2^53. */
export function rdSafe64(b: Uint8Array, o: number): number {
  const hi = rd32(b, o);
  if (hi >= 0x20_0000) return -1;
  return hi * TWO_32 + rd32(b, o + 4);
}

export function wrSafe64(b: Uint8Array, o: number, v: number): void {
  wr32(b, o, Math.floor(v / TWO_32));
  wr32(b, o + 4, v >>> 0);
}

export function rdBig64(b: Uint8Array, o: number): bigint {
  return (BigInt(rd32(b, o)) << 32n) | BigInt(rd32(b, o + 4));
}

export function wrBig64(b: Uint8Array, o: number, v: bigint): void {
  const u = BigInt.asUintN(64, v);
  wr32(b, o, Number(u >> 32n));
  wr32(b, o + 4, Number(u & 0xffff_ffffn));
}

/** Encoders are fed by our own engine: a value that cannot go on the wire is a bug, said loudly. */
export function need(buf: Uint8Array, off: number, len: number): void {
  if (!Number.isInteger(off) || off < 0 || off + len > buf.length) {
    throw new SabreError(ErrorCode.InvalidArgument, `wire encode needs ${len} bytes at ${off}, buffer has ${buf.length}`);
  }
}

export function checkSafeTo(to: number, what: string): void {
  if (!Number.isSafeInteger(to) || to < 0) {
    throw new SabreError(ErrorCode.InvalidArgument, `${what} must be a non-negative safe integer, got ${to}`);
  }
}

/** Decoders take (buf, off, end); a bad window is malformed input like any other. */
export function badWindow(buf: Uint8Array, off: number, end: number): boolean {
  return !(Number.isInteger(off) && Number.isInteger(end) && off >= 0 && end <= buf.length && off <= end);
}
