// MemoryRegion: registered memory and its keys. Regions made by regMr(length) live in device
// memory (direct placement by the WASM kernel); regions over an external Uint8Array are placed
// by TypeScript (the indirect path) and get an address of sabre's own that never collides
// with device memory. lkey === rkey (one STag, as in siw).
import { ErrorCode, SabreError } from '../core/errors.js';
import type { PortMr } from '../nic/port.js';
import type { ProtectionDomain } from './pd.js';

export class MemoryRegion {
  readonly pd: ProtectionDomain;
  readonly addr: number;
  readonly length: number;
  readonly lkey: number;
  readonly rkey: number;
  readonly access: number;
  /** True for regMr(Uint8Array): memory outside the device. */
  readonly external: boolean;
  /** @internal */
  readonly rec: PortMr;
  #valid = true;

  /** @internal use ProtectionDomain.regMr */
  constructor(pd: ProtectionDomain, rec: PortMr) {
    this.pd = pd;
    this.rec = rec;
    this.addr = rec.addr;
    this.length = rec.length;
    this.lkey = rec.stag;
    this.rkey = rec.stag;
    this.access = rec.access;
    this.external = rec.ext !== undefined;
  }

  /** A view of the region's bytes (rebuilt if the device memory has grown since). */
  get buffer(): Uint8Array {
    if (!this.#valid) throw new SabreError(ErrorCode.Closed, 'memory region is deregistered');
    if (this.rec.ext) return this.rec.ext;
    return this.pd.device.memoryView(this.addr, this.length);
  }

  get valid(): boolean {
    return this.#valid;
  }

  /** The keys stop working at once; device memory returns to the device. */
  deregister(): void {
    if (!this.#valid) throw new SabreError(ErrorCode.InvalidState, 'memory region already deregistered');
    this.#valid = false;
    this.pd.releaseMr(this);
  }
}
