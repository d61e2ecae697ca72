// The engine's Transport over sabre's reliable datagram layer (M5): each engine frame becomes
// the payload of one DATA datagram (engine envelope + DDP segment, ./frame-codec.ts), sent
// through the device's single UdpSocketTransport, which keeps one transport context per peer
// device — shared by every rc and srd QP that talks to it — and delivers each payload exactly
// once, in no promised order (the engine restores rc order from the envelope).
//
// Receive: deliveries that arrive in one event-loop turn (libuv hands up to 32 datagrams per
// wake-up, the socket shell flushes once per turn) are decoded and handed to the engine as ONE
// batch, so one placement call covers many datagrams; their receive credit returns only once
// the engine has processed them.
//
// Failure: a payload the reliability layer gives up on (retry limit, the peer restarted and
// forgot it) is reported to the link-failure handler with the peer's device address; the
// engine fails the work that depended on that peer with RetryExcErr.
import { ErrorCode, SabreError } from '../../errors.js';
import { UNTAGGED_HDR_LEN } from '../../wire/spec.js';
import type { DeviceAddress, Frame, Inbound, Transport } from '../types.js';
import type { Delivery, Failure, PeerAddress } from './endpoint.js';
import { crc32c as kernelCrc32c } from '../../kernels/crc32c.js';
import { decodeFrame, ENV_SEG_LEN, framePayload } from './frame-codec.js';
import { UdpSocketTransport, type UdpSocketOptions } from './socket.js';

export interface UdpDeviceAddress extends DeviceAddress {
  readonly transport: 'udp';
  readonly host: string;
  readonly port: number;
}

export interface UdpTransportOptions extends Omit<UdpSocketOptions, 'manualRelease'> {
  /** Largest datagram (header + payload + trailer). Default 65000: right for loopback. */
  mtu?: number;
  /**
   * The device memory and its kernels: outgoing segment data lives there (registered regions),
   * so the CRC32C kernel runs on it in place instead of copying it to the kernel scratch window.
   */
  deviceMemory?: { memory: WebAssembly.Memory; kernels: { crc32c(ptr: number, len: number, previous: number): number } };
}

export interface UdpTransportCounters {
  /** Delivered payloads that were not a well-formed engine frame (dropped). */
  badFrames: number;
  /** Frames for an address that is not a UDP device, or that the layer refused (queue full). */
  undeliverable: number;
  /** Peers reported failed to the engine. */
  linkFailures: number;
  /** Batches handed to the engine, and the frames in them. */
  batches: number;
  frames: number;
}

/** Default path MTU: one datagram per 64 KiB-ish segment on loopback (see docs/wire.md). */
export const DEFAULT_UDP_MTU = 65000;

export function isUdpAddress(a: unknown): a is UdpDeviceAddress {
  if (!a || typeof a !== 'object') return false;
  const x = a as Record<string, unknown>;
  return x.transport === 'udp' && typeof x.host === 'string' && x.host.length > 0
    && typeof x.port === 'number' && Number.isInteger(x.port) && x.port > 0 && x.port < 65536;
}

export class UdpTransport implements Transport {
  readonly address: UdpDeviceAddress;
  /** Largest DDP payload per segment so envelope + DDP header + payload fit one datagram. */
  readonly mss: number;
  readonly counters: UdpTransportCounters = { badFrames: 0, undeliverable: 0, linkFailures: 0, batches: 0, frames: 0 };
  /** The datagram layer (endpoint counters, contexts) — for stats and tests. */
  udp!: UdpSocketTransport;
  #handler?: (batch: Inbound[]) => void;
  #onLinkFailure?: (to: DeviceAddress) => void;
  #inbox: Inbound[] = [];
  /** Deliveries per context id awaiting release after the engine has processed them. */
  #held = new Map<number, number>();
  #scheduled = false;
  #closed = false;
  /** One DeviceAddress per peer context (stable identity lets the engine skip re-keying). */
  #fromCache = new WeakMap<PeerAddress, UdpDeviceAddress>();
  #toCache = new WeakMap<DeviceAddress, PeerAddress>();

  private constructor(address: UdpDeviceAddress, mss: number) {
    this.address = address;
    this.mss = mss;
  }

  static async open(opts: UdpTransportOptions = {}): Promise<UdpTransport> {
    const mtu = opts.mtu ?? DEFAULT_UDP_MTU;
    if (!Number.isInteger(mtu) || mtu < 256 || mtu > 65507) throw new SabreError(ErrorCode.InvalidArgument, 'mtu must be an integer in 256..65507');
    let self: UdpTransport | undefined;
    const dm = opts.deviceMemory;
    const crc32c = dm
      ? (data: Uint8Array, previous = 0): number =>
        // A view made before a memory.grow has the old buffer object: copy path, still correct.
        data.buffer === dm.memory.buffer ? dm.kernels.crc32c(data.byteOffset, data.length, previous) >>> 0 : kernelCrc32c(data, previous)
      : undefined;
    const { deviceMemory: _, ...sockOpts } = opts;
    const udp = await UdpSocketTransport.open(
      { ...sockOpts, mtu, manualRelease: true, ...(crc32c ? { crc32c } : {}) },
      {
        onDelivery: (d) => {
          if (self) self.#onDelivery(d);
        },
        onFailed: (f) => {
          if (self) self.#onFailed(f);
        },
        onDeliveriesDone: () => {
          if (self) self.#drain();
        },
      },
    );
    const mss = udp.endpoint.maxPayload - ENV_SEG_LEN - UNTAGGED_HDR_LEN;
    // A plain, frozen, JSON-safe object: exactly what a peer passes back to reach us.
    const address = Object.freeze({ transport: 'udp' as const, host: udp.address.host, port: udp.address.port });
    self = new UdpTransport(address, mss);
    self.udp = udp;
    return self;
  }

