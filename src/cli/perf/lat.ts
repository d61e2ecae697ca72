// Latency tests, one operation at a time. write_lat and send_lat are ping-pongs reported as half
// the round trip (perftest's convention); read_lat and atomic_lat report the full round trip.
// write_lat without immediate works as perftest's: each side polls the last byte of the buffer
// the peer writes into; with --write_with_imm the pong is a receive completion instead.
import { setImmediate as yieldToLoop, setTimeout as sleep } from 'node:timers/promises';
import { Opcode } from '../../index.js';
import type { Responder } from './bw.js';
import { isRecv, pollNow, reap } from './completions.js';
import type { PerfSide, SideInfo } from './side.js';

/** Slot the peer's messages land in, and the slot our own messages are sent from. */
const SINK = 0;
const SOURCE = 1;

export interface LatRun {
  size: number;
  iters: number;
  durationS: number | undefined;
  gapUs: number;
}

/** The value written into the last byte for ping `n` (never 0, which fresh memory holds). */
export const pingValue = (n: number) => (n % 255) + 1;

function ping(side: PerfSide, peer: SideInfo, size: number, i: number): void {
  const p = side.p;
  const local = { addr: side.slotAddr(SOURCE), length: size, lkey: side.mr.lkey };
  const remote = { remoteAddr: peer.vaddr + SINK * peer.slotBytes, rkey: peer.rkey };
  const route = side.route(0, peer);
  const qp = side.qps[0]!;
  const wr =
    p.verb === 'write'
      ? p.imm
        ? { opcode: Opcode.RdmaWriteWithImm, imm: i >>> 0, sgList: [local], ...remote }
        : { opcode: Opcode.RdmaWrite, sgList: [local], ...remote }
      : p.verb === 'send'
        ? p.imm
          ? { opcode: Opcode.SendWithImm, imm: i >>> 0, sgList: [local] }
          : { opcode: Opcode.Send, sgList: [local] }
        : p.verb === 'read'
          ? { opcode: Opcode.RdmaRead, sgList: [local], ...remote }
          : p.atomicType === 'CMP_AND_SWAP'
            ? { opcode: Opcode.AtomicCmpSwap, compareAdd: 0n, swap: BigInt(i), sgList: [{ ...local, length: 8 }], ...remote }
            : { opcode: Opcode.AtomicFetchAdd, compareAdd: 1n, sgList: [{ ...local, length: 8 }], ...remote };
  qp.postSend({ wrId: i, ...wr, ...route } as never);
}

async function gap(us: number): Promise<void> {
  if (us <= 0) return;
  if (us >= 1000) return void (await sleep(us / 1000));
  const until = performance.now() + us / 1000;
  while (performance.now() < until) {
    /* spin: a timer cannot wait less than a millisecond */
  }
}

/**
 * The active side: `count` pings (or until the deadline), returning each one's time in µs
 * (halved for ping-pongs). `first` numbers the pings so the last-byte values run on across
 * warm-up and measurement without repeating.
 */
export async function runLatClient(
  side: PerfSide, peer: SideInfo, run: LatRun, responder: Responder | undefined, first: number, record: boolean, count?: { done: number },
): Promise<number[]> {
  const p = side.p;
  const pingPong = p.verb === 'write' || p.verb === 'send';
  const polled = p.verb === 'write' && !p.imm;
  const samples: number[] = [];
  const deadline = run.durationS !== undefined ? performance.now() + run.durationS * 1000 : Infinity;
  const sink = side.slotView(SINK, run.size);
  const src = side.slotView(SOURCE, run.size);
  const last = run.size - 1;
  let ponged = false;
  if (responder) responder.onMessage = () => (ponged = true);
  for (let k = 0; k < run.iters && performance.now() < deadline; k++) {
    const n = first + k;
    const v = pingValue(n);
    src[last] = v;
    ponged = false;
    const t0 = performance.now();
    ping(side, peer, run.size, n);
    if (polled) {
      // perftest's write_lat: the pong has arrived when its last byte has.
      while (sink[last] !== v) {
        pollNow(side);
        await yieldToLoop();
      }
    } else {
      let sent = false;
      while (!(sent && (ponged || !pingPong))) {
        for (const wc of await reap(side, 8)) {
          if (isRecv(wc)) responder!.onRecv(wc);
          else sent = true;
        }
      }
    }
    const rtt = performance.now() - t0;
    if (record) samples.push((pingPong ? rtt / 2 : rtt) * 1000);
    if (count) count.done++;
    await gap(run.gapUs);
  }
  if (responder) responder.onMessage = undefined;
  // Sends of the ping-pongs may complete after their pong: leave nothing behind for the next size.
  pollNow(side);
  return samples;
}

/**
 * The passive side of a ping-pong: answer each ping with a pong of the same size. Runs from
 * `start` to `stop`; send completions of the pongs are drained by the side's pump.
 */
export class LatServer {
  #stopping = false;
  #loop: Promise<void> | undefined;
  #expect = 1;
  #size = 0;

  constructor(
    readonly side: PerfSide,
    readonly peer: () => SideInfo,
    readonly responder: Responder | undefined,
  ) {}

  start(size: number): void {
    const p = this.side.p;
    if (p.verb !== 'write' && p.verb !== 'send') return;
    // A new size starts the last-byte values afresh; warm-up and measurement share the run.
    if (size !== this.#size) {
      this.#size = size;
      this.#expect = 1;
    }
    this.#stopping = false;
    if (p.verb === 'write' && !p.imm) this.#loop = this.#pollLoop(size);
    else if (this.responder) this.responder.onMessage = (wc) => ping(this.side, this.peer(), size, wc.imm ?? 0);
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#loop;
    this.#loop = undefined;
    if (this.responder) this.responder.onMessage = undefined;
  }

  async #pollLoop(size: number): Promise<void> {
    const sink = this.side.slotView(SINK, size);
    const src = this.side.slotView(SOURCE, size);
    const last = size - 1;
    while (!this.#stopping) {
      if (sink[last] === this.#expect) {
        src[last] = this.#expect;
        ping(this.side, this.peer(), size, this.#expect);
        this.#expect = (this.#expect % 255) + 1;
      } else await yieldToLoop();
    }
  }
}
