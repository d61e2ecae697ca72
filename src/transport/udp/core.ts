// The udp link's sans-I/O core: between the engine's frames and the endpoint's payloads. Out:
// the engine's frames wait per peer, in order, until the shell builds datagrams; then they are
// packed into as few DATA payloads as fit (./packer.ts), tagged segments cut to fill them. In:
// the payloads the endpoint delivered in one flush are decoded (./frame-codec.ts) into one
// batch, one engine step; their receive credit returns once that step is done. Failures the
// endpoint reports become one peerLost per peer. The socket shell (./link.ts over ./socket.ts)
// and the deterministic simulation (test/nic/) run this same code.
import type { DeviceAddress } from '../../core/address.js';
import type { Frame, Inbound } from '../../core/frame.js';
import type { LinkEvents, Outbound } from '../../core/link.js';
import type { TxPayload } from './context-options.js';
import type { Delivery, Failure, PeerAddress } from './endpoint-types.js';
import { Deque } from '../../core/deque.js';
import { detachFrame, detachPayload, type Owns } from '../../core/detach.js';
import { decodeFrames } from './frame-codec.js';
import { FramePacker } from './packer.js';

export interface UdpDeviceAddress extends DeviceAddress {
  readonly transport: 'udp';
  readonly host: string;
  readonly port: number;
}

export function isUdpAddress(a: unknown): a is UdpDeviceAddress {
  if (!a || typeof a !== 'object') return false;
  const x = a as Record<string, unknown>;
  return x.transport === 'udp' && typeof x.host === 'string' && x.host.length > 0
    && typeof x.port === 'number' && Number.isInteger(x.port) && x.port > 0 && x.port < 65536;
}

/** What the core needs of the endpoint's owner. */
export interface UdpCoreIo {
  /** Queue one DATA payload; throws when the layer refuses it (queue full, too many peers). */
  send(peer: PeerAddress, payload: TxPayload, dstQpn: number, srcQpn: number): void;
  /** Payloads send() takes for `peer` now (its context's queue has a bound). */
  room(peer: PeerAddress): number;
  /** The incarnation of `peer`'s context (0: none): held payloads belong to the one that refused them. */
  incarnationOf(peer: PeerAddress): number;
  /** `n` deliveries of context `ctx` are processed: their credit returns. */
  release(ctx: number, n: number): void;
}

/** Payloads held for one peer (UdpCore's held list), oldest first. */
interface HeldPayloads {
  items: Deque<{ payload: Uint8Array | Uint8Array[]; dst: number; src: number }>;
  /** The incarnation of the context whose queue was full: a peer that restarted meanwhile (a new one) does not get them; a context renewed with its payloads kept (requeue) does. */
  ctx: number;
}

/** Payloads held for all peers together, and for one; past either a refused payload is lost and its peer failed, as a layer refusal is. */
const HELD_MAX = 1 << 20;
const HELD_PEER_MAX = 1 << 18;

export interface UdpCoreCounters {
  /** Delivered payloads that were not a well-formed engine frame (dropped). */
  badFrames: number;
  /** Frames for an address that is not a UDP device, or that the layer refused (too many peers, past the held bound). */
  undeliverable: number;
  /** Payloads held here because their peer's queue was full, sent as it drained (cumulative). */
  txHeld: number;
  /** Peers reported failed to the engine. */
  linkFailures: number;
  /** Batches handed to the engine, and the frames in them. */
  batches: number;
  frames: number;
}

export class UdpCore {
  readonly counters: UdpCoreCounters;
  readonly packer: FramePacker;
  readonly #io: UdpCoreIo;
  #events?: LinkEvents;
  #closed = false;
  /** The frames of this flush's deliveries: one engine step once they are all in. */
  #batch: Inbound[] = [];
  #frames: Frame[] = [];
  /** Deliveries per context id awaiting release after the engine has processed them. */
  #held = new Map<number, number>();
  /** One DeviceAddress per peer context (stable identity lets the engine skip re-keying). */
  #fromCache = new WeakMap<PeerAddress, UdpDeviceAddress>();
  #toCache = new WeakMap<DeviceAddress, PeerAddress>();
  /** One PeerAddress object per host|port, so a turn's frames to one peer pack together. */
  #peers = new Map<string, PeerAddress>();
  /** Frames waiting for the shell's next datagrams, per peer, in order. */
  #pending = new Map<PeerAddress, Frame[]>();
  #spare = new Map<PeerAddress, Frame[]>();
  /** Emptied per-peer frame lists, reused by transmit (a list per peer per turn otherwise). */
  #lists: Frame[][] = [];
  /** The batch array of the step not running: the two take turns (see deliveriesDone). */
  #spareBatch: Inbound[] = [];
  #inStep = false;
  /** The peer seal() is packing, the room its queue has left and the payloads the layer refused for it (emitPayload's state). */
  #sealPeer: PeerAddress | undefined;
  #sealRoom = 0;
  #sealLost = 0;
  /**
   * Payloads a peer's queue had no room for, in order, sent before any newer as it drains. The
   * engine emits what is posted at once (a send queue of 65,536 small writes, read answers up
   * to the IRD): more than the transport's queue for one peer holds, which is no reason to
   * lose them. Bounded by what is posted and answered, and by HELD_MAX past which the peer is
   * failed as before.
   */
  #waiting = new Map<PeerAddress, HeldPayloads>();
  #heldCount = 0;

