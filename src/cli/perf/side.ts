// One side of a perf run: a device, a PD, one CQ, the QPs and one registered buffer cut into
// slots, so that operations in flight at once never share bytes. Both roles build it from the
// same parameters (the server takes them from the client's hello, as perftest exchanges them).
import { Access, openDevice, type OpenDeviceOptions } from '../../index.js';
import type { WcObserver } from './wc.js';
import type { PeerParams } from './options.js';

export interface QpInfo {
  qpn: number;
  psn: number;
}

export interface SideInfo {
  address: unknown;
  qps: QpInfo[];
  rkey: number;
  vaddr: number;
  length: number;
  slotBytes: number;
  slots: number;
}

export interface SideParams extends PeerParams {
  /** Address to bind the device to (udp/tcp); what the peer will reach it at. */
  bindHost?: string;
  mtu?: number;
  workers: number | undefined;
  integrity?: 'crc32c' | 'xxh3' | 'none' | undefined;
}

/** Bytes the perf buffer may take per side: enough slots for the window, bounded for -a at 8 MiB. */
const BUFFER_BUDGET = 32 << 20;

type Dev = Awaited<ReturnType<typeof openDevice>>;
type Pd = ReturnType<Dev['allocPd']>;
type Qp = ReturnType<Pd['createQp']>;
type Cq = ReturnType<Dev['createCq']>;
type Mr = ReturnType<Pd['regMr']>;
type Ah = ReturnType<Pd['createAh']>;

export class PerfSide {
  ahs: Ah[] = [];
  /** Sees every batch of completions this side reaps (metrics); none by default. */
  observe: WcObserver | undefined;

  private constructor(
    readonly p: SideParams,
    readonly dev: Dev,
    readonly pd: Pd,
    readonly cq: Cq,
    readonly qps: Qp[],
    readonly mr: Mr,
    readonly slotBytes: number,
    readonly slots: number,
  ) {}

  /** Open the device and everything on it; on any failure the device is closed again. */
  static async open(p: SideParams): Promise<PerfSide> {
    const maxSize = Math.max(...p.sizes, 8);
    const slotBytes = Math.ceil(maxSize / 64) * 64;
    // Latency tests need two slots: 0 is where the peer's messages land, 1 is our source.
    const slots = Math.max(2, Math.min(p.txDepth, Math.floor(BUFFER_BUDGET / slotBytes)));
    const dev = await openDevice({
      transport: p.transport,
      ...(p.transport === 'inproc' ? {} : { host: p.bindHost ?? '127.0.0.1', port: 0 }),
      ...(p.mtu !== undefined ? { mtu: p.mtu } : {}),
      ...(p.workers !== undefined ? { workers: p.workers } : {}),
      ...(p.integrity !== undefined && p.transport !== 'inproc' ? { integrity: p.integrity } : {}),
    } as OpenDeviceOptions);
    try {
      const pd = dev.allocPd();
      const sendWr = Math.max(16, 2 * p.txDepth);
      const recvWr = Math.max(64, p.rxDepth, 2 * p.txDepth);
      const cq = dev.createCq({ depth: (sendWr + recvWr) * p.qps + 64 });
      const mr = pd.regMr(slotBytes * slots, Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead | Access.RemoteAtomic);
      const qps: Qp[] = [];
      for (let i = 0; i < p.qps; i++) {
        qps.push(
          pd.createQp({
            type: p.conn,
            sendCq: cq,
            recvCq: cq,
            maxSendWr: sendWr,
            maxRecvWr: recvWr,
            maxSge: 1,
            maxInline: p.inline,
            ...(p.outs !== undefined ? { maxRdAtomic: p.outs } : {}),
          }),
        );
      }
      return new PerfSide(p, dev, pd, cq, qps, mr, slotBytes, slots);
    } catch (e) {
      await dev.close();
      throw e;
    }
  }

  info(): SideInfo {
    return {
      address: this.dev.address,
      // sabre's sequence space is the engine's per-QP message sequence, which starts at 1 in each
      // direction; datagram PSNs belong to the per-peer transport context, not to a QP.
      qps: this.qps.map((qp) => ({ qpn: qp.qpn, psn: 1 })),
      rkey: this.mr.rkey,
      vaddr: this.mr.addr,
      length: this.mr.length,
      slotBytes: this.slotBytes,
      slots: this.slots,
    };
  }

  /** rc: connect QP i to the peer's QP i. srd: one address handle for the peer. */
  async connect(peer: SideInfo): Promise<void> {
    if (this.p.conn === 'rc') {
      await Promise.all(this.qps.map((qp, i) => qp.connect({ address: peer.address as never, qpn: peer.qps[i]!.qpn })));
    } else {
      const ah = this.pd.createAh({ address: peer.address as never });
      this.ahs = this.qps.map(() => ah);
    }
  }

  /** Remote addressing for srd sends (rc QPs take none). */
  route(i: number, peer: SideInfo): { ah?: Ah; remoteQpn?: number } {
    return this.p.conn === 'srd' ? { ah: this.ahs[i]!, remoteQpn: peer.qps[i]!.qpn } : {};
  }

  slotAddr(slot: number): number {
    return this.mr.addr + (slot % this.slots) * this.slotBytes;
  }

  /** The bytes of one slot (for write_lat's last-byte polling). */
  slotView(slot: number, size: number): Uint8Array {
    const off = (slot % this.slots) * this.slotBytes;
    return this.mr.buffer.subarray(off, off + size);
  }

  async close(): Promise<void> {
    await this.dev.close();
  }
}
