// The udp link: the engine's frames over sabre's reliable datagram layer (M5). The frames of
// one event-loop turn for one peer are packed into as few DATA payloads as fit (engine envelope
// + DDP segment per frame, ./packer.ts, ./frame-codec.ts) and sent through the device's
// sockets (./socket.ts UdpSockets around the sans-I/O ./endpoint.ts), which keep one transport
// context per peer device — shared by every rc and srd QP that talks to it — and deliver each
// payload exactly once, in no promised order (the engine restores rc order from the envelope).
// Tagged segments are cut here, to fill datagrams (Link.cutsTagged): the engine hands each
// tagged message over whole.
//
// Receive: deliveries that arrive in one event-loop turn (libuv hands up to 32 datagrams per
// wake-up, the socket shell flushes once per turn) are decoded and handed to the engine as ONE
// batch, so one placement call covers many datagrams; their receive credit returns only once
// the engine has processed them. Each datagram is copied once, on arrival, into a receive area
// in device memory: its CRC32C is checked there in place by the WASM kernel and the engine
// places its segments from there (no staging copy). The area is reused after every turn's
// batch (the engine keeps no view of a frame past its receive step).
//
// Send: frames wait until the socket shell's flush (once per turn, after the turn's deliveries
// and the microtasks they woke, so a user's answer to a completion rides with the engine's ack
// and the transport ACK in one datagram), then are packed.
//
// Failure: a payload the reliability layer gives up on (retry limit, the peer restarted and
// forgot it), or an idle peer that stopped answering keepalive probes while the device keeps
// it (LinkEvents.keepsPeer: connected rc QPs), is reported as the peerLost event with the
// peer's device address; the engine fails the work that depended on that peer with RetryExcErr.
import type { DeviceAddress } from '../../core/address.js';
import type { Owns } from '../../core/detach.js';
import { ErrorCode, SabreError } from '../../core/errors.js';
import type { Link, LinkEvents, Outbound, TransportContextStats } from '../../core/link.js';
import { UNTAGGED_HDR_LEN } from '../../wire/spec.js';
import { maxPayloadFor } from './endpoint.js';
import { crc32cIn } from '../../kernels/crc32c-any.js';
import { XXH3_STATE_BYTES, Xxh3Parts, type Xxh3Memory } from '../../kernels/xxh3-64.js';
import { ENV_SEG_LEN } from './frame-codec.js';
import type { DataPlaneWorkers } from '../../dataplane/workers.js';
import { CrcOffload } from './crc-offload.js';
import { isUdpAddress, UdpCore, type UdpCoreCounters, type UdpDeviceAddress } from './core.js';
import type { IntegrityMode } from './integrity.js';
import { type RxArea, UdpSockets, type UdpSocketOptions } from './socket.js';

export { isUdpAddress, type UdpDeviceAddress } from './core.js';

export interface UdpLinkOptions extends Omit<UdpSocketOptions, 'manualRelease' | 'offload' | 'rxSpareAreas'> {
  /** Largest datagram (header + payload + trailer). Default 65000: right for loopback. */
  mtu?: number;
  /**
   * The device memory and its kernels: outgoing segment data lives there (registered regions),
   * so the CRC32C kernel runs on it in place instead of copying it to the kernel scratch window.
   */
  deviceMemory?: {
    memory: WebAssembly.Memory;
    kernels: { crc32c(ptr: number, len: number, previous: number): number } & Xxh3Memory['kernels'];
    alloc(length: number, align?: number): number;
    u8(): Uint8Array;
    dataView(): DataView;
  };
  /** Bytes of device memory for the receive area (default: 64 datagrams of the MTU, at most 4 MiB; 0: none, datagrams stay in node Buffers). */
  rxAreaBytes?: number;
  /**
   * Data-plane workers over deviceMemory: the CRC32C of large datagrams (both directions) runs
   * on them (./crc-offload.ts). The transport owns them from here: close() stops them.
   */
  workers?: DataPlaneWorkers;
  /** Datagrams (and transmit parts) at least this long go to the workers. Default 8 KiB. */
  offloadMinBytes?: number;
}

export interface UdpLinkCounters extends UdpCoreCounters {
  /** Frames sent, the DATA payloads they were packed into, tagged segments cut to fill one. */
  txFrames: number;
  txPayloads: number;
  txCuts: number;
  /** Datagrams copied into the device-memory receive area, and those that found it full. */
  rxInDevice: number;
  rxAreaFull: number;
}