  /** `maxPayload`: the endpoint's largest DATA payload; `counters`: the owner's, counted into. */
  constructor(maxPayload: number, io: UdpCoreIo, counters: UdpCoreCounters = { badFrames: 0, undeliverable: 0, txHeld: 0, linkFailures: 0, batches: 0, frames: 0 }) {
    this.packer = new FramePacker(maxPayload);
    this.#io = io;
    this.counters = counters;
  }

  /** Payloads held for peers whose queue was full (see #waiting). */
  get waiting(): number {
    return this.#heldCount;
  }

  start(events: LinkEvents): void {
    this.#events = events;
  }

  /** No more frames either way (the link closed). */
  close(): void {
    this.#closed = true;
    this.#batch = [];
    this.#pending.clear();
    this.#waiting.clear();
    this.#heldCount = 0;
  }

  /** Queue the engine's frames per peer, in order; true when any wait for datagrams. */
  transmit(out: readonly Outbound[]): boolean {
    let to: DeviceAddress | undefined;
    let q: Frame[] | undefined;
    for (const o of out) {
      if (o.to !== to) {
        to = o.to;
        const peer = this.#closed ? undefined : this.#peerOf(to);
        q = peer === undefined ? undefined : this.#pending.get(peer);
        if (peer !== undefined && q === undefined) this.#pending.set(peer, (q = this.#lists.pop() ?? []));
      }
      if (q === undefined) this.counters.undeliverable++;
      else q.push(o.frame);
    }
    return this.#pending.size > 0;
  }

  /** Memory is about to be reused: the views `owns` claims in frames waiting and payloads held become copies (core/detach.ts). */
  detach(owns: Owns): void {
    for (const frames of this.#pending.values()) {
      for (const f of frames) detachFrame(f, owns);
    }
    for (const h of this.#waiting.values()) {
      for (const p of h.items) p.payload = detachPayload(p.payload, owns);
    }
  }

