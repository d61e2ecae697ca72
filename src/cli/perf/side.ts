// One side of a perf run: a device, a PD, one CQ, the QPs and one registered buffer cut into
// slots, so that tx-depth operations in flight never touch the same bytes.
import { Access, openDevice, type Device } from '../../index.js';
import type { PerfOptions } from './options.js';

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

/** Bytes the perf buffer may take per side: enough slots for the window, bounded for -a at 8 MiB. */
const BUFFER_BUDGET = 32 << 20;

type Dev = Awaited<ReturnType<typeof openDevice>>;

export class PerfSide {
  private constructor(
    readonly o: PerfOptions,
    readonly dev: Dev,
    readonly pd: ReturnType<Dev['allocPd']>,
    readonly cq: ReturnType<Dev['createCq']>,
    readonly qps: ReturnType<ReturnType<Dev['allocPd']>['createQp']>[],
    readonly mr: ReturnType<ReturnType<Dev['allocPd']>['regMr']>,
    readonly slotBytes: number,
    readonly slots: number,
    readonly psns: number[],
  ) {}

  static async open(o: PerfOptions, bindHost?: string): Promise<PerfSide> {
    const maxSize = Math.max(...o.sizes, 8);
    const slotBytes = Math.ceil(maxSize / 64) * 64;
    const slots = Math.max(1, Math.min(o.txDepth, Math.floor(BUFFER_BUDGET / slotBytes)));
    const dev = await openDevice({
      transport: o.transport,
      ...(o.transport === 'inproc' ? {} : { host: bindHost ?? '127.0.0.1', port: 0 }),
      ...(o.mtu !== undefined ? { mtu: o.mtu } : {}),
      ...(o.workers > 0 ? { workers: o.workers } : {}),
    } as Parameters<typeof openDevice>[0]);
    const pd = dev.allocPd();
    const depth = Math.max(64, 2 * o.txDepth * o.qps + 64);
    const cq = dev.createCq({ depth });
    const mr = pd.regMr(
      slotBytes * slots,
      Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead | Access.RemoteAtomic,
    );
    const qps = [];
    for (let i = 0; i < o.qps; i++) {
      qps.push(
        pd.createQp({
          type: o.conn,
          sendCq: cq,
          recvCq: cq,
          maxSendWr: Math.max(o.txDepth, 16),
          maxRecvWr: Math.max(2 * o.txDepth, 64),
          maxSge: 1,
          maxInline: o.inline,
        }),
      );
    }
    // sabre's sequence space is the engine's per-QP message sequence (ssn), which starts at 1 in
    // each direction; the datagram PSNs belong to the per-peer transport context, not to a QP.
    const psns = qps.map(() => 1);
    return new PerfSide(o, dev, pd, cq, qps, mr, slotBytes, slots, psns);
  }

  info(): SideInfo {
    return {
      address: this.dev.address,
      qps: this.qps.map((qp, i) => ({ qpn: qp.qpn, psn: this.psns[i]! })),
      rkey: this.mr.rkey,
      vaddr: this.mr.addr,
      length: this.mr.length,
      slotBytes: this.slotBytes,
      slots: this.slots,
    };
  }

  /** rc: connect QP i to the peer's QP i. srd: one address handle for the peer. */
  ahs: unknown[] = [];
  async connect(peer: SideInfo): Promise<void> {
    if (this.o.conn === 'rc') {
      await Promise.all(this.qps.map((qp, i) => qp.connect({ address: peer.address as never, qpn: peer.qps[i]!.qpn })));
    } else {
      const ah = this.pd.createAh({ address: peer.address as never });
      this.ahs = this.qps.map(() => ah);
    }
  }

  /** Remote addressing for srd sends (rc QPs ignore it). */
  route(i: number, peer: SideInfo): { ah?: unknown; remoteQpn?: number } {
    return this.o.conn === 'srd' ? { ah: this.ahs[i], remoteQpn: peer.qps[i]!.qpn } : {};
  }

  slotAddr(slot: number): number {
    return this.mr.addr + (slot % this.slots) * this.slotBytes;
  }

  async close(): Promise<void> {
    await this.dev.close();
  }
}

export type { Device };
