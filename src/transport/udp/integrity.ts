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

/** The settled code for our wish and the peer's (undefined: its handshake carried none = crc32c only). */
export function settleIntegrity(own: number, peer: number | undefined): number {
  if (peer === undefined) return UdpIntegrity.Crc32c;
  return STRENGTH[peer]! > STRENGTH[own]! ? peer : own;
}

export function checkIntegrityMode(m: unknown, allowed: readonly string[] = INTEGRITY_MODES): asserts m is IntegrityMode {
  if (typeof m !== 'string' || !allowed.includes(m)) {
    throw new SabreError(ErrorCode.InvalidArgument, `integrity must be one of ${allowed.join(', ')}, got ${String(m)}`);
  }
}
