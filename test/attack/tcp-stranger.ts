// Shared by the attacks on tcp's raw QP-to-QP connect (tcp-qp-hijack, tcp-stranger-rtr): two tcp
// devices with one rc QP each, told apart as the initiator and the side that waits, and a
// stranger's socket to the waiting side from 127.0.0.2 that records what it is sent.
import net from 'node:net';
import { type Device, openDevice, type QueuePair } from '../../src/index.js';

export interface RawTcpPair {
  /** The device whose (host, port) sorts lower dials; the other waits for its Request. */
  ini: Device;
  resp: Device;
  qi: QueuePair;
  qr: QueuePair;
  /** The stranger's socket to `resp`, connected; `got()` is every byte it was sent so far. */
  stranger: net.Socket;
  got: () => Buffer;
  close: () => Promise<void>;
}

export async function rawTcpPairWithStranger(workers: number): Promise<RawTcpPair> {
  const a = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers });
  const b = await openDevice({ transport: 'tcp', host: '127.0.0.1', port: 0, workers });
  const [ini, resp] = (a.address.port as number) < (b.address.port as number) ? [a, b] : [b, a];
  const mk = (d: Device) => {
    const pd = d.allocPd();
    const cq = d.createCq({ depth: 16 });
    return pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
  };
  const s = net.connect({ host: '127.0.0.1', port: resp.address.port as number, localAddress: '127.0.0.2' });
  const got: Buffer[] = [];
  s.on('error', () => {});
  s.on('data', (d: Buffer) => got.push(d));
  await new Promise<void>((r) => s.once('connect', () => r()));
  return {
    ini, resp, qi: mk(ini), qr: mk(resp), stranger: s, got: () => Buffer.concat(got),
    close: async () => {
      s.destroy();
      await a.close();
      await b.close();
    },
  };
}
