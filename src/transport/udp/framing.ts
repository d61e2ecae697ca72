// Datagram framing for the UDP endpoint (./endpoint.ts): a header encoded into a slab view,
// the payload as it lies (no copy), and the integrity trailer of the settled kind — XXH3-64,
// CRC32C or none — ready for one gathering send. A CRC32C whose largest part a worker can
// compute is left pending (sealDeferred finishes it).
import { UDP_TRAILER_LENS, UdpIntegrity } from '../../wire/spec.js';
import { encodeUdpHdr, setUdpTrailer, udpHeaderLength, type UdpHdr } from '../../wire/udp.js';
import type { TxPayload } from './context-options.js';
import type { EndpointCounters, EndpointOptions, OutDatagram, PeerAddress } from './endpoint-types.js';
import { ByteSlab } from './slab.js';

export class DatagramFramer {
  private readonly slab = new ByteSlab();

  constructor(
    private readonly opts: Pick<EndpointOptions, 'crc32c' | 'xxh3' | 'txOffloadable'>,
    private readonly counters: Pick<EndpointCounters, 'txDatagrams'>,
  ) {}

  frame(to: PeerAddress, hdr: UdpHdr, payload: TxPayload | null, path: number, kind: number): OutDatagram {
    const hlen = udpHeaderLength(hdr);
    const tlen = UDP_TRAILER_LENS[kind]!;
    // A view of a shared chunk, not an array of its own: one per datagram sent, and a fresh
    // small Uint8Array is on-heap, which the socket's send then moves off-heap (./slab.ts).
    const buf = this.slab.take(hlen + tlen);
    encodeUdpHdr(hdr, buf, 0);
    if (kind !== UdpIntegrity.Crc32c) setUdpTrailer(buf, 0, kind);
    this.counters.txDatagrams++;
    if (kind === UdpIntegrity.None) {
      if (payload === null) return { to, parts: [buf], path };
      return { to, parts: payload instanceof Uint8Array ? [buf, payload] : [buf, ...payload], path };
    }
    const head = buf.subarray(0, hlen);
    const trailer = buf.subarray(hlen);
    if (kind === UdpIntegrity.Xxh3) {
      if (payload === null) {
        this.opts.xxh3.hash([head], 0, 1, trailer, 0);
        return { to, parts: [buf], path };
      }
      const parts = payload instanceof Uint8Array ? [head, payload, trailer] : [head, ...payload, trailer];
      this.opts.xxh3.hash(parts, 0, parts.length - 1, trailer, 0);
      return { to, parts, path };
    }
    const crc32c = this.opts.crc32c;
    let crc = crc32c(head, 0);
    if (payload === null) {
      writeTrailer(trailer, crc);
      return { to, parts: [buf], path };
    }
    const parts = payload instanceof Uint8Array ? [head, payload, trailer] : [head, ...payload, trailer];
    const offloadable = this.opts.txOffloadable;
    let big = -1;
    if (offloadable !== undefined) {
      for (let i = 1; i < parts.length - 1; i++) if (offloadable(parts[i]!) && (big < 0 || parts[i]!.length > parts[big]!.length)) big = i;
    }
    const stop = big < 0 ? parts.length - 1 : big;
    for (let i = 1; i < stop; i++) crc = crc32c(parts[i]!, crc);
    if (big >= 0) return { to, parts, path, pendingCrc: { part: big, prefix: crc } };
    writeTrailer(trailer, crc);
    return { to, parts, path };
  }

  /** Finish a `pendingCrc` datagram given the CRC32C through parts[pendingCrc.part]. */
  sealDeferred(d: OutDatagram, crcThroughPart: number): void {
    const p = d.pendingCrc;
    if (p === undefined) return;
    let crc = crcThroughPart >>> 0;
    for (let i = p.part + 1; i < d.parts.length - 1; i++) crc = this.opts.crc32c(d.parts[i]!, crc);
    writeTrailer(d.parts[d.parts.length - 1]!, crc);
    d.pendingCrc = undefined;
  }
}


/** Trailer least-significant byte first, as src/wire/udp.ts's sealUdpDatagram writes it. */
function writeTrailer(t: Uint8Array, crc: number): void {
  t[0] = crc;
  t[1] = crc >>> 8;
  t[2] = crc >>> 16;
  t[3] = crc >>> 24;
}
