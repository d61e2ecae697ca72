// A real peer restart (the device crashed and opened again on the same port, a new secret)
// is still detected, on real sockets on 127.0.0.1, now that a restart claim must be proven:
// - we post first: the new incarnation answers our datagram with a RESET it cannot sign with
//   the old token, and our work fails at once (before: the RESET was taken as "context
//   reclaimed", the work was resent into a device that had no such QP, and only the engine's
//   8 s watchdog failed it);
// - it speaks first: its first contact is a restart claim, proven one round trip later by
//   its cookie echo; only then does what we had in flight to the old incarnation fail.
import { afterEach, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../../src/dataplane/device-memory.js';
import { Access, Opcode, QpState, WcStatus, type CompletionQueue, type QueuePair, type WorkCompletion } from '../../../src/index.js';
import { UdpLink } from '../../../src/transport/udp/link.js';
import { Device } from '../../../src/verbs/device.js';

const ALL = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead | Access.RemoteAtomic;
const open: Device[] = [];
afterEach(async () => {
  for (const d of open.splice(0)) await d.close();
});

const links = new WeakMap<Device, UdpLink>();

async function device(port = 0): Promise<Device> {
  const mem = await DeviceMemory.create({ maximumBytes: 64 << 20, workerSlots: 0 });
  const t = await UdpLink.open({ host: '127.0.0.1', port, mtu: 1500 });
  const d = new Device(mem, t, { mss: t.mss });
  links.set(d, t);
  open.push(d);
  return d;
}

async function take(cq: CompletionQueue, n: number, ms: number): Promise<WorkCompletion[]> {
  const out: WorkCompletion[] = [];
  const deadline = Date.now() + ms;
  while (out.length < n) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`${out.length}/${n} completions in ${ms} ms`);
    await cq.wait(left);
    out.push(...cq.poll(n - out.length));
  }
  return out;
}

function rc(d: Device): { qp: QueuePair; cq: CompletionQueue; mr: ReturnType<ReturnType<Device['allocPd']>['regMr']> } {
  const pd = d.allocPd();
  const cq = d.createCq({ depth: 64 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 2 });
  return { qp, cq, mr: pd.regMr(4096, ALL) };
}

/**
 * A and B connected, one write through; B then crashes: its sockets close (the port is freed)
 * and nothing is said — a graceful dev.close() would tell A, and there would be no restart to
 * detect.
 */
async function connectedThenGone() {
  const a = await device();
  const b = await device();
  const port = (b.address as unknown as { port: number }).port;
  const x = rc(a);
  const y = rc(b);
  await Promise.all([x.qp.connect({ address: b.address, qpn: y.qp.qpn }), y.qp.connect({ address: a.address, qpn: x.qp.qpn })]);
  x.qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: x.mr.addr, length: 64, lkey: x.mr.lkey }], remoteAddr: y.mr.addr, rkey: y.mr.rkey });
  expect((await take(x.cq, 1, 5000))[0]).toMatchObject({ wrId: 1, status: WcStatus.Success });
  await links.get(b)!.close();
  return { a, x, y, port };
}

describe('a peer restarted on the same port is detected', () => {
  it('we post first: its unsigned RESET fails our work at once', async () => {
    const { a, x, y, port } = await connectedThenGone();
    await device(port); // the new incarnation: same address, new secret, no QPs
    const t0 = performance.now();
    x.qp.postSend({ wrId: 2, opcode: Opcode.RdmaWrite, sgList: [{ addr: x.mr.addr, length: 64, lkey: x.mr.lkey }], remoteAddr: y.mr.addr, rkey: y.mr.rkey });
    const wc = (await take(x.cq, 1, 15_000))[0]!;
    const ms = performance.now() - t0;
    console.log(`restart detected by RESET: work failed ${ms.toFixed(1)} ms after it was posted`);
    expect(wc).toMatchObject({ wrId: 2, status: WcStatus.RetryExcErr });
    expect(x.qp.state).toBe(QpState.Error);
    expect(a.stats().link!.peerRestarts).toBe(1);
    expect(ms).toBeLessThan(3000);
  }, 30_000);

  it('it speaks first: its cookie echo proves the restart, then our in-flight work fails', async () => {
    const { a, x, y, port } = await connectedThenGone();
    // In flight to the old incarnation, never to be acked (nothing listens on the port now).
    x.qp.postSend({ wrId: 3, opcode: Opcode.RdmaWrite, sgList: [{ addr: x.mr.addr, length: 64, lkey: x.mr.lkey }], remoteAddr: y.mr.addr, rkey: y.mr.rkey });
    await new Promise((r) => setTimeout(r, 20));
    const b2 = await device(port);
    const t0 = performance.now();
    // The new incarnation contacts us (its hello to some QP of ours).
    const z = rc(b2);
    void z.qp.connect({ address: a.address, qpn: x.qp.qpn + 1000, timeoutMs: 2000 } as never).catch(() => {});
    const wc = (await take(x.cq, 1, 15_000))[0]!;
    const ms = performance.now() - t0;
    console.log(`restart detected by a proven first contact: in-flight work failed ${ms.toFixed(1)} ms after the new incarnation spoke`);
    expect(wc).toMatchObject({ wrId: 3, status: WcStatus.RetryExcErr });
    const st = a.stats().link!;
    expect(st.restartClaims).toBeGreaterThanOrEqual(1);
    expect(st.peerRestarts).toBe(1);
    expect(ms).toBeLessThan(3000);
  }, 30_000);
});
