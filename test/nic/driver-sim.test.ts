// The whole NIC driver under a seeded lossy network, on a virtual clock: two drivers, each
// with its RDMAP engine, the udp link's sans-I/O core (packing, framing, batching, credit), the
// UDP endpoint (handshake, reliability, integrity trailers) and the driver's one timer, joined
// by test/transport/udp/sim.ts, which drops, duplicates, reorders and corrupts datagrams. Only
// the sockets are missing. No timers, no sleeps: the same seed gives the same run.
import { describe, expect, it } from 'vitest';
import type { DeviceAddress } from '../../src/core/address.js';
import { Opcode, WcOpcode, WcStatus } from '../../src/core/enums.js';
import type { Link, LinkEvents, Outbound } from '../../src/core/link.js';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { NicDriver, type NicClock, type NicEvent, type NicTimer } from '../../src/nic/driver.js';
import { RdmapEngine } from '../../src/rdmap/engine.js';
import { EngineMemory, type MrRecord } from '../../src/rdmap/memory.js';
import type { EngineQp, Piece } from '../../src/rdmap/state.js';
import { UdpCore } from '../../src/transport/udp/core.js';
import { ENV_SEG_LEN } from '../../src/transport/udp/frame-codec.js';
import { UNTAGGED_HDR_LEN } from '../../src/wire/spec.js';
import { ALL, caps, recv, Sink, wr } from '../rdmap/harness.js';
import { clean, rng, seededIds, SimNet, type Impairment, type Node } from '../transport/udp/sim.js';

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

  constructor(readonly address: DeviceAddress, private readonly node: Node, now: () => number) {
    const ep = node.ep;
    this.mss = ep.maxPayload - ENV_SEG_LEN - UNTAGGED_HDR_LEN;
    this.core = new UdpCore(ep.maxPayload, {
      send: (peer, payload, dst, src) => void ep.send(peer, payload, now(), dst, src),
      release: (ctx, n) => void ep.release(ctx, n),
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
    this.core.transmit(out);
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

interface NicNode {
  addr: DeviceAddress;
  mem: EngineMemory;
  engine: RdmapEngine;
  driver: NicDriver;
  link: SimUdpLink;
  cq: Sink;
  events: NicEvent[];
  regMr(length: number): MrRecord;
  bytes(r: MrRecord, off: number, len: number): Uint8Array;
}

async function nicNode(net: SimNet, i: number, seed: number): Promise<NicNode> {
  const dm = await DeviceMemory.create({ workerSlots: 0, initialBytes: 8 << 20 });
  const mem = new EngineMemory(dm);
  const addr = Object.freeze({ transport: 'udp', host: `10.0.0.${i}`, port: 4000 + i });
  let link: SimUdpLink | undefined;
  const node = net.add({ host: addr.host, port: addr.port }, {
    mtu: 1800, randomId: seededIds(seed * 16 + i), keepPeer: (p) => link?.core.keepsPeer(p) ?? false,
  });
  link = new SimUdpLink(addr, node, () => net.now);
  const engine = new RdmapEngine(mem, { mss: link.mss, linkCutsTagged: true });
  const events: NicEvent[] = [];
  const clock = new SimClock(net);
  node.deadline = () => clock.at;
  node.onTime = (now) => clock.due(now);
  const driver = new NicDriver(engine, link, { onEvent: (ev) => events.push(ev) }, clock);
  return {
    addr, mem, engine, driver, link, cq: new Sink(), events,
    regMr(length) {
      const a = dm.alloc(length);
      dm.u8().fill(0, a, a + length);
      return mem.register({ addr: a, length, pd: 1, access: ALL });
    },
    bytes: (r, off, len) => mem.view(r, r.addr + off, len),
  };
}

const seg = (r: MrRecord, off: number, len: number): Piece => ({ rec: r, addr: r.addr + off, len });

const lossy: Impairment = { ...clean, drop: 0.05, dup: 0.05, corrupt: 0.03, reorder: 0.2, reorderMs: 2, jitterMs: 0.3 };

/** One run: rc writes and sends from a to b; returns what a trace of the run should show. */
async function run(seed: number, imp: Impairment) {
  const net = new SimNet(imp, seed);
  const a = await nicNode(net, 1, seed);
  const b = await nicNode(net, 2, seed);
  const qa: EngineQp = a.engine.createQp(1, 'rc', 1, caps(), a.cq, a.cq);
  const qb: EngineQp = b.engine.createQp(1, 'rc', 1, caps(), b.cq, b.cq);
  a.driver.run((now) => a.engine.connect(qa, b.addr, 1, now));
  b.driver.run((now) => b.engine.connect(qb, a.addr, 1, now));
  const connected = (n: NicNode): boolean => n.events.some((e) => e.kind === 'connected');
  net.run(() => connected(a) && connected(b), 100_000);
  expect(connected(a) && connected(b)).toBe(true);

  const r = rng(seed ^ 0x5eed);
  const src = a.regMr(256 << 10);
  const dst = b.regMr(256 << 10);
  const rbuf = b.regMr(64 << 10);
  const WRITES = 24;
  const SENDS = 8;
  // Writes to disjoint ranges of dst, of sizes from one byte to several datagrams.
  const ranges: [number, number][] = [];
  for (let i = 0, off = 0; i < WRITES; i++) {
    const len = 1 + Math.floor(r() * 9000);
    ranges.push([off, len]);
    off += len + 64;
  }
  const s = a.bytes(src, 0, src.length);
  for (let i = 0; i < s.length; i++) s[i] = Math.floor(r() * 256);
  for (let k = 0; k < SENDS; k++) b.driver.run((now) => b.engine.postRecv(qb, recv(100 + k, [seg(rbuf, k * 8192, 8192)]), now));
  for (let i = 0; i < WRITES; i++) {
    const [off, len] = ranges[i]!;
    a.driver.run((now) => a.engine.postSend(qa, wr({ wrId: i, opcode: Opcode.RdmaWrite, remoteAddr: dst.addr + off, rkey: dst.stag }, [seg(src, off, len)]), now));
    if (i % 3 === 0 && i / 3 < SENDS) {
      const k = i / 3;
      a.driver.run((now) => a.engine.postSend(qa, wr({ wrId: 1000 + k, opcode: Opcode.SendWithImm, imm: k }, [seg(src, 100_000 + k * 1000, 1000 + k)]), now));
    }
  }
  const want = WRITES + SENDS;
  net.run(() => a.cq.wcs.length >= want && b.cq.wcs.length >= SENDS, 2_000_000);

  // Every work request completed with Success, in posting order (rc).
  expect(a.cq.wcs.map((w) => w.status)).toEqual(Array(want).fill(WcStatus.Success));
  const posted = a.cq.wcs.map((w) => Number(w.wrId));
  expect(posted.filter((x) => x < 1000)).toEqual([...Array(WRITES).keys()]);
  // The data is placed, byte for byte; the sends landed in their receives in order.
  for (const [off, len] of ranges) expect(Buffer.from(b.bytes(dst, off, len)).equals(Buffer.from(a.bytes(src, off, len)))).toBe(true);
  const rx = b.cq.wcs;
  expect(rx.map((w) => [Number(w.wrId), w.opcode, w.status, w.byteLen, w.imm])).toEqual(
    [...Array(SENDS).keys()].map((k) => [100 + k, WcOpcode.Recv, WcStatus.Success, 1000 + k, k]),
  );
  for (let k = 0; k < SENDS; k++) {
    expect(Buffer.from(b.bytes(rbuf, k * 8192, 1000 + k)).equals(Buffer.from(a.bytes(src, 100_000 + k * 1000, 1000 + k)))).toBe(true);
  }
  return {
    now: net.now, net: { ...net.stats }, a: a.link.core.counters, b: b.link.core.counters,
    epA: a.link['node'].ep.stats(), epB: b.link['node'].ep.stats(), events: a.events.map((e) => e.kind),
  };
}

describe('the NIC driver over a simulated lossy network', () => {
  it.each([1, 2, 3, 4])('seed %i: writes and sends complete in order, byte-exact, under drop, duplication, reordering and corruption', async (seed) => {
    const t = await run(seed, lossy);
    // The network did impair the run, and the endpoints refused what was corrupted.
    expect(t.net.dropped).toBeGreaterThan(0);
    expect(t.net.duplicated).toBeGreaterThan(0);
    expect(t.net.corrupted).toBeGreaterThan(0);
    expect(t.epA.badHash + t.epA.badCrc + t.epA.malformed + t.epB.badHash + t.epB.badCrc + t.epB.malformed).toBeGreaterThan(0);
    expect(t.a.linkFailures + t.b.linkFailures).toBe(0);
  });

  it('is deterministic: the same seed gives the same run', async () => {
    const x = await run(7, lossy);
    const y = await run(7, lossy);
    expect(y).toEqual(x);
  });

  it('a clean network: the same outcome', async () => {
    const t = await run(11, clean);
    expect(t.net.dropped + t.net.corrupted).toBe(0);
  });
});
