// The channel core under a hostile peer, sans I/O: one ChannelCore (src/channel/core.ts) whose
// peer is this fuzzer. It learns what an attacker on the QP would see — the core's HELLO (its
// grant and mailbox), every control message the core writes to it (GRANTs, credits), every
// work request the core posts — and answers with mostly well-formed, credit-respecting frames
// whose fields are mutated at the edges, plus a share of plainly wrong ones: control messages
// of every type in the next mailbox slot or another, data in the next slot or another, packed
// records that lie, completions of the core's own work requests (ok or failed) and of ones it
// never posted, the clock jumping to its deadlines, and the application side sending, taking
// and closing. A message is delivered only onto a receive the core posted (otherwise the
// transport would have refused it: RNR).
//
// The memory the core registers is a model (FuzzPorts): a region's bytes are held up to 4 MiB
// (reads past that give zeros), and a local access outside a registered region, a deregister
// of a region that is not registered, or any other misuse throws — the core asking for that
// is a bug, found as a crash.
import { ChannelCore } from '../../src/channel/core.js';
import { DEFAULT_DECODE_LIMITS, decodeValue, encodeValue } from '../../src/channel/codec.js';
import { type ChannelOptions, resolveOptions } from '../../src/channel/options.js';
import type { Action, ChannelPorts, Outcome, Region, RegionUse } from '../../src/channel/ports.js';
import { type Body, type CtrlMsg, type Grant, ctrlImm, dataImm, decodeCtrl, encodeCtrl, packRecords, parseImm, unpackRecords } from '../../src/channel/wire.js';
import { CHAN_HELLO_BUF, CHAN_MBOX_SLOT, CHAN_SEQ_MOD, CHAN_VERSION, ChanFlag, ChanType } from '../../src/wire/spec.js';
import type { Gen } from './rng.js';
import { edgeU16, edgeU32, edgeU8, msgpackBomb, mutate } from './surface.js';

const HEAD_MAX = 4 << 20;

interface FuzzRegion {
  r: Region;
  use: RegionUse;
  head: Uint8Array;
}

export class FuzzPorts implements ChannelPorts {
  readonly live = new Map<number, FuzzRegion>();
  #nextAddr = 0x10_0000;
  #nextKey = 0x100;
  used = 0;

  constructor(public budget = 512 << 20) {}

