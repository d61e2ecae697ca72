// ProtectionDomain: the scope of keys. A remote access is only honoured for a region of the
// same PD as the QP it arrives on (the region table stores the PD; the kernel compares it).
import { Access } from '../core/enums.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import { SmallSet } from '../core/small-set.js';
import type { DeviceAddress } from '../core/address.js';
import { AddressHandle } from './ah.js';
import type { Device } from './device.js';
import { CM_QPN } from './reserved.js';
import { MemoryRegion } from './mr.js';
import { checkPeerAddressShape } from './peer-address.js';
import { QueuePair } from './qp.js';
import type { AhInit, QpInit } from './types.js';

const isU32 = (n: unknown): n is number => typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= 0xffff_ffff;

export class ProtectionDomain {
  readonly device: Device;
  /** @internal nonzero handle stored in the region table. */
  readonly handle: number;
  /** @internal (a channel's PD holds one of each: no Set until a second) */
  readonly mrs = new SmallSet<MemoryRegion>();
  /** @internal */
  readonly qps = new SmallSet<QueuePair>();

  /** @internal use Device.allocPd */
  constructor(device: Device, handle: number) {
    this.device = device;
    this.handle = handle;
  }

  /**
   * Register memory. A length carves a 64-byte-aligned region out of device memory (direct
   * placement); a Uint8Array registers memory outside the device (indirect path).
   */
  regMr(lengthOrBuffer: number | Uint8Array, access: number): MemoryRegion {
    this.device.assertOpen();
    if (!isU32(access) || (access & ~0xf) !== 0) throw new SabreError(ErrorCode.InvalidArgument, 'access must be a combination of Access flags');
    // As ibverbs (ibv_reg_mr fails with EINVAL): a region peers may write or run atomics on
    // must be locally writable too.
    if ((access & (Access.RemoteWrite | Access.RemoteAtomic)) !== 0 && (access & Access.LocalWrite) === 0) {
      throw new SabreError(ErrorCode.InvalidArgument, 'RemoteWrite and RemoteAtomic need LocalWrite as well (as ibv_reg_mr)');
    }
    const nic = this.device.nic;
    let rec;
    if (lengthOrBuffer instanceof Uint8Array) {
      if (lengthOrBuffer.length === 0) throw new SabreError(ErrorCode.InvalidArgument, 'cannot register an empty buffer');
      rec = nic.regExternal(lengthOrBuffer, this.handle, access);
    } else {
      const length = lengthOrBuffer;
      if (!Number.isInteger(length) || length <= 0) throw new SabreError(ErrorCode.InvalidArgument, `regMr length must be a positive integer (bytes), not ${String(length)}`);
      if (length > 0xffff_ffff) throw new SabreError(ErrorCode.InvalidArgument, `regMr length ${length} is more than one region holds (4 GiB - 1 bytes)`);
      rec = nic.regDevice(length, this.handle, access);
    }
    const mr = new MemoryRegion(this, rec);
    this.mrs.add(mr);
    return mr;
  }

  /** @internal a region's deregister(): a method here rather than a closure per region (each channel end holds one). */
  releaseMr(mr: MemoryRegion): void {
    this.device.nic.deregister(mr.rec);
    this.mrs.delete(mr);
  }

  createQp(init: QpInit): QueuePair {
    this.device.assertOpen();
    const qp = new QueuePair(this, init);
    this.qps.add(qp);
    return qp;
  }

  /**
   * @internal The device's connection-manager QP (src/cm/agent.ts): an srd QP at the reserved
   * QPN CM_QPN, whose receive completions also carry the sender's address as `src` (the address
   * the link observed, like a UD completion's source: see SourcedCompletion). It is an ordinary
   * QP otherwise — the agent posts Sends and receives to it with postSend / postRecv.
   */
  createCmQp(init: Omit<QpInit, 'type'>): QueuePair {
    this.device.assertOpen();
    const qp = new QueuePair(this, { ...init, type: 'srd' }, { qpn: CM_QPN });
    this.qps.add(qp);
    return qp;
  }

  createAh(init: AhInit): AddressHandle {
    this.device.assertOpen();
    const address: unknown = init?.address;
    // Reachability is not checked here: the CM agent answers on an AH to wherever a REQ came from.
    if (!address || typeof address !== 'object' || typeof (address as DeviceAddress).transport !== 'string') {
      throw new SabreError(ErrorCode.InvalidArgument, 'createAh needs { address } (a device address)');
    }
    checkPeerAddressShape(this.device, address, 'createAh');
    return new AddressHandle(this, address as DeviceAddress);
  }
}