/** Datagrams copied on arrival into a bump area of device memory, reset once per turn. */
class DeviceRxArea implements RxArea {
  #used = 0;
  counters = { copied: 0, full: 0 };
  constructor(private readonly dm: NonNullable<UdpLinkOptions['deviceMemory']>, private readonly base: number, private readonly size: number) {}

  copy(msg: Uint8Array): Uint8Array | undefined {
    const n = msg.length;
    if (this.#used + n > this.size) {
      this.counters.full++;
      return undefined;
    }
    const at = this.base + this.#used;
    const u8 = this.dm.u8();
    u8.set(msg, at);
    this.#used += (n + 63) & ~63;
    this.counters.copied++;
    return u8.subarray(at, at + n);
  }

  unCopy(last: Uint8Array): void {
    const n = (last.length + 63) & ~63;
    if (last.byteOffset === this.dm.u8().byteOffset + this.base + this.#used - n) this.#used -= n;
  }

  reset(): void {
    this.#used = 0;
  }
}

/** Default path MTU: one datagram per 64 KiB-ish segment on loopback (see docs/wire.md). */
export const DEFAULT_UDP_MTU = 65000;

export class UdpLink implements Link {
  readonly address: UdpDeviceAddress;
  /** Largest DDP payload per segment so envelope + DDP header + payload fit one datagram. */
  readonly mss: number;
  /** The packer cuts tagged segments to fill datagrams (the engine leaves them whole). */
  readonly cutsTagged = true;
  get mtu(): number {
    return this.udp.endpoint.opts.mtu;
  }
  get integrity(): IntegrityMode {
    return this.udp.endpoint.opts.integrity;
  }
  readonly counters: UdpLinkCounters;
  /** The datagram layer (endpoint counters, contexts) — for stats and tests. */
  readonly udp: UdpSockets;
  readonly #core: UdpCore;
  #events?: LinkEvents;
  #closed = false;
  #rx?: DeviceRxArea;
  #offload?: CrcOffload;

  private constructor(address: UdpDeviceAddress, mss: number, udp: UdpSockets, core: UdpCore, counters: UdpLinkCounters) {
    this.address = address;
    this.mss = mss;
    this.udp = udp;
    this.#core = core;
    this.counters = counters;
  }

  static async open(opts: UdpLinkOptions = {}): Promise<UdpLink> {
    const mtu = opts.mtu ?? DEFAULT_UDP_MTU;
    if (!Number.isInteger(mtu) || mtu < 256 || mtu > 65507) throw new SabreError(ErrorCode.InvalidArgument, 'mtu must be an integer in 256..65507');
    let self: UdpLink | undefined;
    const dm = opts.deviceMemory;
    const crc32c = dm ? (data: Uint8Array, previous = 0): number => crc32cIn(dm, data, previous) : undefined;
    // XXH3-64 trailers: payloads in device memory are hashed in place, headers staged next to the record.
    const XXH3_STAGE = 64 * 1024;
    const xa = dm ? dm.alloc(XXH3_STATE_BYTES + 64 + XXH3_STAGE, 64) : 0;
    const xxh3 = dm ? new Xxh3Parts(dm, xa, xa + XXH3_STATE_BYTES, xa + XXH3_STATE_BYTES + 64, XXH3_STAGE) : undefined;
    const { deviceMemory: _, rxAreaBytes, workers, offloadMinBytes, ...sockOpts } = opts;
    if (workers !== undefined && dm === undefined) throw new SabreError(ErrorCode.InvalidArgument, 'workers need deviceMemory');
    const areaBytes = dm ? rxAreaBytes ?? Math.min(4 << 20, 64 * mtu) : 0;
    const rx = dm && areaBytes > 0 ? new DeviceRxArea(dm, dm.alloc(areaBytes, 64), areaBytes) : undefined;
    // With workers, the batch a worker checks and the one being processed keep their areas while a third fills.
    const spare = dm && rx && workers ? [0, 1].map(() => new DeviceRxArea(dm, dm.alloc(areaBytes, 64), areaBytes)) : undefined;
    const offload = dm && workers ? new CrcOffload(dm, workers, { ...(offloadMinBytes !== undefined ? { minBytes: offloadMinBytes } : {}) }) : undefined;
    const counters: UdpLinkCounters = {
      badFrames: 0, undeliverable: 0, txHeld: 0, linkFailures: 0, batches: 0, frames: 0, txFrames: 0, txPayloads: 0, txCuts: 0, rxInDevice: 0, rxAreaFull: 0,
    };
    let udp: UdpSockets | undefined;
    // The core hands the sockets payloads and releases only inside their flushes (seal, and
    // the deliveries' step): after they are open.
    const core = new UdpCore(maxPayloadFor(mtu), {
      send: (peer, payload, dst, src) => udp!.send(peer, payload, dst, src),
      room: (peer) => udp!.sendRoom(peer),
      incarnationOf: (peer) => udp!.incarnationOf(peer),
      release: (ctx, n) => udp!.release(ctx, n),
    }, counters);
    try {
      udp = await UdpSockets.open(
        {
          ...sockOpts, mtu, manualRelease: true, deferAnswers: true, ...(crc32c ? { crc32c } : {}), ...(xxh3 ? { xxh3 } : {}), ...(rx ? { rxArea: rx } : {}),
          ...(spare ? { rxSpareAreas: spare } : {}), ...(offload ? { offload } : {}),
          // An idle context probes its peer only while the device keeps it (connected rc QPs).
          keepPeer: (p) => core.keepsPeer(p),
        },
        {
          onDelivery: (d) => core.delivery(d),
          onFailed: (f) => core.failed(f),
          onDeliveriesDone: () => core.deliveriesDone(),
          onBeforePoll: () => core.seal(),
          // The driver's one timer covers the endpoint's deadlines (Link.pollTimeout).
          onTimerChanged: () => {
            if (self) self.#timerChanged();
          },
        },
      );
    } catch (e) {
      await offload?.close();
      throw e;
    }
    const mss = udp.endpoint.maxPayload - ENV_SEG_LEN - UNTAGGED_HDR_LEN;
    // A plain, frozen, JSON-safe object: exactly what a peer passes back to reach us.
    const address = Object.freeze({ transport: 'udp' as const, host: udp.address.host, port: udp.address.port });
    self = new UdpLink(address, mss, udp, core, counters);
    if (rx) self.#rx = rx;
    if (offload) self.#offload = offload;
    return self;
  }