  reg(length: number, use: RegionUse): Region | undefined {
    if (!Number.isInteger(length) || length < 0) throw new Error(`reg of ${length} bytes`);
    if (this.used + length > this.budget) return undefined;
    const key = ((this.#nextKey++ << 8) | 0x5a) >>> 0;
    const r: Region = { addr: this.#nextAddr, length, lkey: key, rkey: key };
    this.#nextAddr += Math.ceil(Math.max(length, 1) / 64) * 64 + 64;
    this.live.set(key, { r, use, head: new Uint8Array(Math.min(length, HEAD_MAX)) });
    this.used += length;
    return r;
  }

  dereg(r: Region): void {
    const s = this.live.get(r.rkey);
    if (!s || s.r !== r) throw new Error(`dereg of a region that is not registered (rkey ${r.rkey.toString(16)})`);
    this.live.delete(r.rkey);
    this.used -= r.length;
  }

  #local(r: Region, off: number, len: number): FuzzRegion {
    const s = this.live.get(r.rkey);
    if (!s || s.r !== r) throw new Error('local access to a region that is not registered');
    if (!Number.isInteger(off) || !Number.isInteger(len) || off < 0 || len < 0 || off + len > r.length) {
      throw new Error(`local access [${off}, +${len}) outside a ${r.length}-byte region`);
    }
    return s;
  }

  read(r: Region, off: number, len: number): Uint8Array {
    const s = this.#local(r, off, len);
    const out = new Uint8Array(len);
    if (off < s.head.length) out.set(s.head.subarray(off, Math.min(off + len, s.head.length)));
    return out;
  }

  write(r: Region, off: number, bytes: Uint8Array): void {
    const s = this.#local(r, off, bytes.length);
    if (off < s.head.length) s.head.set(bytes.subarray(0, Math.min(bytes.length, s.head.length - off)), off);
  }

  /** Bounds check of a local segment without copying it. */
  check(r: Region, off: number, len: number): void {
    this.#local(r, off, len);
  }

  /** The region an rkey the core granted names, if it is live and remote-writable (eager / fixed). */
  byRkey(rkey: number): FuzzRegion | undefined {
    return this.live.get(rkey);
  }
}

/** Channel options the sessions draw from: the defaults, and small ones that reach the limits sooner. */
export const CORE_OPTIONS: readonly ChannelOptions[] = [
  {},
  { ctrlSlots: 4, window: 4, ladder: [{ slotSize: 64, slots: 2 }, { slotSize: 1024, slots: 4 }], maxMessage: 1 << 20, timeoutMs: 100, shrinkAfterMs: 50, maxReads: 1, maxBufferedBytes: 4096 },
  { ctrlSlots: 64, window: 32768, ladder: [{ slotSize: 256, slots: 256 }], maxMessage: 0xffff_ffff, timeoutMs: 1, shrinkAfterMs: 0 },
  { window: 1, ladder: [{ slotSize: 64, slots: 1 }, { slotSize: 96, slots: 1 }, { slotSize: 128, slots: 1 }], maxMessage: 128 },
];

/**
 * A first rung smaller than the HELLO: the core's send scratch is then shorter than the HELLO
 * it copies there (a local option, not peer input; drawn for a few sessions so the campaign
 * keeps reporting it until the core sizes its scratch for the HELLO).
 */
export const TINY_RUNG_OPTIONS: ChannelOptions = { window: 1, ladder: [{ slotSize: 16, slots: 1 }, { slotSize: 48, slots: 1 }], maxMessage: 48 };

interface Posted {
  wrId: number;
  kind: 'send' | 'write' | 'read';
  local?: { region: Region; off: number; len: number };
  value?: boolean;
}

export type CoreStep = string | undefined;

/** One core and its hostile peer. `step` feeds one input; it returns a refusal kind or undefined. */
export class CoreSession {
  readonly ports = new FuzzPorts();
  readonly core: ChannelCore;
  now = 0;
  steps = 0;
  torn = false;
  opened = false;
  failure: string | undefined;
  /** The core's receives not yet consumed (a message with none would be refused by the transport). */
  posted = 0;
  readonly outstanding: Posted[] = [];
  // What the attacker learned.
  grant: Grant | undefined;
  pendingGrant: Grant | undefined;
  mbox = { addr: 0, rkey: 0, slots: 0 };
  mboxNext = 0;
  ctrlCredits = 0;
  slotCredits = 0;
  dataNext = 0;
  seqNext = 0;
  /** The core asked us for a larger phase (it will wait for a GRANT). */
  enlargeAsked: number | undefined;
  /** Mailbox credits the attacker owes the core (it returns them in its headers). */
  owed = 0;
  /** The epoch of the slots the attacker granted the core, the core's data messages in them not yet credited back, and not yet reported consumed. */
  ourEpoch = 0;
  slotsOwed = 0;
  consumedTotal = 0;
  /** Seqs the core offered (rendezvous) that the attacker has not answered with DONE; data messages written in the live epoch. */
  readonly coreOffers: number[] = [];
  epochWrites = 0;
  delivered = 0;
  /** Raw bytes of the last input, for the report, and its generator class. */
  last: Uint8Array = new Uint8Array(0);
  cls = '';

  /** How hostile this session is: the share of inputs that break a rule on purpose (the rest are well-formed, with fields at their edges). */
  readonly h: number;

  constructor(public g: Gen, readonly opts: ChannelOptions) {
    this.h = g.pick([0.01, 0.03, 0.1, 0.3]);
    this.core = new ChannelCore(resolveOptions(opts), this.ports, this.now);
    this.#drain();
    this.core.start(this.now);
    this.#drain();
  }

  /** Carry the core's actions out as the shell would, and learn what the peer would see. */
  #drain(): void {
    for (let guard = 0; guard < 64; guard++) {
      this.core.handleBatchEnd(this.now);
      let n = 0;
      for (let a = this.core.pollAction(); a; a = this.core.pollAction(), n++) this.#act(a);
      if (n === 0) return;
    }
    throw new Error('the core kept emitting actions (64 rounds of handleBatchEnd)');
  }

  #act(a: Action): void {
    switch (a.kind) {
      case 'recv':
        this.posted += a.n;
        return;
      case 'send': {
        this.ports.write(a.local.region, a.local.off, a.bytes);
        const r = decodeCtrl(a.bytes);
        if (r.ok && r.msg.type === ChanType.Hello) {
          this.mbox = { addr: r.msg.hello.mboxAddr, rkey: r.msg.hello.mboxRkey, slots: r.msg.hello.ctrlSlots };
          this.ctrlCredits = r.msg.hello.ctrlSlots;
          this.grant = r.msg.grant;
          this.slotCredits = r.msg.grant.slots;
        }
        this.outstanding.push({ wrId: a.wrId, kind: 'send' });
        return;
      }
      case 'write': {
        if (a.bytes) this.ports.write(a.local!.region, a.local!.off, a.bytes);
        else if (a.local) this.ports.check(a.local.region, a.local.off, a.local.len);
        const f = parseImm(a.imm);
        if (f.ctrl && a.bytes) this.#learn(a.bytes);
        else if (!f.ctrl) {
          const b = a.bytes ?? (a.local ? this.ports.read(a.local.region, a.local.off, Math.min(a.local.len, 1 << 20)) : new Uint8Array(0));
          const recs = f.packed ? unpackRecords(b) : undefined;
          if (typeof recs === 'string') throw new Error(`the core wrote a packed data message that does not unpack (${recs})`);
          this.slotsOwed++;
          this.consumedTotal += recs ? recs.length : 1;
        }
        this.outstanding.push({ wrId: a.wrId, kind: 'write' });
        return;
      }
      case 'read':
        this.ports.check(a.local.region, a.local.off, a.local.len);
        this.outstanding.push({ wrId: a.wrId, kind: 'read', local: a.local });
        return;
      case 'connected':
        this.opened = true;
        return;
      case 'readable':
        return;
      case 'failed':
        this.failure = `${a.cause}: ${a.message}`;
        return;
      case 'teardown':
        this.torn = true;
        this.core.releaseMemory();
        return;
      default:
        return;
    }
  }

