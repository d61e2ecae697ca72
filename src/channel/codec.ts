// Message payloads: a Uint8Array goes as it is (and arrives as a Uint8Array); any other value is
// msgpack-encoded and arrives decoded. Plain MessagePack (no record extension): values stay
// readable by any MessagePack decoder, and no decoder state is shared between messages a peer
// could poison. Pre-seeded shared structures would make small records faster, but they only pay
// for shapes both ends know in advance — the channel's own control messages are fixed layouts
// instead (src/wire/spec.ts).
//
// Untrusted input: msgpackr has no size or depth limit, and what it builds is not bounded by
// what arrived — one byte (0x80, an empty map) becomes one JS object, so a message of a few MiB
// of them costs the heap gigabytes. So the bytes are walked first, without building anything
// (scanValue): it counts elements and nesting depth and refuses past the receiver's limits, and
// it admits only the extension types this encoder writes (timestamps, undefined) and typed
// arrays, whose cost is their length — the others msgpackr knows read values out of band
// (Set, Error, RegExp, records, string bundles, references) or cost more than their length
// (BigInt). Only a value that passed goes to msgpackr; every error it still throws is caught.
import { Packr } from 'msgpackr';

// variableMapSize: an object with more than 65,535 keys is encoded (as map32) instead of failing
// the send with msgpackr's own error; whether the receiver takes it is its maxValueElements.
const packr = new Packr({ useRecords: false, copyBuffers: true, variableMapSize: true });

export function encodeValue(v: unknown): Uint8Array {
  return packr.pack(v);
}

/** What one decoded value may cost (channel options maxValueElements, maxValueDepth). */
export interface DecodeLimits {
  /** Values in it, keys and nested ones included. */
  maxElements: number;
  /** Arrays and maps nested inside one another. */
  maxDepth: number;
}

/**
 * The channel's defaults. 2^17 values: decoding the costliest kind of them (an object with as
 * many string keys, which V8 builds as a dictionary) takes a few tens of milliseconds, so one
 * message cannot hold the event loop much longer; a value with more elements wants a larger
 * limit on the receiving end, or to travel as bytes.
 */
export const DEFAULT_DECODE_LIMITS: Readonly<DecodeLimits> = Object.freeze({ maxElements: 1 << 17, maxDepth: 256 });

/** Extension types admitted: 0 undefined, 0x74 typed array (a copy of its bytes), 0xff timestamp. */
const EXT_OK = new Set([0x00, 0x74, 0xff]);

/** Undefined when the first value of b is within the limits and well-formed; why not otherwise. */
export function scanValue(b: Uint8Array, lim: DecodeLimits): string | undefined {
  const n = b.length;
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  // Values still to read at each open level (a map entry is two); one level per container.
  const left: number[] = [1];
  let p = 0;
  let elements = 0;
  for (;;) {
    while (left.length > 0 && left[left.length - 1] === 0) left.pop();
    // One value per message: bytes after it are refused here, before msgpackr touches a buffer
    // that may be a whole maximal message of them.
    if (left.length === 0) return p === n ? undefined : `${n - p} bytes after the value`;
    left[left.length - 1]!--;
    if (++elements > lim.maxElements) return `more than ${lim.maxElements} elements (option maxValueElements)`;
    if (p >= n) return 'truncated';
    const t = b[p++]!;
    let skip = 0;
    let items = -1;
    if (t <= 0x7f || t >= 0xe0) skip = 0;
    else if (t <= 0x8f) items = (t & 0x0f) * 2;
    else if (t <= 0x9f) items = t & 0x0f;
    else if (t <= 0xbf) skip = t & 0x1f;
    else {
      const need = (k: number): boolean => p + k <= n;
      switch (t) {
        case 0xc0: case 0xc2: case 0xc3: break;
        case 0xc4: case 0xd9: if (!need(1)) return 'truncated'; skip = b[p]!; p += 1; break;
        case 0xc5: case 0xda: if (!need(2)) return 'truncated'; skip = dv.getUint16(p); p += 2; break;
        case 0xc6: case 0xdb: if (!need(4)) return 'truncated'; skip = dv.getUint32(p); p += 4; break;
        case 0xc7: case 0xc8: case 0xc9: {
          const w = t === 0xc7 ? 1 : t === 0xc8 ? 2 : 4;
          if (!need(w + 1)) return 'truncated';
          skip = w === 1 ? b[p]! : w === 2 ? dv.getUint16(p) : dv.getUint32(p);
          const type = b[p + w]!;
          if (!EXT_OK.has(type)) return `extension type ${type} is not accepted`;
          p += w + 1;
          break;
        }
        case 0xca: skip = 4; break;
        case 0xcb: skip = 8; break;
        case 0xcc: case 0xd0: skip = 1; break;
        case 0xcd: case 0xd1: skip = 2; break;
        case 0xce: case 0xd2: skip = 4; break;
        case 0xcf: case 0xd3: skip = 8; break;
        case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: {
          if (!need(1)) return 'truncated';
          const type = b[p]!;
          if (!EXT_OK.has(type)) return `extension type ${type} is not accepted`;
          p += 1;
          skip = 1 << (t - 0xd4);
          break;
        }
        case 0xdc: if (!need(2)) return 'truncated'; items = dv.getUint16(p); p += 2; break;
        case 0xdd: if (!need(4)) return 'truncated'; items = dv.getUint32(p); p += 4; break;
        case 0xde: if (!need(2)) return 'truncated'; items = dv.getUint16(p) * 2; p += 2; break;
        case 0xdf: if (!need(4)) return 'truncated'; items = dv.getUint32(p) * 2; p += 4; break;
        default: return `byte 0x${t.toString(16)} is not MessagePack`;
      }
    }
    p += skip;
    if (p > n) return 'truncated';
    if (items > 0) {
      // Every element takes at least one byte: a count past the bytes left is a lie, refused
      // before it sizes anything.
      if (items > n - p) return 'truncated';
      if (left.length >= lim.maxDepth) return `nested deeper than ${lim.maxDepth} (option maxValueDepth)`;
      left.push(items);
    }
  }
}

/** The decoded value, or why not (`limit`: it is well-formed but past the limits). */
export function decodeValue(b: Uint8Array, lim?: DecodeLimits): { ok: true; value: unknown } | { ok: false; error: string; limit: boolean } {
  if (lim) {
    const why = scanValue(b, lim);
    if (why) return { ok: false, error: why, limit: why.includes('option') };
  }
  try {
    return { ok: true, value: packr.unpack(b) };
  } catch (e) {
    return { ok: false, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e), limit: false };
  }
}
