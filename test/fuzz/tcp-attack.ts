// The tcp attackers' bytes (RFC 5044 MPA framing around RFC 5041/5040 segments, docs/wire.md):
// MPA request frames (standard or carrying sabre's private-data block, revisions, C/M/H bits,
// IRD/ORD words, private-data lengths that lie) and FPDUs around hostile segments (ddp.ts) with
// a valid CRC32C by an independent implementation — or, for a small share, a bad CRC, a ULPDU
// length that disagrees with the bytes, non-zero pad. A session is one connection: a request,
// then FPDUs until the device terminates the stream (most hostile segments are fatal on a
// stream, RFC 5040 §5) or the session's count runs out.
import { crc32c as refCrc } from '@node-rs/crc32';
import { encodeSabrePd } from '../../src/transport/tcp/private-data.js';
import { hostileSegment, type Targets } from './ddp.js';
import type { Gen } from './rng.js';

const enc = new TextEncoder();
const KEY_REQ = enc.encode('MPA ID Req Frame');

export function cat(...xs: Uint8Array[]): Uint8Array {
  const o = new Uint8Array(xs.reduce((n, x) => n + x.length, 0));
  let p = 0;
  for (const x of xs) {
    o.set(x, p);
    p += x.length;
  }
  return o;
}

/** An FPDU around `ulpdu`: [len][ulpdu][pad][CRC32C, least-significant byte first]. */
export function fpdu(ulpdu: Uint8Array, o: { badCrc?: boolean; len?: number; padJunk?: boolean } = {}): Uint8Array {
  const pad = (4 - ((2 + ulpdu.length) & 3)) & 3;
  const body = new Uint8Array(2 + ulpdu.length + pad + 4);
  const len = o.len ?? ulpdu.length;
  body[0] = (len >>> 8) & 0xff;
  body[1] = len & 0xff;
  body.set(ulpdu, 2);
  if (o.padJunk) for (let i = 0; i < pad; i++) body[2 + ulpdu.length + i] = 0xa5;
  const at = 2 + ulpdu.length + pad;
  const crc = (refCrc(Buffer.from(body.buffer, 0, at)) ^ (o.badCrc ? 0x10 : 0)) >>> 0;
  body[at] = crc & 0xff;
  body[at + 1] = (crc >>> 8) & 0xff;
  body[at + 2] = (crc >>> 16) & 0xff;
  body[at + 3] = crc >>> 24;
  return body;
}

/** Recompute the CRC of an FPDU mutated in place (no markers on the stream). */
export function refixCrc(f: Uint8Array): Uint8Array {
  const at = f.length - 4;
  const crc = refCrc(Buffer.from(f.buffer, f.byteOffset, at)) >>> 0;
  f[at] = crc & 0xff;
  f[at + 1] = (crc >>> 8) & 0xff;
  f[at + 2] = (crc >>> 16) & 0xff;
  f[at + 3] = crc >>> 24;
  return f;
}

export interface MpaRequest {
  bytes: Uint8Array;
  cls: string;
  /** A request the device must refuse (no reply that accepts). */
  hostile: boolean;
  /** We asked for markers in what we receive / we are a sabre peer (opcodes 12–15 allowed). */
  markers: boolean;
  sabre: boolean;
}

/** An MPA request: mostly one the device accepts (so FPDUs follow), sometimes a hostile one. */
export function mpaRequest(g: Gen, service: number): MpaRequest {
  const markers = g.chance(0.3);
  const sabre = g.chance(0.5);
  const ird = g.pick([0, 1, 16, 0x3fff]);
  const ord = g.pick([0, 1, 16, 0x3fff]);
  const word = Uint8Array.of(ird >>> 8, ird & 0xff, ord >>> 8, ord & 0xff);
  const pd = sabre ? encodeSabrePd({ kind: 'connect', initiatorQpn: g.range(1, 0xffff), responderQpn: 0, nonce: g.u32(), service }) : new Uint8Array(0);
  let body = cat(word, pd);
  let bits = (markers ? 0x8000 : 0) | 0x4000 | 0x1000 | 2;
  let key = KEY_REQ;
  let cls = `mpa/${sabre ? 'sabre' : 'std'}${markers ? '+M' : ''}`;
  let hostile = false;
  let pdLen = body.length;
  if (g.chance(0.1)) {
    hostile = true;
    switch (g.int(6)) {
      case 0:
        key = Uint8Array.from(KEY_REQ);
        key[g.int(16)] ^= 0x20;
        cls = 'mpa/bad-key';
        break;
      case 1:
        bits = (bits & ~0xff) | g.pick([0, 3, 0xff]);
        cls = 'mpa/bad-rev';
        break;
      case 2:
        pdLen = g.pick([513, 0xffff]);
        body = g.bytes(g.int(600));
        cls = 'mpa/pd-too-long';
        break;
      case 3:
        bits |= 0x2000;
        cls = 'mpa/reject-bit';
        break;
      case 4:
        // Private data longer than announced: the rest is read as a (bad) FPDU.
        body = cat(body, g.bytes(g.range(1, 40)));
        cls = 'mpa/pd-overrun';
        break;
      default:
        bits = 0x1000 | 1;
        cls = 'mpa/rev1-with-H';
        hostile = false;
    }
  }
  const hdr = new Uint8Array(20);
  hdr.set(key);
  hdr[16] = bits >>> 8;
  hdr[17] = bits & 0xff;
  hdr[18] = pdLen >>> 8;
  hdr[19] = pdLen & 0xff;
  return { bytes: cat(hdr, body), cls, hostile, markers, sabre };
}

/** One hostile FPDU for a session's stream. */
export function hostileFpdu(g: Gen, t: Targets): { bytes: Uint8Array; cls: string } {
  const seg = hostileSegment(g, t);
  const k = g.int(40);
  if (k === 0) return { bytes: fpdu(seg.bytes, { badCrc: true }), cls: `fpdu/bad-crc/${seg.cls}` };
  if (k === 1) return { bytes: fpdu(seg.bytes, { len: g.pick([0, 1, seg.bytes.length + 4, 0xffff]) }), cls: 'fpdu/len-lie' };
  if (k === 2) return { bytes: fpdu(seg.bytes, { padJunk: true }), cls: `fpdu/pad/${seg.cls}` };
  if (k === 3) return { bytes: g.bytes(g.range(1, 64)), cls: 'fpdu/garbage' };
  if (k === 4) return { bytes: fpdu(new Uint8Array(0)), cls: 'fpdu/empty' };
  return { bytes: fpdu(seg.bytes), cls: `fpdu/${seg.cls}` };
}
