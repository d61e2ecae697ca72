// Two devices with one rc QP each, connected: the setup of the deregister-fence tests. The
// sender's QP is made on NIC thread `thread` of `workers` (QP q lives on thread q mod workers).
import { expect } from 'vitest';
import { openDevice, type QueuePair } from '../../src/index.js';

export async function fencePair(transport: 'udp' | 'tcp' | 'inproc', workers: number, cleanup: (() => Promise<void> | void)[], opts: { thread?: number; peerWorkers?: number } = {}) {
  const open = (w: number) => openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0, workers: w });
  const a = await open(workers);
  const b = await open(opts.peerWorkers ?? workers);
  cleanup.push(() => a.close(), () => b.close());
  const pa = a.allocPd();
  const pb = b.allocPd();
  const cqa = a.createCq({ depth: 16 });
  const cqb = b.createCq({ depth: 16 });
  const init = { type: 'rc' as const, sendCq: cqa, recvCq: cqa, maxSendWr: 8, maxRecvWr: 4, maxSge: 1 };
  const thread = opts.thread ?? 0;
  let qa: QueuePair = pa.createQp(init);
  for (let i = 0; i < 64 && workers > 1 && qa.qpn % workers !== thread; i++) qa = pa.createQp(init);
  expect(workers < 2 || qa.qpn % workers === thread).toBe(true);
  const qb = pb.createQp({ type: 'rc', sendCq: cqb, recvCq: cqb, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
  await Promise.all([qa.connect({ address: b.address, qpn: qb.qpn }), qb.connect({ address: a.address, qpn: qa.qpn })]);
  return { a, b, pa, pb, cqa, cqb, qa, qb };
}