  start(events: LinkEvents): void {
    this.#events = events;
    this.#core.start(events);
  }

  pollTimeout(): number {
    return this.udp.pollTimeout();
  }

  handleTimeout(now: number): void {
    this.udp.handleTimeout(now);
  }

  /** Held: new DATA from every peer is dropped unacknowledged behind a shut window (its sender retransmits, and knows we are alive), acks still come in. */
  holdReceive(hold: boolean): void {
    this.udp.holdReceive(hold);
  }

  /** Outstanding work (not just idle reclaim): a timer for it keeps the process alive. */
  get busy(): boolean {
    return this.udp.busy;
  }

  stats(): Record<string, number> {
    const pc = this.#core.packer.counters;
    this.counters.txFrames = pc.frames;
    this.counters.txPayloads = pc.payloads;
    this.counters.txCuts = pc.cuts;
    if (this.#rx) {
      this.counters.rxInDevice = this.#rx.counters.copied;
      this.counters.rxAreaFull = this.#rx.counters.full;
    }
    const sc = this.udp.counters;
    return {
      ...this.counters, rxOffloaded: sc.rxOffloaded, rxOffloadedBadCrc: sc.rxOffloadedBadCrc, txOffloaded: sc.txOffloaded,
      offloadFailures: sc.offloadFailures, offloadBackoffs: sc.offloadBackoffs,
      // Every endpoint counter (refused input included) and table size.
      ...this.udp.endpoint.stats(),
      ...Object.fromEntries(this.udp.counters.txBySocket.map((n, i) => [`txSocket${i}`, n])),
    };
  }

  contextStats(max: number): TransportContextStats[] {
    return this.udp.endpoint.contextStats(max);
  }

  reachable(to: DeviceAddress): boolean {
    return !this.#closed && isUdpAddress(to);
  }

  /** Memory is about to be reused (Link.detach): frames waiting, payloads held, queued, in flight or in datagrams not yet sent. */
  detach(owns: Owns): boolean {
    this.#core.detach(owns);
    return this.udp.detach(owns);
  }

  /** The frames wait per peer until the socket shell builds datagrams (this turn's flush). */
  transmit(out: readonly Outbound[]): void {
    if (this.#core.transmit(out)) this.udp.requestFlush();
  }

  /** Fail what is outstanding, close the sockets (the port is free once this resolves). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // The sockets' last flush first: it packs what the engine queued (acks, close notices).
    await this.udp.close();
    this.#core.close();
    await this.#offload?.close();
  }

  #timerChanged(): void {
    if (!this.#closed) this.#events?.timerChanged?.();
  }
}
