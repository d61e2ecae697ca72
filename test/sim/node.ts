// A simulated host: the whole NIC driver — its RDMAP engine over real device memory, the udp
// link's sans-I/O core (packing, framing, batching, credit), the UDP endpoint (handshake,
// reliability, integrity trailers) and the driver's one timer — on the simulated network's
// clock. Only the sockets are missing: the endpoint is polled by ./net.ts.
import type { DeviceAddress } from '../../src/core/address.js';
import type { Frame, Inbound } from '../../src/core/frame.js';
import type { Link, LinkEvents, Outbound } from '../../src/core/link.js';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { NicDriver, type NicClock, type NicEvent, type NicTimer } from '../../src/nic/driver.js';
import type { EngineBounds } from '../../src/rdmap/bounds.js';
import type { ContextOptions } from '../../src/transport/udp/context-options.js';
import { RdmapEngine } from '../../src/rdmap/engine.js';
import { EngineMemory, type MrRecord } from '../../src/rdmap/memory.js';
import type { EngineQp, QpCaps, RecvWork, SendWork } from '../../src/rdmap/state.js';
import { UdpCore } from '../../src/transport/udp/core.js';
import type { UdpEndpoint } from '../../src/transport/udp/endpoint.js';
import { ENV_SEG_LEN } from '../../src/transport/udp/frame-codec.js';
import { UNTAGGED_HDR_LEN } from '../../src/wire/spec.js';
import type { NetNode, SimNet } from './net.js';
import { seededIds } from './random.js';
import { ALL, caps, Sink } from './work.js';

/** The driver's clock in the simulation: virtual time, one pending timer. */
class SimClock implements NicClock {
  at = Infinity;
  #fire: (() => void) | undefined;
  #token: object | undefined;
  constructor(private readonly net: SimNet) {}

  now(): number {
    return this.net.now;
  }

  timer(at: number, fire: () => void, _hold: boolean): NicTimer {
    const token = {};
    this.at = at;
    this.#fire = fire;
    this.#token = token;
    return {
      hold: () => {},
      cancel: () => {
        if (this.#token !== token) return;
        this.at = Infinity;
        this.#fire = undefined;
      },
    };
  }

  due(now: number): void {
    const f = this.#fire;
    if (f === undefined || this.at > now) return;
    this.at = Infinity;
    this.#fire = undefined;
    f();
  }
}

/** The udp link with a simulated socket: the same core, the endpoint polled by SimNet. */
class SimUdpLink implements Link {
  readonly cutsTagged = true;
  readonly mss: number;
  readonly core: UdpCore;
  /** Sees every frame the driver hands the link, before the core does. */
  tap: ((out: readonly Outbound[]) => void) | undefined;
  /** While set, frames are kept here instead of sent (a test delivers them in its own order). */
  held: Outbound[] | undefined;
  /**
   * Payloads the endpoint refused: the core reports each such peer lost in a microtask, which
   * the simulation lets run before its next step, as the event loop would after a flush.
   */
  refused = 0;

  constructor(readonly address: DeviceAddress, private readonly node: NetNode, now: () => number) {
    const ep = node.ep;
    this.mss = ep.maxPayload - ENV_SEG_LEN - UNTAGGED_HDR_LEN;
    this.core = new UdpCore(ep.maxPayload, {
      send: (peer, payload, dst, src) => {
        try {
          ep.send(peer, payload, now(), dst, src);
        } catch (err) {
          this.refused++;
          throw err;
        }
      },
      release: (ctx, n) => void ep.release(ctx, n),
      room: (peer) => ep.sendRoom(peer),
      incarnationOf: (peer) => ep.incarnationOf(peer),
    });
    // As the socket shell's flush: the deliveries first (one engine step), then what is queued.
    node.beforePoll = () => {
      for (const d of ep.takeDelivered()) this.core.delivery(d);
      this.core.deliveriesDone();
      this.core.seal();
    };
    node.onPoll = (r) => {
      for (const d of r.delivered) this.core.delivery(d);
      if (r.delivered.length > 0) this.core.deliveriesDone();
      if (r.failed.length > 0) this.core.failed(r.failed);
    };
  }

  start(events: LinkEvents): void {
    this.core.start(events);
  }

