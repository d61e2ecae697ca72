// AddressHandle: how an srd work request names the device it goes to.
import type { DeviceAddress } from '../core/address.js';
import { addressKey } from '../core/address.js';
import { Routes } from '../core/peer-route.js';
import type { ProtectionDomain } from './pd.js';

export class AddressHandle {
  readonly pd: ProtectionDomain;
  readonly address: DeviceAddress;
  /** @internal */
  readonly key: string;
  /** @internal use ProtectionDomain.createAh */
  constructor(pd: ProtectionDomain, address: DeviceAddress) {
    this.pd = pd;
    this.address = Object.freeze({ ...address });
    this.key = addressKey(address);
    this.#routes = new Routes(this.address, this.key);
  }

  readonly #routes: Routes;

  /** @internal where remote QP `qpn` is reached: its NIC thread's port when the device lists several (core/peer-route.ts). */
  route(qpn: number): { address: DeviceAddress; key: string } {
    return this.#routes.get(qpn);
  }
}