  /** The shell is about to build datagrams: pack what waits, per peer, and hand it to the endpoint. */
  seal(): void {
    if (this.#waiting.size > 0) this.#waiting.forEach(this.#drainHeld);
    if (this.#pending.size === 0) return;
    // Two maps taking turns: a send made while these are packed (a failure report) goes to the other.
    const pending = this.#pending;
    this.#pending = this.#spare;
    this.#spare = pending;
    pending.forEach(this.#sealPeerFrames);
    pending.clear();
  }

  readonly #sealPeerFrames = (frames: Frame[], peer: PeerAddress): void => {
    this.#sealPeer = peer;
    this.#sealRoom = this.#waiting.has(peer) ? 0 : this.#io.room(peer);
    this.#sealLost = 0;
    this.packer.pack(frames, this.#emitPayload);
    frames.length = 0;
    if (this.#lists.length < 64) this.#lists.push(frames);
    const lost = this.#sealLost;
    if (lost > 0) {
      this.counters.undeliverable += lost;
      this.#dropWaiting(peer);
      const addr = this.#fromOf(peer);
      queueMicrotask(() => this.#linkFailed(addr));
    }
  };

  /** `peer`'s held payloads are lost (counted): its link failed, their work fails with it. */
  #dropWaiting(peer: PeerAddress): void {
    const h = this.#waiting.get(peer);
    if (h === undefined) return;
    this.#heldCount -= h.items.length;
    this.counters.undeliverable += h.items.length;
    this.#waiting.delete(peer);
  }

  readonly #emitPayload = (payload: Uint8Array | Uint8Array[], dst: number, src: number): void => {
    if (this.#sealRoom <= 0) {
      const peer = this.#sealPeer!;
      let h = this.#waiting.get(peer);
      if (this.#heldCount < HELD_MAX && (h === undefined || h.items.length < HELD_PEER_MAX)) {
        if (h === undefined) this.#waiting.set(peer, (h = { items: new Deque(), ctx: this.#io.incarnationOf(peer) }));
        h.items.push({ payload, dst, src });
        this.#heldCount++;
        this.counters.txHeld++;
        return;
      }
    }
    this.#sealRoom--;
    try {
      this.#io.send(this.#sealPeer!, payload, dst, src);
    } catch {
      // The layer refused it (send queue full, too many peers, frame larger than a datagram):
      // the frames are lost for good, so the work depending on this peer must fail rather
      // than wait forever. Reported after this flush, never re-entrantly.
      this.#sealLost++;
    }
  };

  /** What a peer's queue has room for again goes, oldest first. */
  readonly #drainHeld = (h: HeldPayloads, peer: PeerAddress): void => {
    if (this.#io.incarnationOf(peer) !== h.ctx) {
      // The context that refused them is gone (the peer restarted, or failed): its failure
      // fails their work; the new context must not get the old QPs' frames.
      this.#dropWaiting(peer);
      return;
    }
    let room = this.#io.room(peer);
    let lost = 0;
    for (; room > 0 && h.items.length > 0; room--) {
      const p = h.items.shift()!;
      this.#heldCount--;
      try {
        this.#io.send(peer, p.payload, p.dst, p.src);
      } catch {
        lost++;
      }
    }
    if (h.items.length === 0) this.#waiting.delete(peer);
    if (lost > 0) {
      this.counters.undeliverable += lost;
      this.#dropWaiting(peer);
      const addr = this.#fromOf(peer);
      queueMicrotask(() => this.#linkFailed(addr));
    }
  };

  /** One payload the endpoint delivered (exactly once): its frames join this flush's batch. */
  delivery(d: Delivery): void {
    this.#held.set(d.ctx, (this.#held.get(d.ctx) ?? 0) + 1);
    if (this.#closed) return;
    const start = this.#frames.length;
    this.counters.badFrames += decodeFrames(d.payload, d.dstQpn, d.srcQpn, this.#frames);
    if (this.#frames.length > start) {
      const from = this.#fromOf(d.from);
      for (let i = start; i < this.#frames.length; i++) this.#batch.push({ from, frame: this.#frames[i]! });
    }
    this.#frames.length = 0;
  }

  /** The flush's deliveries are all in: one engine step for them, then their credit returns. */
  deliveriesDone(): void {
    const batch = this.#batch;
    if (batch.length > 0 && !this.#closed && this.#events) {
      // Deliveries made while the engine runs (re-entrantly) start the other array; a nested
      // step (never seen, but possible) gets a fresh one rather than the array in use.
      const outer = !this.#inStep;
      this.#batch = outer ? this.#spareBatch : [];
      this.counters.batches++;
      this.counters.frames += batch.length;
      this.#inStep = true;
      try {
        this.#events.frames(batch);
      } catch {
        // The engine counts what it cannot use; nothing from the wire may take the device down.
        this.counters.badFrames++;
      } finally {
        if (outer) {
          this.#inStep = false;
          // The engine keeps frames, never the batch array: emptied, it is the next spare.
          batch.length = 0;
          this.#spareBatch = batch;
        }
      }
    }
    if (this.#closed) return;
    if (this.#held.size > 0) {
      this.#held.forEach(this.#release);
      this.#held.clear();
    }
  }

  readonly #release = (n: number, ctx: number): void => this.#io.release(ctx, n);

  /** Payloads the endpoint gave up on: their peers are lost (once each). */
  failed(fs: Failure[]): void {
    const seen = new Set<PeerAddress>();
    for (const f of fs) {
      if (f.reason === 'closed' || seen.has(f.peer)) continue;
      seen.add(f.peer);
      // What waits for the failed context's queue goes with it: the engine fails the work.
      // (The endpoint names the peer with its own object; the waiting list, with this core's.)
      this.#dropWaiting(this.#peers.get(`${f.peer.host}|${f.peer.port}`) ?? f.peer);
      this.#linkFailed(this.#fromOf(f.peer));
    }
  }

  /** Whether the device keeps `p` (connected rc QPs): an idle context probes only such a peer. */
  keepsPeer(p: PeerAddress): boolean {
    return !this.#closed && (this.#events?.keepsPeer?.(this.#fromOf(p)) ?? false);
  }

  #peerOf(to: DeviceAddress): PeerAddress | undefined {
    let p = this.#toCache.get(to);
    if (p === undefined) {
      if (!isUdpAddress(to)) return undefined;
      const key = `${to.host}|${to.port}`;
      p = this.#peers.get(key);
      if (p === undefined) {
        p = { host: to.host, port: to.port };
        if (this.#peers.size < 4096) this.#peers.set(key, p);
      }
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

  #linkFailed(a: UdpDeviceAddress): void {
    if (this.#closed) return;
    this.counters.linkFailures++;
    this.#events?.peerLost(a);
  }
}