  transmit(out: readonly Outbound[]): void {
    this.tap?.(out);
    if (this.held) this.held.push(...out);
    else this.core.transmit(out);
  }

  pollTimeout(): number {
    return this.node.ep.nextDeadline();
  }

  handleTimeout(now: number): void {
    this.node.ep.tick(now);
  }

  reachable(): boolean {
    return true;
  }

  close(): void {
    this.core.close();
  }
}

export interface NodeOptions {
  /** Datagram size: a small one cuts messages into many datagrams (more to reorder). */
  mtu?: number;
  /** The engine's segment size, if smaller than what a datagram carries. */
  mss?: number;
  bounds?: Partial<EngineBounds>;
  /** Options of the node's transport contexts (a small maxSendQueue). */
  context?: Partial<ContextOptions>;
}

export class SimNode {
  readonly addr: DeviceAddress;
  readonly dm: DeviceMemory;
  readonly mem: EngineMemory;
  readonly engine: RdmapEngine;
  readonly driver: NicDriver;
  readonly link: SimUdpLink;
  readonly ep: UdpEndpoint;
  readonly cq = new Sink();
  readonly events: NicEvent[] = [];

  constructor(net: SimNet, i: number, seed: number, dm: DeviceMemory, o: NodeOptions) {
    this.dm = dm;
    this.mem = new EngineMemory(dm);
    this.addr = Object.freeze({ transport: 'udp', host: `10.0.0.${i}`, port: 4000 + i });
    let link: SimUdpLink | undefined;
    const node = net.add({ host: `10.0.0.${i}`, port: 4000 + i }, {
      mtu: o.mtu ?? 1800, randomId: seededIds(seed * 16 + i), keepPeer: (p) => link?.core.keepsPeer(p) ?? false, ...(o.context ? { context: o.context } : {}),
    });
    this.ep = node.ep;
    this.link = link = new SimUdpLink(this.addr, node, () => net.now);
    this.engine = new RdmapEngine(this.mem, { mss: Math.min(o.mss ?? Infinity, link.mss), maxControl: link.mss, linkCutsTagged: true, bounds: o.bounds });
    const clock = new SimClock(net);
    node.deadline = () => clock.at;
    node.onTime = (now) => clock.due(now);
    this.driver = new NicDriver(this.engine, link, { onEvent: (ev) => this.events.push(ev) }, clock);
  }

  static async create(net: SimNet, i: number, seed: number, o: NodeOptions = {}): Promise<SimNode> {
    const dm = await DeviceMemory.create({ workerSlots: 0, initialBytes: 8 << 20 });
    return new SimNode(net, i, seed, dm, o);
  }

  regMr(length: number, access = ALL, pd = 1): MrRecord {
    const a = this.dm.alloc(length);
    this.dm.u8().fill(0, a, a + length);
    return this.mem.register({ addr: a, length, pd, access });
  }

  bytes(r: MrRecord, off = 0, len = r.length - off): Uint8Array {
    return this.mem.view(r, r.addr + off, len);
  }

  /** A QP whose send and receive completions go to this node's cq. */
  qp(qpn: number, type: 'rc' | 'srd', c: Partial<QpCaps> = {}): EngineQp {
    return this.engine.createQp(qpn, type, 1, caps(c), this.cq, this.cq);
  }

  /** Post as the verbs layer does: one driver step, its frames handed to the link. */
  post(qp: EngineQp, w: SendWork): void {
    this.driver.run((now) => this.engine.postSend(qp, w, now));
  }

  postRecv(qp: EngineQp, r: RecvWork): void {
    this.driver.run((now) => this.engine.postRecv(qp, r, now));
  }

  /** An srd send to `to`'s QP `qpn`. */
  postTo(qp: EngineQp, to: DeviceAddress, qpn: number, w: SendWork): void {
    this.driver.run((now) => {
      w.flow = this.engine.srdFlow(qp, to, qpn);
      this.engine.postSend(qp, w, now);
    });
  }

  /** Frames as the link delivers them after the transport took them (a hostile peer's, built by hand). */
  inject(from: DeviceAddress, frames: Frame[]): void {
    this.driver.frames(frames.map((frame): Inbound => ({ from, frame })));
  }

  connected(qpn?: number): boolean {
    return this.events.some((e) => e.kind === 'connected' && (qpn === undefined || e.qpn === qpn));
  }
}
