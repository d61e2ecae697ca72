// The integrity modes of the udp transport (docs/integrity.md): names, wire codes, and how two
// wishes settle. Strength order none < crc32c < xxh3, by the worst case over error patterns: a
// CRC32C misses 2^-32 of the large random corruptions (it guarantees only bursts ≤ 32 bits and
// HD 4 at these lengths, which the link's own CRC already guarantees per frame), XXH3-64 misses
// about 2^-64 of any pattern; none checks nothing beyond the UDP checksum.
import { ErrorCode, SabreError } from '../../core/errors.js';
import { UdpIntegrity } from '../../wire/spec.js';

export type IntegrityMode = 'crc32c' | 'xxh3' | 'none';
export const INTEGRITY_MODES: readonly IntegrityMode[] = ['crc32c', 'xxh3', 'none'];
/** Chosen from measurements (docs/integrity.md): the faster kernel and the stronger check. */
export const DEFAULT_UDP_INTEGRITY: IntegrityMode = 'xxh3';

const CODE: Record<IntegrityMode, number> = { crc32c: UdpIntegrity.Crc32c, xxh3: UdpIntegrity.Xxh3, none: UdpIntegrity.None };
const NAME: readonly IntegrityMode[] = ['crc32c', 'xxh3', 'none'];
/** Strength per wire code (index = UdpIntegrity code). */
const STRENGTH: readonly number[] = [1, 2, 0];

export function integrityCode(m: IntegrityMode): number {
  return CODE[m];
}

export function integrityName(code: number): IntegrityMode {
  return NAME[code]!;
}

/** The integrity counters of the udp endpoint (part of EndpointCounters, so of dev.stats().link). */
export interface IntegrityCounters {
  /** Datagrams whose trailer kind is not the one the context settled (or CRC32C in a handshake / COOKIE / RESET). */
  badIntegrity: number;
  /** Handshakes refused: the peer's carried no wish block while we ask for xxh3 (see settleIntegrity). */
  integrityRefused: number;
}

/**
 * The settled code for our wish and the peer's (`peer` undefined: its handshake carried no
 * block), or undefined: the handshake is refused, and counted in `c`.
 *
 * The wishes ride in the clear and nothing keyed covers them, so a relay on the path can
 * rewrite or strip them (docs/integrity.md). What it must not get is a side settling below its
 * own wish, silently: the stronger wish wins, so a lowered wish leaves each side on at least
 * its own, and where the two then differ the trailers show it (badIntegrity). A missing block
 * is either a peer older than the block, which speaks crc32c only, or a relay that stripped
 * it — the same bytes. So it settles crc32c only where that is no weaker than our wish, and is
 * refused where we ask xxh3.
 *
 * `trailer`: the kind the peer's first datagram naming our context came under (the initiator's
 * check). The peer settled from the same two wishes, so it must be the same kind.
 */
export function settleIntegrity(own: number, peer: number | undefined, c: IntegrityCounters, trailer?: number): number | undefined {
  let settled: number;
  if (peer !== undefined) settled = STRENGTH[peer]! > STRENGTH[own]! ? peer : own;
  else if (STRENGTH[own]! <= STRENGTH[UdpIntegrity.Crc32c]!) settled = UdpIntegrity.Crc32c;
  else {
    c.integrityRefused++;
    return undefined;
  }
  if (trailer !== undefined && trailer !== settled) {
    c.badIntegrity++;
    return undefined;
  }
  return settled;
}

export function checkIntegrityMode(m: unknown, allowed: readonly string[] = INTEGRITY_MODES): asserts m is IntegrityMode {
  if (typeof m !== 'string' || !allowed.includes(m)) {
    throw new SabreError(ErrorCode.InvalidArgument, `integrity must be one of ${allowed.join(', ')}, got ${String(m)}`);
  }
}
