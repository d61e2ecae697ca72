// The active side of each perf test. Bandwidth tests keep tx-depth operations in flight
// round-robin over the QPs; latency tests run one operation at a time. write_lat and
// send_lat are ping-pongs reported as half the round trip (perftest's convention);
// read_lat and atomic_lat report the full round trip.
import { Opcode, WcOpcode } from '../../index.js';
import { latencyStats, type LatencyStats } from '../stats.js';
import { reap } from './completions.js';
import type { ControlPeer } from './control.js';
import type { PerfTest } from './options.js';
import type { PerfSide, SideInfo } from './side.js';

export interface BwResult {
  bytes: number;
  iterations: number;
  seconds: number;
  bwPeakMBs: number;
  bwAvgMBs: number;
  msgRateMpps: number;
}

export interface LatResult extends LatencyStats {
  bytes: number;
  iterations: number;
}

const MB = 1_000_000;
const now = () => performance.now();

function peakMBs(times: Float64Array, n: number, size: number, avg: number): number {
  // Completions arrive in bursts (one event-loop turn reaps many), so a window must span a
  // few timer ticks before its rate means anything; with no such window, peak = average.
  const w = Math.max(1, Math.floor(n / 10));
  let best = 0;
  for (let i = 0; i + w < n; i += w) {
    const dt = (times[i + w]! - times[i]!) / 1000;
    if (dt >= 0.0005) best = Math.max(best, (w * size) / dt / MB);
  }
  return Math.max(best, avg);
}

function bwOpcode(test: PerfTest): number {
  return test === 'write_bw' ? Opcode.RdmaWrite : test === 'read_bw' ? Opcode.RdmaRead : Opcode.Send;
}

export async function runBw(side: PerfSide, peer: SideInfo, ctl: ControlPeer, size: number): Promise<BwResult> {
  const o = side.o;
  await ctl.call('prepare', { size });
  const opcode = bwOpcode(o.test);
  const target = o.durationS !== undefined ? Number.POSITIVE_INFINITY : o.iters;
  let cap = o.durationS !== undefined ? 1 << 16 : o.iters + 1;
  let times = new Float64Array(cap);
  let posted = 0;
  let done = 0;
  const t0 = now();
  const deadline = o.durationS !== undefined ? t0 + o.durationS * 1000 : Number.POSITIVE_INFINITY;
  const post = () => {
    while (posted - done < o.txDepth && posted < target && now() < deadline) {
      const q = posted % side.qps.length;
      const slot = posted % Math.min(side.slots, peer.slots);
      side.qps[q]!.postSend({
        wrId: posted,
        opcode,
        sgList: [{ addr: side.slotAddr(slot), length: size, lkey: side.mr.lkey }],
        ...(opcode === Opcode.Send ? {} : { remoteAddr: peer.vaddr + slot * peer.slotBytes, rkey: peer.rkey }),
        ...side.route(q, peer),
      } as never);
      posted++;
    }
  };
  post();
  while (done < posted) {
    const wcs = await reap(side);
    const t = now();
    for (let i = 0; i < wcs.length; i++) {
      if (done >= cap) {
        cap *= 2;
        const bigger = new Float64Array(cap);
        bigger.set(times);
        times = bigger;
      }
      times[done++] = t;
    }
    post();
  }
  const seconds = (times[done - 1]! - t0) / 1000;
  await ctl.call('finish', { size, iterations: done });
  return {
    bytes: size,
    iterations: done,
    seconds,
    bwPeakMBs: peakMBs(times, done, size, (done * size) / seconds / MB),
    bwAvgMBs: (done * size) / seconds / MB,
    msgRateMpps: done / seconds / 1e6,
  };
}

export async function runLat(side: PerfSide, peer: SideInfo, ctl: ControlPeer, size: number): Promise<LatResult> {
  const o = side.o;
  const pingPong = o.test === 'write_lat' || o.test === 'send_lat';
  const iterations = o.durationS !== undefined ? Number.POSITIVE_INFINITY : o.iters;
  await ctl.call('prepare', { size, iterations: o.durationS !== undefined ? -1 : o.iters });
  const samples: number[] = [];
  const deadline = o.durationS !== undefined ? now() + o.durationS * 1000 : Number.POSITIVE_INFINITY;
  const qp = side.qps[0]!;
  const route = side.route(0, peer);
  const local = { addr: side.slotAddr(0), length: size, lkey: side.mr.lkey };
  if (pingPong) qp.postRecv({ wrId: -1, sgList: o.test === 'send_lat' ? [local] : [] } as never);
  for (let i = 0; i < iterations && now() < deadline; i++) {
    const t0 = now();
    if (o.test === 'write_lat') {
      qp.postSend({ wrId: i, opcode: Opcode.RdmaWriteWithImm, imm: i >>> 0, sgList: [local], remoteAddr: peer.vaddr, rkey: peer.rkey, ...route } as never);
    } else if (o.test === 'send_lat') {
      qp.postSend({ wrId: i, opcode: Opcode.Send, sgList: [local], ...route } as never);
    } else if (o.test === 'read_lat') {
      qp.postSend({ wrId: i, opcode: Opcode.RdmaRead, sgList: [local], remoteAddr: peer.vaddr, rkey: peer.rkey, ...route } as never);
    } else {
      qp.postSend({ wrId: i, opcode: Opcode.AtomicFetchAdd, compareAdd: 1n, sgList: [{ ...local, length: 8 }], remoteAddr: peer.vaddr, rkey: peer.rkey, ...route } as never);
    }
    // A ping-pong iteration ends when the pong arrives (its own send completion may come
    // before or after); the others end with their own completion.
    let sent = false;
    let ponged = !pingPong;
    while (!(sent && ponged)) {
      for (const wc of await reap(side, 4)) {
        if (wc.opcode === WcOpcode.Recv || wc.opcode === WcOpcode.RecvRdmaWithImm) {
          ponged = true;
          qp.postRecv({ wrId: -1, sgList: o.test === 'send_lat' ? [local] : [] } as never);
        } else sent = true;
      }
    }
    const rtt = now() - t0;
    samples.push((pingPong ? rtt / 2 : rtt) * 1000);
  }
  await ctl.call('finish', { size, iterations: samples.length });
  return { bytes: size, iterations: samples.length, ...latencyStats(samples) };
}
