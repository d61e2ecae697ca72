// The passive side. For write/read/atomic tests it only has to exist (one-sided operations
// need no CPU here, which is the point of RDMA); for send tests it keeps receives posted;
// for ping-pongs it answers every ping.
import { Opcode, SabreError, WcOpcode, WcStatus } from '../../index.js';
import { CompletionError, type Wc } from './completions.js';
import type { PerfSide, SideInfo } from './side.js';

export class PerfServer {
  private peer: SideInfo | undefined;
  private loop: Promise<void> | undefined;
  private stopping = false;
  private error: Error | undefined;

  constructor(readonly side: PerfSide) {}

  /** The control-channel methods, in call order: hello → connect → (prepare → finish)* → bye. */
  handle = async (method: string, params: unknown): Promise<unknown> => {
    switch (method) {
      case 'hello':
        return this.side.info();
      case 'connect':
        this.peer = params as SideInfo;
        await this.side.connect(this.peer);
        return null;
      case 'prepare':
        this.start((params as { size: number }).size);
        return null;
      case 'finish':
        await this.stop();
        return null;
      case 'bye':
        return null;
      default:
        throw new Error(`unknown control method '${method}'`);
    }
  };

  private start(size: number): void {
    const t = this.side.o.test;
    this.stopping = false;
    this.error = undefined;
    if (t === 'send_bw') this.loop = this.serveSends(size);
    else if (t === 'write_lat' || t === 'send_lat') this.loop = this.servePingPong(size);
    else this.loop = undefined;
  }

  private async stop(): Promise<void> {
    this.stopping = true;
    await this.loop;
    this.loop = undefined;
    if (this.error) throw this.error;
  }

  /** Poll with a short wait so a `finish` is noticed promptly; [] when nothing arrived. */
  private async reap(): Promise<Wc[]> {
    let wcs = this.side.cq.poll(256) as Wc[];
    if (wcs.length === 0) {
      try {
        await this.side.cq.wait(50);
      } catch (e) {
        if (!(e instanceof SabreError)) throw e;
      }
      wcs = this.side.cq.poll(256) as Wc[];
    }
    for (const wc of wcs) if (wc.status !== WcStatus.Success) throw new CompletionError(wc);
    return wcs;
  }

  private recvSge(size: number, slot: number) {
    return [{ addr: this.side.slotAddr(slot), length: size, lkey: this.side.mr.lkey }];
  }

  private async serveSends(size: number): Promise<void> {
    const { qps } = this.side;
    const perQp = Math.max(2 * this.side.o.txDepth, 64);
    try {
      qps.forEach((qp, q) => {
        for (let i = 0; i < perQp; i++) qp.postRecv({ wrId: q, sgList: this.recvSge(size, i) } as never);
      });
      let n = 0;
      while (!this.stopping) {
        for (const wc of await this.reap()) {
          if (wc.opcode !== WcOpcode.Recv) continue;
          const q = Number(wc.wrId);
          qps[q]!.postRecv({ wrId: q, sgList: this.recvSge(size, n++) } as never);
        }
      }
    } catch (e) {
      this.error = e as Error;
    }
  }

  private async servePingPong(size: number): Promise<void> {
    const qp = this.side.qps[0]!;
    const peer = this.peer!;
    const route = this.side.route(0, peer);
    const send = this.side.o.test === 'send_lat';
    const sge = this.recvSge(size, 0);
    try {
      qp.postRecv({ wrId: 0, sgList: send ? sge : [] } as never);
      while (!this.stopping) {
        for (const wc of await this.reap()) {
          if (wc.opcode !== WcOpcode.Recv && wc.opcode !== WcOpcode.RecvRdmaWithImm) continue;
          qp.postRecv({ wrId: 0, sgList: send ? sge : [] } as never);
          if (send) qp.postSend({ wrId: 0, opcode: Opcode.Send, sgList: sge, ...route } as never);
          else qp.postSend({ wrId: 0, opcode: Opcode.RdmaWriteWithImm, imm: wc.imm ?? 0, sgList: sge, remoteAddr: peer.vaddr, rkey: peer.rkey, ...route } as never);
        }
      }
    } catch (e) {
      this.error = e as Error;
    }
  }
}
