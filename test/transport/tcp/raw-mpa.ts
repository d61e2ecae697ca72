// A raw MPA peer on a node:net socket for hostile tcp tests: a standard revision-2 initiator
// (C and H set, IRD/ORD 16, no sabre block) and hand-built RFC 5040/5041/5044 FPDUs. Every
// CRC is computed with @node-rs/crc32, not with sabre's kernels.
import net from 'node:net';
import { crc32c as refCrc } from '@node-rs/crc32';
import { encodeSabrePd, type SabreConnectInfo } from '../../../src/transport/tcp/private-data.js';

export const cat = (...xs: Uint8Array[]): Uint8Array => {
  const o = new Uint8Array(xs.reduce((n, x) => n + x.length, 0));
  let p = 0;
  for (const x of xs) {
    o.set(x, p);
    p += x.length;
  }
  return o;
};
const be32 = (v: number): number[] => [v >>> 24, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff];
const be64 = (v: number): number[] => [...be32(Math.floor(v / 2 ** 32)), ...be32(v >>> 0)];

/** RFC 5044 §4 FPDU: u16 ULPDU length, ULPDU, pad to 4, CRC32C (least-significant byte first). */
export function fpdu(ulpdu: Uint8Array): Uint8Array {
  const pad = (4 - ((2 + ulpdu.length) & 3)) & 3;
  const body = cat(Uint8Array.of(ulpdu.length >> 8, ulpdu.length & 0xff), ulpdu, new Uint8Array(pad));
  const crc = refCrc(Buffer.from(body)) >>> 0;
  return cat(body, Uint8Array.of(crc & 0xff, (crc >>> 8) & 0xff, (crc >>> 16) & 0xff, crc >>> 24));
}

/** RFC 5041 §5.2 untagged header: [T=0|L|DV=01], [RV=01|opcode], RsvdULP (32), QN, MSN, MO. */
export const untagged = (last: boolean, opcode: number, qn: number, msn: number, mo: number): Uint8Array =>
  Uint8Array.of(0x01 | (last ? 0x40 : 0), 0x40 | opcode, 0, 0, 0, 0, ...be32(qn), ...be32(msn), ...be32(mo));

/** RFC 5040 §4.4 Read Request (52 bytes on the wire). */
export const readRequest = (msn: number, sinkStag: number, sinkTo: number, size: number, srcStag: number, srcTo: number): Uint8Array =>
  fpdu(cat(untagged(true, 1, 1, msn, 0), Uint8Array.of(...be32(sinkStag), ...be64(sinkTo), ...be32(size), ...be32(srcStag), ...be64(srcTo))));

/** The MPA Request of a standard initiator. */
export const MPA_REQUEST = cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, 0x00, 0x04, 0x00, 0x10, 0x00, 0x10));

/** The MPA Request of a sabre initiator as it was before its raw dials offered the peer-to-peer RTR (still taken, without one): CRC, enhanced, IRD/ORD 16, no peer-to-peer, then the sabre block (src/transport/tcp/private-data.ts). */
export function sabreMpaRequest(block: SabreConnectInfo): Uint8Array {
  const pd = cat(Uint8Array.of(0x00, 0x10, 0x00, 0x10), encodeSabrePd(block));
  return cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, pd.length >> 8, pd.length & 0xff), pd);
}

export interface RawPeer {
  s: net.Socket;
  /** Bytes received so far (while the socket reads). */
  received(): Uint8Array;
  closed: Promise<void>;
}

/** Connect; `request`: send the MPA Request at once; `read`: false pauses the socket from the start (it never reads). */
export async function rawConnect(port: number, opts: { request?: boolean; read?: boolean } = {}): Promise<RawPeer> {
  const s = net.connect({ host: '127.0.0.1', port });
  s.on('error', () => {});
  const closed = new Promise<void>((r) => s.once('close', () => r()));
  await new Promise<void>((r, j) => {
    s.once('connect', () => r());
    s.once('close', () => j(new Error('closed before connect')));
  });
  const chunks: Uint8Array[] = [];
  if (opts.read === false) s.pause();
  else s.on('data', (d: Buffer) => chunks.push(d));
  if (opts.request !== false) s.write(MPA_REQUEST);
  return { s, received: () => (chunks.length > 1 ? (chunks.splice(0, chunks.length, cat(...chunks)), chunks[0]!) : (chunks[0] ?? new Uint8Array(0))), closed };
}

/**
 * The FPDUs in `bytes` (after the MPA Reply, no markers): each ULPDU's DDP header (14 or 18
 * bytes, by the T bit) and payload. Stops at an incomplete FPDU.
 */
export function parseFpdus(bytes: Uint8Array): { hdr: Uint8Array; payload: Uint8Array }[] {
  const out = [];
  let p = 0;
  while (p + 2 <= bytes.length) {
    const len = (bytes[p]! << 8) | bytes[p + 1]!;
    const pad = (4 - ((2 + len) & 3)) & 3;
    const end = p + 2 + len + pad + 4;
    if (end > bytes.length) break;
    const u = bytes.subarray(p + 2, p + 2 + len);
    const h = (u[0]! & 0x80) !== 0 ? 14 : 18;
    out.push({ hdr: u.subarray(0, h), payload: u.subarray(h) });
    p = end;
  }
  return out;
}

/** Length of the MPA Reply at the start of `bytes` (20-byte header + private data). */
export const replyLength = (bytes: Uint8Array): number => 20 + ((bytes[18]! << 8) | bytes[19]!);
