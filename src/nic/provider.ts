// What a transport brings to the software NIC: a provider per transport name, looked up by
// openDevice. A provider checks the options that only it understands (host, port, the
// integrity modes its wire can carry), names the limits it enforces, and opens its link over
// the device memory. The verbs layer names no transport: it asks the registry (./providers.ts).
import { ErrorCode, SabreError } from '../core/errors.js';
import type { Link } from '../core/link.js';
import type { EngineBounds } from '../rdmap/bounds.js';
import type { DeviceMemory } from '../dataplane/device-memory.js';

/** The options of openDevice a provider reads (verbs/types.ts OpenDeviceOptions is the public shape). */
export interface ProviderOptions {
  transport: string;
  host?: string;
  port?: number;
  workers?: number;
  mss?: number;
  mtu?: number;
  sockets?: number;
  integrity?: 'crc32c' | 'xxh3' | 'none';
  keepaliveMs?: number;
}

/** An open link and what the device takes from the provider with it. */
export interface OpenedLink {
  link: Link;
  /** The segment size the engine cuts to when the provider wants one below the link's own (inproc). */
  mss?: number;
}

export interface TransportProvider {
  readonly name: string;
  /** Its link can run on a NIC thread (a socket transport); inproc hands frames by reference and stays inline. */
  readonly threaded: boolean;
  /**
   * The integrity modes this transport can carry (the first settles nothing: each provider
   * defaults on its own); undefined: it has no wire, the option is ignored.
   */
  readonly integrityModes?: readonly string[];
  /** The openDevice limits this transport enforces (docs/resource-bounds.md). */
  readonly limits: readonly string[];
  /** Options only this transport reads: checked before any memory is made or port bound. */
  checkOptions(opts: ProviderOptions): void;
  /** Bind and open the link; `limits`: the checked values of this provider's limits; `engine`: the engine's bounds, which a link may offer its peers (tcp: MPA's IRD). */
  open(mem: DeviceMemory, opts: ProviderOptions, limits: Record<string, number>, engine?: Partial<EngineBounds>): Promise<OpenedLink>;
}

/** host and port of a socket transport, checked the same on every one. */
export function checkHostPort(opts: ProviderOptions): void {
  if (opts.host !== undefined && (typeof opts.host !== 'string' || opts.host.length === 0)) throw new SabreError(ErrorCode.InvalidArgument, 'host must be a non-empty string');
  if (opts.port !== undefined && !(Number.isInteger(opts.port) && opts.port >= 0 && opts.port < 65536)) throw new SabreError(ErrorCode.InvalidArgument, 'port must be an integer in 0..65535');
}

/**
 * One code per cause when a link cannot bind, the same on udp and tcp, with the system error
 * as `cause`: the port is taken (ERR_ADDRESS_IN_USE), the host is not an address of this
 * machine or does not resolve (ERR_INVALID_ARGUMENT). Anything else passes through.
 */
export function bindError(e: unknown, transport: string, host: string, port: number): unknown {
  let sys: unknown = e;
  while (sys instanceof SabreError && sys.cause !== undefined) sys = sys.cause;
  const code = (sys as { code?: unknown } | undefined)?.code;
  const where = `${transport} ${host}:${port}`;
  if (code === 'EADDRINUSE') return new SabreError(ErrorCode.AddressInUse, `cannot bind ${where}: address in use`, { cause: sys });
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new SabreError(ErrorCode.InvalidArgument, `cannot bind ${where}: ${code === 'EADDRNOTAVAIL' ? 'not an address of this host' : 'host does not resolve'}`, { cause: sys });
  }
  if (code === 'EACCES') return new SabreError(ErrorCode.InvalidArgument, `cannot bind ${where}: permission denied`, { cause: sys });
  return e;
}
