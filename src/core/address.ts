// How a device is named. A device address is a plain JSON-safe object (DESIGN §4): udp/tcp
// `{ transport, host, port }`, inproc `{ transport: 'inproc', id }`. Peers pass it back to
// reach the device, so every layer treats it as data: compared by value, keyed by addressKey.

export interface DeviceAddress {
  readonly transport: string;
  readonly [k: string]: unknown;
}

/** Stable key for an address (map keys, flow ids): its fields sorted and joined. */
export function addressKey(a: DeviceAddress): string {
  const keys = Object.keys(a).sort();
  return keys.map((k) => `${k}=${String(a[k])}`).join('&');
}
