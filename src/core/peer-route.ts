// Which NIC thread of a device holds a QP, and where a peer's QP is reached, when a device runs
// several NIC threads (src/nic/multi-port.ts). As RSS hashes a flow to one receive queue, a QP belongs
// to one thread, the one its number names: thread qpn mod n. Each thread has its own socket, and
// the device's address lists every thread's port (`ports`, thread i's at index i; `port` is
// thread 0's, where listeners are reached). A peer reaches QP q of such a device at
// ports[q mod ports.length]: both ends of an rc pair then talk between the two threads that own
// its QPs, and neither thread sees the other's flows. An address without `ports` (a device with
// one NIC thread, or one reached through a relay that forwards one port) is reached at `port`;
// through such a path only thread 0's QPs meet, so the cm keeps its QPs there (src/cm/index.ts).
import { addressKey, type DeviceAddress } from './address.js';

/** The QPN of a device's connection-manager QP (src/verbs/reserved.ts says more). */
export const CM_QPN = 0xffff_ffff;

/**
 * The thread of QP `qpn` on a device of `n` NIC threads. The CM QP is on thread 0, whose port
 * is the address's `port`: a peer that knows only host:port (a command line, a relay) reaches it.
 */
export function threadOf(qpn: number, n: number): number {
  return qpn === CM_QPN ? 0 : (qpn >>> 0) % n;
}

/** The ports listed in `a` (a device of several NIC threads), or undefined. */
export function portsOf(a: DeviceAddress): readonly number[] | undefined {
  const p = a['ports'];
  if (!Array.isArray(p) || p.length < 2) return undefined;
  for (const x of p) if (typeof x !== 'number' || !Number.isInteger(x) || x < 1 || x > 65535) return undefined;
  return p as number[];
}

/** Where QP `qpn` of the device at `a` is reached: a plain { transport, host, port } (the thread's socket), or `a` itself. */
export function routeTo(a: DeviceAddress, qpn: number): DeviceAddress {
  const ports = portsOf(a);
  if (ports === undefined) return a;
  const { ports: _, ...rest } = a;
  return { ...rest, port: ports[threadOf(qpn, ports.length)]! };
}

/** routeTo for each remote QP an address handle names, remembered by the thread it is on (srd names one on every post). */
export class Routes {
  readonly #a: DeviceAddress;
  readonly #key: string;
  readonly #ports: readonly number[] | undefined;
  readonly #routes: Array<{ address: DeviceAddress; key: string }> = [];

  constructor(a: DeviceAddress, key: string) {
    this.#a = a;
    this.#key = key;
    this.#ports = portsOf(a);
  }

  get(qpn: number): { address: DeviceAddress; key: string } {
    const i = this.#ports === undefined ? 0 : threadOf(qpn, this.#ports.length);
    let r = this.#routes[i];
    if (r === undefined) {
      const address = routeTo(this.#a, qpn);
      this.#routes[i] = r = { address, key: this.#ports === undefined ? this.#key : addressKey(address) };
    }
    return r;
  }
}
