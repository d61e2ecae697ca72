// Checks on a peer's device address before anything is sent to it (qp.connect, createAh, cm
// connect): the same answer on every transport, at once. A malformed address is the caller's
// bug (ERR_INVALID_ARGUMENT); one this device cannot reach (another transport's, an inproc
// device of another process, a host name that does not resolve) is ERR_UNREACHABLE — never
// a wait for a timeout that cannot end any other way.
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { DeviceAddress } from '../core/address.js';
import { ErrorCode, SabreError } from '../core/errors.js';

/** What the checks read of the device the address is checked for (a Device is one). */
export interface AddressChecker {
  readonly address: DeviceAddress;
  reachable(a: DeviceAddress): boolean;
}

/** Synchronous checks: shape, transport, host/port ranges, reachability. Throws SabreError. */
export function checkPeerAddress(dev: AddressChecker, a: unknown, what: string): asserts a is DeviceAddress {
  checkPeerAddressShape(dev, a, what);
  if (!dev.reachable(a)) {
    const why = dev.address.transport === 'inproc' ? ' (inproc devices are reachable only from their own process, or through a bridge)' : '';
    throw new SabreError(ErrorCode.Unreachable, `${what}: no device at ${JSON.stringify(a)}${why}`);
  }
}

/** Shape, transport and host/port ranges only (ERR_INVALID_ARGUMENT). */
export function checkPeerAddressShape(dev: AddressChecker, a: unknown, what: string): asserts a is DeviceAddress {
  if (!a || typeof a !== 'object' || typeof (a as DeviceAddress).transport !== 'string') {
    throw new SabreError(ErrorCode.InvalidArgument, `${what} needs a device address ({ transport, … })`);
  }
  const addr = a as DeviceAddress;
  const mine = dev.address.transport;
  if (addr.transport !== mine) throw new SabreError(ErrorCode.InvalidArgument, `${what}: a ${mine} device cannot reach a ${addr.transport} address`);
  if (mine === 'udp' || mine === 'tcp') {
    if (typeof addr.host !== 'string' || addr.host.length === 0) throw new SabreError(ErrorCode.InvalidArgument, `${what}: host must be a non-empty string`);
    const port = addr.port;
    if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) {
      throw new SabreError(ErrorCode.InvalidArgument, `${what}: port must be an integer in 1..65535, got ${JSON.stringify(port)}`);
    }
  }
}

/**
 * udp/tcp: a host name that does not resolve fails now with ERR_UNREACHABLE (the resolver's
 * error as cause) instead of a timeout. IP literals (and inproc) resolve to nothing to check.
 * Resolves to the name's addresses (undefined for an IP literal or inproc): src/cm accepts
 * answers from them only.
 */
export async function resolvePeerHost(a: DeviceAddress, what: string): Promise<string[] | undefined> {
  const host = a.host;
  if (typeof host !== 'string' || isIP(host) !== 0 || (a.transport !== 'udp' && a.transport !== 'tcp')) return undefined;
  try {
    return (await lookup(host, { all: true })).map((r) => r.address);
  } catch (e) {
    throw new SabreError(ErrorCode.Unreachable, `${what}: host ${host} does not resolve`, { cause: e });
  }
}

/** The host of a udp/tcp address that needs a lookup (not an IP literal), else undefined. */
export function needsLookup(a: DeviceAddress): boolean {
  return (a.transport === 'udp' || a.transport === 'tcp') && typeof a.host === 'string' && isIP(a.host) === 0;
}