  onReceive(handler: (batch: Inbound[]) => void): void {
    this.#handler = handler;
  }

  /** Called with a peer's address when the link to it failed (retries exhausted, peer restarted). */
  onLinkFailure(handler: (to: DeviceAddress) => void): void {
    this.#onLinkFailure = handler;
  }

  stats(): Record<string, number> {
    const e = this.udp.endpoint.counters;
    return {
      ...this.counters, rxDatagrams: e.rxDatagrams, txDatagrams: e.txDatagrams, truncated: e.truncated, oversized: e.oversized,
      badCrc: e.badCrc, malformed: e.malformed, unknownContext: e.unknownContext, stale: e.stale, contexts: this.udp.endpoint.contexts,
      contextsReclaimed: e.contextsReclaimed, contextsFailed: e.contextsFailed,
    };
  }

  reachable(to: DeviceAddress): boolean {
    return !this.#closed && isUdpAddress(to);
  }

  send(to: DeviceAddress, frames: Frame[]): void {
    const peer = this.#peerOf(to);
    if (peer === undefined || this.#closed) {
      this.counters.undeliverable += frames.length;
      return;
    }
    for (const f of frames) {
      const dst = f.kind === 'seg' ? f.env.dstQpn : f.dstQpn;
      const src = f.kind === 'seg' ? f.env.srcQpn : f.srcQpn;
      try {
        this.udp.send(peer, framePayload(f), dst, src);
      } catch {
        // The layer refused it (send queue full, too many peers, frame larger than a datagram):
        // the frame is lost for good, so the work depending on this peer must fail rather
        // than wait forever. Reported after the engine's current step, never re-entrantly.
        this.counters.undeliverable++;
        const addr = this.#fromOf(peer);
        queueMicrotask(() => this.#linkFailed(addr));
      }
    }
  }

  /** Fail what is outstanding, close the sockets (the port is free once this resolves). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#inbox = [];
    await this.udp.close();
  }

  #peerOf(to: DeviceAddress): PeerAddress | undefined {
    let p = this.#toCache.get(to);
    if (p === undefined) {
      if (!isUdpAddress(to)) return undefined;
      p = { host: to.host, port: to.port };
      this.#toCache.set(to, p);
    }
    return p;
  }

  #fromOf(peer: PeerAddress): UdpDeviceAddress {
    let a = this.#fromCache.get(peer);
    if (a === undefined) {
      a = Object.freeze({ transport: 'udp' as const, host: peer.host, port: peer.port });
      this.#fromCache.set(peer, a);
    }
    return a;
  }

  #onDelivery(d: Delivery): void {
    this.#held.set(d.ctx, (this.#held.get(d.ctx) ?? 0) + 1);
    const frame = decodeFrame(d.payload, d.dstQpn, d.srcQpn);
    if (frame === undefined) this.counters.badFrames++;
    else this.#inbox.push({ from: this.#fromOf(d.from), frame });
    if (!this.#scheduled) {
      this.#scheduled = true;
      // The socket shell calls onDeliveriesDone after a turn's deliveries (drain then, so the
      // engine's answers leave in the same flush); the microtask is only a backstop.
      queueMicrotask(this.#drain);
    }
  }

  #drain = (): void => {
    if (!this.#scheduled) return;
    this.#scheduled = false;
    const batch = this.#inbox;
    this.#inbox = [];
    if (batch.length > 0 && !this.#closed && this.#handler) {
      this.counters.batches++;
      this.counters.frames += batch.length;
      try {
        this.#handler(batch);
      } catch {
        // The engine counts what it cannot use; nothing from the wire may take the device down.
        this.counters.badFrames++;
      }
    }
    if (this.#closed) return;
    for (const [ctx, n] of this.#held) this.udp.release(ctx, n);
    this.#held.clear();
  };

  #onFailed(fs: Failure[]): void {
    const seen = new Set<PeerAddress>();
    for (const f of fs) {
      if (f.reason === 'closed' || seen.has(f.peer)) continue;
      seen.add(f.peer);
      this.#linkFailed(this.#fromOf(f.peer));
    }
  }

  #linkFailed(a: UdpDeviceAddress): void {
    if (this.#closed) return;
    this.counters.linkFailures++;
    this.#onLinkFailure?.(a);
  }
}
