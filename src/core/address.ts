// How a device is named. A device address is a plain JSON-safe object (DESIGN §4): udp/tcp
// `{ transport, host, port }`, inproc `{ transport: 'inproc', id }`. Peers pass it back to
// reach the device, so every layer treats it as data: compared by value, keyed by addressKey.
import { isIPv4 } from 'node:net';

/** A udp device: datagrams to host:port (its first socket when it has several). */
export interface UdpAddress {
  readonly transport: 'udp';
  readonly host: string;
  readonly port: number;
}

/** A tcp (iWARP) device: its MPA listener at host:port. */
export interface TcpAddress {
  readonly transport: 'tcp';
  readonly host: string;
  readonly port: number;
}

/** An inproc device: its name on the in-process fabric. */
export interface InprocAddress {
  readonly transport: 'inproc';
  readonly id: string;
}

/** One shape per transport: narrow on `transport` to reach host and port, or id. */
export type TransportAddress = UdpAddress | TcpAddress | InprocAddress;

/**
 * What `dev.address` is and what connect / createAh take. Every field a transport puts there
 * is named; the index signature keeps it plain data that any layer can copy, key and check.
 */
export interface DeviceAddress {
  readonly transport: string;
  readonly host?: string;
  readonly port?: number;
  readonly id?: string;
  readonly [k: string]: unknown;
}

/** Stable key for an address (map keys, flow ids): its fields sorted and joined. */
export function addressKey(a: DeviceAddress): string {
  const keys = Object.keys(a).sort();
  return keys.map((k) => `${k}=${String(a[k])}`).join('&');
}

/**
 * The source a peer's device address counts under for per-source caps: its host (its port left
 * out: one host has many), an IPv6 /64 taken as one host (hostKey); an inproc device by its id.
 */
export function sourceKey(a: DeviceAddress): string {
  return a.host !== undefined ? hostKey(String(a.host)) : `id:${String(a['id'])}`;
}

/** The source a rate or a cap applies to: an IPv4 address, or an IPv6 /64 (one host's prefix). */
export function hostKey(address: string | undefined): string {
  if (!address) return '?';
  const a = address.startsWith('::ffff:') && isIPv4(address.slice(7)) ? address.slice(7) : address;
  if (!a.includes(':')) return a;
  // Expand "::" so the first four groups are the /64.
  const [head, tail] = a.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(Math.max(0, 8 - h.length - t.length)).fill('0'), ...t];
  return `${groups.slice(0, 4).map((g) => (g || '0').toLowerCase().replace(/^0+(?=.)/, '')).join(':')}::/64`;
}
