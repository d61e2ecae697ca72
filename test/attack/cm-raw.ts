// A device's CM QP driven by hand (a hostile or hand-made peer of the cm), to send any JSON to another
// device's CM QP and read what comes back (with the address it came from).
import { Access, type Device, Opcode, WcOpcode, WcStatus } from '../../src/index.js';
import type { DeviceAddress } from '../../src/core/address.js';
import { CM_QPN } from '../../src/verbs/reserved.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

export interface RawCm {
  send(to: DeviceAddress, msg: unknown): void;
  /** Messages received so far (JSON-parsed), with their source. */
  readonly inbox: Array<{ msg: any; src: DeviceAddress }>;
  /** Poll the CQ for up to `ms`, until `until()` holds. Bounded. */
  pump(ms: number, until?: () => boolean): Promise<void>;
}

export function rawCm(dev: Device): RawCm {
  const SLOTS = 64;
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 4096 });
  const qp = pd.createCmQp({ sendCq: cq, recvCq: cq, maxSendWr: 4096, maxRecvWr: SLOTS, maxSge: 1, maxInline: 1024 });
  const mr = pd.regMr((SLOTS + 1) * 1024, Access.LocalWrite);
  for (let i = 0; i < SLOTS; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + i * 1024, length: 1024, lkey: mr.lkey }] });
  const inbox: Array<{ msg: any; src: DeviceAddress }> = [];
  const drain = (): void => {
    for (const wc of cq.poll(256) as Array<ReturnType<typeof cq.poll>[number] & { src?: DeviceAddress }>) {
      if (wc.opcode !== WcOpcode.Recv || wc.status !== WcStatus.Success) continue;
      const slot = Number(wc.wrId);
      const at = slot * 1024;
      try {
        inbox.push({ msg: JSON.parse(dec.decode(mr.buffer.slice(at, at + wc.byteLen))), src: wc.src! });
      } catch {
        inbox.push({ msg: undefined, src: wc.src! });
      }
      qp.postRecv({ wrId: slot, sgList: [{ addr: mr.addr + at, length: 1024, lkey: mr.lkey }] });
    }
  };
  return {
    inbox,
    send(to, msg) {
      const b = enc.encode(JSON.stringify(msg));
      const at = SLOTS * 1024;
      mr.buffer.set(b, at);
      qp.postSend({ wrId: 0, opcode: Opcode.Send, sgList: [{ addr: mr.addr + at, length: b.length, lkey: mr.lkey }], ah: pd.createAh({ address: to }), remoteQpn: CM_QPN, signaled: false });
    },
    async pump(ms, until) {
      const end = performance.now() + ms;
      for (let i = 0; i < 10_000 && performance.now() < end; i++) {
        drain();
        if (until?.()) return;
        await new Promise((r) => setTimeout(r, 10));
      }
      drain();
    },
  };
}