  /** A control message the core wrote into our mailbox. */
  #learn(bytes: Uint8Array): void {
    const r = decodeCtrl(bytes);
    if (!r.ok) throw new Error(`the core wrote a control message that does not decode (${r.error})`);
    const m = r.msg;
    this.owed++;
    this.ctrlCredits += m.hdr.ctrlCredits;
    if (this.grant && m.hdr.epoch === this.grant.epoch) this.slotCredits += m.hdr.slotCredits;
    if (m.type === ChanType.Grant && m.grant) this.pendingGrant = m.grant;
    if (m.type === ChanType.Enlarge) this.enlargeAsked = m.need;
    if (m.type === ChanType.Offer) {
      this.coreOffers.push(m.seq);
      this.consumedTotal++;
    }
    if (m.type === ChanType.Switch) {
      this.ourEpoch = m.epoch;
      this.slotsOwed = 0;
    }
  }

  // ---- inputs -------------------------------------------------------------------------------

  /** Our HELLO: valid with mutated fields, or bytes mutated after encoding. */
  hello(): CoreStep {
    const g = this.g;
    this.cls = 'hello';
    const body: CtrlMsg = {
      type: ChanType.Hello, hdr: { flags: 0, ctrlCredits: 0, epoch: 0, slotCredits: 0, consumed: 0 },
      hello: { version: CHAN_VERSION, ctrlSlots: g.pick([4, 8, 64]), window: g.pick([1, 64, 32768]), maxEager: 32768, maxMessage: g.pick([32768, 1 << 26, 0xffff_ffff]), mboxRkey: g.u32(), mboxAddr: g.int(2 ** 40) },
      grant: { epoch: 0, slots: g.pick([1, 8, 256]), slotSize: g.pick([256, 4096, 32768]), addr: g.int(2 ** 40), rkey: g.u32(), phase: 0 },
    };
    if (g.chance(this.h)) {
      // One field at an edge.
      this.cls = 'hello/edge';
      const h = body.hello;
      const gr = body.grant;
      switch (g.int(10)) {
        case 0: h.version = edgeU8(g); break;
        case 1: h.ctrlSlots = edgeU8(g); break;
        case 2: h.window = edgeU16(g); break;
        case 3: h.maxEager = edgeU32(g); break;
        case 4: h.maxMessage = edgeU32(g); break;
        case 5: h.mboxAddr = 2 ** 53 - 1 - g.int(64); break;
        case 6: gr.epoch = edgeU8(g); break;
        case 7: gr.slots = edgeU16(g); break;
        case 8: gr.slotSize = edgeU32(g); break;
        default: gr.phase = edgeU8(g);
      }
    }
    let bytes = encodeCtrl(body);
    if (g.chance(this.h / 2)) {
      bytes = mutate(g, bytes);
      this.cls = 'hello/mutated';
    }
    return this.#recv(bytes);
  }

  #recv(bytes: Uint8Array): CoreStep {
    this.last = bytes;
    if (this.posted === 0) return 'no receive posted (rnr)';
    if (bytes.length > CHAN_HELLO_BUF) return 'longer than the HELLO buffer (the transport refuses it)';
    this.ports.write(this.core.fixed, 0, bytes);
    this.posted--;
    this.core.handleRecv(bytes.length, this.now);
    return this.#after();
  }

  #after(): CoreStep {
    this.#drain();
    this.steps++;
    return this.failure;
  }

  /** One input once the HELLOs crossed. */
  step(): CoreStep {
    const g = this.g;
    if (this.torn) return 'session over';
    const k = g.chance(this.h / 3) ? 90 + g.int(10) : g.int(90);
    if (k < 30) return this.#ctrl();
    if (k < 55) return this.#data();
    if (k < 70) return this.#complete();
    this.cls = k < 76 ? 'tick' : k < 90 ? 'app' : k < 93 ? 'send-after-hello' : k < 97 ? 'imm-random' : k < 99 ? 'recv-error' : 'qp-error';
    if (k < 76) return this.#tick();
    if (k < 90) return this.#app();
    if (k < 93) return this.#recv(g.chance(0.5) ? g.bytes(g.int(80)) : encodeCtrl({ type: ChanType.Credit, hdr: { flags: 0, ctrlCredits: 1, epoch: 0, slotCredits: 0, consumed: 0 } }));
    if (k < 97) return this.#imm(g.u32(), g.pick([0, 1, 8, 31, 32, 33, 4096, 65536, 0x7fff_ffff, g.u32()]), g.bytes(g.int(40)));
    if (k < 99) {
      this.last = new Uint8Array(0);
      if (this.posted === 0) return 'no receive posted (rnr)';
      this.posted--;
      this.core.handleRecvError(g.chance(0.5) ? { ok: false, why: 'flush', status: 'WrFlushErr' } : { ok: false, why: g.pick(['remote', 'link', 'rnr', 'local'] as const), status: 'LocErr' }, this.now);
      return this.#after();
    }
    this.core.handleQpError('the fuzzer failed the QP', this.now);
    return this.#after();
  }

  /** True unless this input breaks a rule (the session's hostility). */
  #valid(): boolean {
    return !this.g.chance(this.h);
  }

  #hdr(): CtrlMsg['hdr'] {
    const g = this.g;
    const owed = Math.min(this.owed, 0xff);
    if (!g.chance(this.h)) {
      const slots = Math.min(this.slotsOwed, 0xffff);
      const consumed = this.consumedTotal & 0xffff;
      this.owed -= owed;
      this.slotsOwed -= slots;
      return { flags: g.chance(0.95) ? 0 : edgeU8(g), ctrlCredits: owed, epoch: this.ourEpoch, slotCredits: slots, consumed };
    }
    return { flags: edgeU8(g), ctrlCredits: edgeU8(g), epoch: edgeU8(g), slotCredits: edgeU16(g), consumed: edgeU16(g) };
  }

  #ctrl(): CoreStep {
    const g = this.g;
    const epoch = this.grant?.epoch ?? 0;
    const ep = (): number => (this.#valid() ? epoch : g.chance(0.5) ? (epoch + 1) & 0xff : edgeU8(g));
    let body: Body;
    switch (g.int(9)) {
      case 0: body = { type: ChanType.Credit }; break;
      case 1: body = { type: ChanType.Enlarge, need: this.#valid() ? g.pick([257, 4096, 4097, 32768, 32769]) : edgeU32(g), epoch: ep() }; break;
      case 2: {
        const slotSize = g.pick([4096, 32768, 256, 0, 1, edgeU32(g)]);
        const grant: Grant = { epoch: this.#valid() ? (epoch + 1) & 0xff : edgeU8(g), slots: this.#valid() ? 8 : edgeU16(g), slotSize, addr: g.chance(0.1) ? 2 ** 53 - 1 - g.int(4096) : g.int(2 ** 40), rkey: edgeU32(g), phase: this.#valid() ? 1 + g.int(3) : edgeU8(g) };
        body = { type: ChanType.Grant, grant: g.chance(0.85) || this.enlargeAsked === undefined ? grant : undefined };
        break;
      }
      case 3: {
        const p = this.pendingGrant;
        if (!p && this.#valid()) {
          body = { type: ChanType.Credit };
          break;
        }
        body = { type: ChanType.Switch, epoch: p && this.#valid() ? p.epoch : ep(), count: this.#valid() ? this.epochWrites : edgeU32(g) };
        if (p && body.epoch === p.epoch) {
          this.grant = p;
          this.pendingGrant = undefined;
          this.dataNext = 0;
          this.epochWrites = 0;
          this.slotCredits = p.slots;
        }
        break;
      }
      case 4: case 5: {
        const len = g.pick([0, 1, 32768, 32769, 65536, 1 << 20, (1 << 26) - 1, 1 << 26, (1 << 26) + 1, 0xffff_ffff, g.int(1 << 20)]);
        body = { type: ChanType.Offer, seq: this.#valid() ? this.seqNext : edgeU16(g), length: len, rkey: edgeU32(g), addr: g.chance(0.1) ? 2 ** 53 - 1 - g.int(len + 1) : g.int(2 ** 40), value: g.chance(0.5) };
        if (g.chance(0.7) && body.seq === this.seqNext) this.seqNext = (this.seqNext + 1) % CHAN_SEQ_MOD;
        break;
      }
      case 6: body = { type: ChanType.Done, seq: this.coreOffers.length && this.#valid() ? this.coreOffers.shift()! : edgeU16(g) }; break;
      case 7: body = { type: ChanType.Close, next: g.chance(0.5) ? this.seqNext : edgeU16(g) }; break;
      default:
        if (this.#valid()) {
          body = { type: ChanType.Credit };
          break;
        }
        body = { type: ChanType.Hello, hello: { version: CHAN_VERSION, ctrlSlots: 8, window: 64, maxEager: 32768, maxMessage: 1 << 26, mboxRkey: 1, mboxAddr: 0 }, grant: { epoch: 0, slots: 8, slotSize: 256, addr: 0, rkey: 1, phase: 0 } };
    }
    let bytes = encodeCtrl({ ...body, hdr: this.#hdr() } as CtrlMsg);
    this.cls = `ctrl/${body.type}`;
    if (g.chance(this.h / 2)) {
      bytes = mutate(g, bytes);
      this.cls += '/mutated';
    }
    if (bytes.length > CHAN_MBOX_SLOT && g.chance(0.9)) bytes = bytes.subarray(0, CHAN_MBOX_SLOT);
    const slot = this.#valid() ? this.mboxNext : g.int(256);
    if (!g.chance(this.h) && this.ctrlCredits <= 0) return 'the attacker holds no mailbox credit (held back)';
    this.ctrlCredits--;
    if (slot === this.mboxNext) this.mboxNext = (this.mboxNext + 1) % Math.max(this.mbox.slots, 1);
    return this.#imm(ctrlImm(slot), bytes.length, bytes, { region: 'mbox', off: CHAN_HELLO_BUF + (slot % Math.max(this.mbox.slots, 1)) * CHAN_MBOX_SLOT });
  }

  #data(): CoreStep {
    const g = this.g;
    const grant = g.chance(0.1) && this.pendingGrant ? this.pendingGrant : this.grant;
    if (!grant) return 'no grant yet';
    const value = g.chance(0.3);
    let bytes: Uint8Array;
    let packed = false;
    const size = Math.max(0, Math.min(grant.slotSize, 1 << 16));
    const r = g.int(10);
    if (r < 3) bytes = g.bytes(g.int(Math.min(size, 512) + 1));
    else if (r < 5) {
      packed = true;
      const n = 1 + g.int(6);
      bytes = packRecords(Array.from({ length: n }, () => ({ bytes: g.bytes(g.int(40)), value: g.chance(0.3) })));
      if (g.chance(0.4)) bytes = mutate(g, bytes);
    } else if (r < 7) bytes = msgpackBomb(g, Math.max(1, size - 8)).bytes;
    else if (r < 8) bytes = encodeValue({ a: [1, 'x', { b: null }], n: g.u32() });
    else bytes = g.bytes(g.pick([0, size, size + 1, 1]));
    if (bytes.length > size + 1) bytes = bytes.subarray(0, size + 1);
    this.cls = `data/${['random', 'random', 'random', 'packed', 'packed', 'bomb', 'bomb', 'value', 'edge-length', 'edge-length'][r]}`;
    if (!g.chance(this.h) && this.slotCredits <= 0) return 'the attacker holds no slot credit (held back)';
    const slot = this.#valid() ? this.dataNext : edgeU8(g);
    const seq = this.#valid() ? this.seqNext : edgeU16(g);
    const imm = dataImm(this.#valid() ? grant.epoch : edgeU8(g), value, slot, seq, packed);
    this.slotCredits--;
    if (slot === this.dataNext) this.dataNext = (this.dataNext + 1) % Math.max(grant.slots, 1);
    this.epochWrites++;
    if (seq === this.seqNext) this.seqNext = (this.seqNext + 1) % CHAN_SEQ_MOD;
    return this.#imm(imm, this.#valid() ? bytes.length : edgeU32(g), bytes, { region: grant, off: (slot % Math.max(grant.slots, 1)) * grant.slotSize });
  }

  /** Place bytes where the write would (the transport checks the rkey and bounds), then the completion. */
  #imm(imm: number, byteLen: number, bytes: Uint8Array, at?: { region: 'mbox' | Grant; off: number }): CoreStep {
    this.last = bytes;
    if (this.posted === 0) return 'no receive posted (rnr)';
    if (at) {
      if (at.region === 'mbox') {
        if (at.off + bytes.length <= this.core.fixed.length) this.ports.write(this.core.fixed, at.off, bytes);
      } else {
        const s = this.ports.byRkey(at.region.rkey);
        const addr = at.region.addr + at.off;
        if (!s || (s.use !== 'eager' && s.use !== 'fixed') || addr < s.r.addr || addr + bytes.length > s.r.addr + s.r.length) return 'write outside the granted region (the transport refuses it)';
        this.ports.write(s.r, addr - s.r.addr, bytes);
      }
    }
    this.posted--;
    this.delivered++;
    this.core.handleImm(imm >>> 0, byteLen >>> 0, this.now);
    return this.#after();
  }

  #complete(): CoreStep {
    const g = this.g;
    this.last = new Uint8Array(0);
    this.cls = 'complete/unknown';
    if (this.outstanding.length === 0 || g.chance(this.h / 5)) {
      const wrId = g.pick([0, 1, 8, 9, 10, 11, 12, 0x7fff_ffff, Number.MAX_SAFE_INTEGER, g.u32()]);
      this.core.handleComplete(wrId, g.chance(0.5) ? { ok: true } : { ok: false, why: g.pick(['flush', 'remote', 'link', 'rnr', 'local'] as const), status: 'Err' }, this.now);
      return this.#after();
    }
    const p = this.outstanding.splice(g.chance(0.8) ? 0 : g.int(this.outstanding.length), 1)[0]!;
    this.cls = `complete/${p.kind}`;
    let r: Outcome = { ok: true };
    if (g.chance(this.h / 3)) r = { ok: false, why: g.pick(['flush', 'remote', 'link', 'rnr', 'local'] as const), status: 'Err' };
    if (p.kind === 'read' && r.ok && p.local) {
      // The attacker's bytes for the rendezvous message: a value bomb in a share of them.
      const b = g.chance(0.5) ? msgpackBomb(g, Math.min(p.local.len, g.chance(0.01) ? 1 << 20 : 4096)).bytes : g.bytes(Math.min(p.local.len, 64));
      this.last = b;
      this.ports.write(p.local.region, p.local.off, b.subarray(0, Math.min(b.length, p.local.len)));
    }
    this.core.handleComplete(p.wrId, r, this.now);
    if (g.chance(this.h / 10)) this.core.handleComplete(p.wrId, { ok: true }, this.now);
    return this.#after();
  }

  #tick(): CoreStep {
    const g = this.g;
    this.last = new Uint8Array(0);
    const d = this.core.pollTimeout();
    this.now += g.chance(0.5) && d !== undefined ? Math.max(0, d - this.now + g.pick([-1, 0, 1])) : g.pick([0, 1, 50, 2000, 5000, 86_400_000]);
    this.core.handleTimeout(this.now);
    return this.#after();
  }

  /** The application side: send, take (decoding values as the shell does), close. */
  #app(): CoreStep {
    const g = this.g;
    this.last = new Uint8Array(0);
    const k = g.int(10);
    if (k < 5) {
      if (this.core.state !== 'open') return 'not open (the shell refuses the send)';
      const len = g.pick([0, 1, 200, 256, 257, 4096, 4097, 32768, 32769, 100_000, g.int(70_000)]);
      if (len > this.core.maxMessage) return 'larger than the peer takes (the shell refuses the send)';
      const value = g.chance(0.3);
      this.core.send(value ? encodeValue(g.bytes(Math.min(len, 64))) : new Uint8Array(len), value, this.now, g.chance(0.7));
    } else if (k < 9) {
      for (let i = 0; i < 8; i++) {
        const d = this.core.pollMessage(this.now);
        if (!d) break;
        if (d.value) {
          const v = decodeValue(d.bytes, DEFAULT_DECODE_LIMITS);
          if (!v.ok) this.core.fail('protocol', 'a value that does not decode');
          else if (({} as Record<string, unknown>).polluted !== undefined) throw new Error('a decoded value polluted Object.prototype');
        }
      }
    } else this.core.close(this.now);
    return this.#after();
  }
}
