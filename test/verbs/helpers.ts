import { Access, openDevice, type CompletionQueue, type Device, type OpenDeviceOptions, type QpInit, type QueuePair, type WorkCompletion } from '../../src/index.js';

export const ALL = Access.LocalWrite | Access.RemoteRead | Access.RemoteWrite | Access.RemoteAtomic;

export interface Side {
  dev: Device;
  pd: ReturnType<Device['allocPd']>;
  cq: CompletionQueue;
  qp: QueuePair;
}

/** One device with a PD, a CQ and an rc QP; inproc unless `device` says otherwise. */
export async function side(opts: { mss?: number; depth?: number; qp?: Partial<Parameters<Side['pd']['createQp']>[0]>; device?: Partial<OpenDeviceOptions> } = {}): Promise<Side> {
  const dev = await openDevice({ transport: 'inproc', ...opts.device, ...(opts.mss ? { mss: opts.mss } : {}) } as OpenDeviceOptions);
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: opts.depth ?? 1024 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 256, maxRecvWr: 256, maxSge: 8, ...opts.qp });
  return { dev, pd, cq, qp };
}

export async function pair(opts: Parameters<typeof side>[0] = {}): Promise<[Side, Side]> {
  return connectPair(await side(opts), await side(opts));
}

/** Connect the rc QPs of two sides to each other. */
export async function connectPair(a: Side, b: Side): Promise<[Side, Side]> {
  await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
  return [a, b];
}

/** Wait for n completions on cq (event mode), with a generous timeout. */
export async function take(cq: CompletionQueue, n: number, timeoutMs = 5000): Promise<WorkCompletion[]> {
  const out: WorkCompletion[] = [];
  while (out.length < n) {
    await cq.wait(timeoutMs);
    out.push(...cq.poll(n - out.length));
  }
  return out;
}

/** Let every queued microtask and timer-0 run (no completion expected). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

export function fill(buf: Uint8Array, seed: number): Uint8Array {
  let x = seed >>> 0 || 1;
  for (let i = 0; i < buf.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    buf[i] = x & 0xff;
  }
  return buf;
}

export async function closeAll(...sides: Side[]): Promise<void> {
  for (const s of sides) await s.dev.close();
}

/**
 * A device of `transport` (udp and tcp on 127.0.0.1), pushed to `devs` for the test's cleanup,
 * with a PD, a CQ, an rc QP (8 deep each way, one sge; `qpOpts` on top) and a 4 KiB local buffer.
 */
export async function rcSide(transport: 'udp' | 'tcp' | 'inproc', devs: Device[], qpOpts: Partial<QpInit> = {}) {
  const dev = await openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });
  devs.push(dev);
  const pd = dev.allocPd();
  const cq = dev.createCq({ depth: 64 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1, ...qpOpts });
  const mr = pd.regMr(4096, Access.LocalWrite);
  return { dev, pd, cq, qp, mr };
}
