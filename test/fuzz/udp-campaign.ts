// The udp campaign: a victim device V and a real peer P (two udp devices, mtu 1500) joined by
// an rc QP pair and an srd QP pair through test/relay.ts (clean, tapped), running Transfer and
// SrdTransfer rounds; meanwhile the
// three attackers of udp-attack.ts send their inputs at V. Pass criteria (monitor.ts) checked
// throughout; failures print the seed and input index and save the last inputs. V and P ask for
// the same integrity (options.integrity; by default the seed picks: odd xxh3, even crc32c), so
// both trailer kinds get fuzzed and the attackers seal with the kind their target settled.
import { Access, openDevice, QpState, type Device, type QueuePair } from '../../src/index.js';
import { decodeFrames, frameBytes } from '../../src/transport/udp/frame-codec.js';
import type { UdpLink } from '../../src/transport/udp/link.js';
import type { Frame } from '../../src/core/frame.js';
import { UdpIntegrity } from '../../src/wire/spec.js';
import { UdpType, decodeUdpHdr, udpTrailerKind } from '../../src/wire/udp.js';
import { startUdpRelay, type UdpRelay } from '../relay.js';
import type { Targets } from './ddp.js';
import { InputRing, Monitor, STALL_MS } from './monitor.js';
import { DEFAULT_HEAP_BOUND, delta, sumOf, top, type CampaignOptions, type CampaignResult } from './report.js';
import { Gen, inputRand } from './rng.js';
import { SrdTransfer } from './srd-transfer.js';
import { ALL, Transfer } from './transfer.js';
import {
  hostilePayload, MAX_WINDOW, newLearned, observe, offPathDatagram, onPathDatagram, seal, trailerLen, UdpAttackSocket, type Learned,
} from './udp-attack.js';

/** Counters of dev.stats() (link and engine) that count an input refused, answered instead of served, or dropped. */
export const UDP_REFUSALS = [
  'truncated', 'oversized', 'badCrc', 'badHash', 'badIntegrity', 'integrityRefused', 'malformed', 'unknownContext', 'stale', 'contextLimit', 'hostLimit', 'cookiesSent',
  'cookiesFailed', 'cookiesExpired', 'cookiesIgnored', 'unvalidated', 'restartClaims', 'amplificationRefused', 'resetsSuppressed',
  'resetsInvalid', 'badAck', 'badSack', 'badFrames', 'rxDuplicate', 'rxOutOfWindow', 'rxNoCredit',
] as const;
const ENGINE_REFUSALS = ['drops', 'duplicates', 'terminatesSent', 'srdFlowsRefused'] as const;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));
const psnDiff = (a: number, b: number): number => (a - b) | 0;

function flatStats(dev: Device): Record<string, number> {
  const s = dev.stats() as unknown as Record<string, unknown>;
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(s)) if (typeof v === 'number') out[k] = v;
  for (const [k, v] of Object.entries((s.link ?? {}) as Record<string, unknown>)) if (typeof v === 'number') out[k] = v;
  return out;
}

/**
 * A socket that completed the cookie handshake with V: it owns a transport context there,
 * keeps it alive (acks what V sends, answers hellos) and carries the validated attacker's inputs.
 */
export class ValidatedPeer {
  ctx: number;
  peerCtx = 0;
  sndNxt = 0;
  rcvNxt = 0;
  private ahead = new Set<number>();
  private cookieWait: ((c: { time: number; mac: Uint8Array }) => void) | undefined;
  private readyWait: (() => void) | undefined;
  resetHeard = false;
  /** Our QPN for V's qp2, and the engine message sequence we are at. */
  qpn = 0;
  ssn = 1;
  hellos = 0;
  /** The trailer kind V settled for our context (from its first answer); CRC32C until then. */
  trailer: number = UdpIntegrity.Crc32c;

  /** `wish`: the integrity (a UdpIntegrity code) our handshake asks for; none: a peer from before the block, which V settles as crc32c if it asks crc32c or none and refuses if it asks xxh3. */
  constructor(readonly s: UdpAttackSocket, readonly to: { host: string; port: number }, ctx: number, readonly wish?: number) {
    this.ctx = ctx;
    s.sock.on('message', (m) => this.onMessage(m));
  }

  private onMessage(m: Buffer): void {
    const tl = trailerLen(m);
    const r = decodeUdpHdr(m, 0, m.length - tl);
    if (!r.ok) return;
    const h = r.value;
    if (h.dstCtx !== this.ctx) return;
    if (h.type === UdpType.Cookie) {
      if (h.cookie) this.cookieWait?.(h.cookie);
      return;
    }
    if (h.type === UdpType.Reset) {
      this.resetHeard = true;
      return;
    }
    if (this.peerCtx === 0 && h.token !== undefined) {
      this.peerCtx = h.srcCtx;
      // V's first answer naming our context is sealed with the settled kind (docs/integrity.md).
      this.trailer = udpTrailerKind(m);
      this.readyWait?.();
    }
    if (h.type !== UdpType.Data) return;
    const d = psnDiff(h.psn, this.rcvNxt);
    if (d === 0) {
      this.rcvNxt = (this.rcvNxt + 1) >>> 0;
      while (this.ahead.delete(this.rcvNxt)) this.rcvNxt = (this.rcvNxt + 1) >>> 0;
    } else if (d > 0 && d < MAX_WINDOW && this.ahead.size < MAX_WINDOW) this.ahead.add(h.psn);
    const frames: Frame[] = [];
    decodeFrames(m.subarray(r.length, m.length - tl), h.dstQpn, h.srcQpn, frames);
    for (const f of frames) {
      if (f.kind === 'hello' && !f.reply && f.dstQpn === this.qpn) {
        this.hellos++;
        this.data(frameBytes({ kind: 'hello', srcQpn: this.qpn, dstQpn: f.srcQpn, reply: true }), f.srcQpn, this.qpn);
      }
    }
    if (h.ackReq) this.ack();
  }

  /** A well-formed DATA datagram on our context (the next PSN, our ack). */
  data(payload: Uint8Array, dstQpn: number, srcQpn: number): void {
    this.s.send(this.to, seal({ srcCtx: this.ctx, dstCtx: this.peerCtx, psn: this.sndNxt, ackPsn: this.rcvNxt, window: 256, dstQpn, srcQpn, tsVal: 1 }, payload, undefined, this.trailer));
    this.sndNxt = (this.sndNxt + 1) >>> 0;
  }

  ack(): void {
    this.s.send(this.to, seal({ type: UdpType.Ack, srcCtx: this.ctx, dstCtx: this.peerCtx, psn: this.sndNxt, ackPsn: this.rcvNxt, window: 256, tsVal: 1 }, undefined, undefined, this.trailer));
  }

  /** The cookie handshake (probe, COOKIE, echo with our token); false when V did not answer. */
  async handshake(ctx: number): Promise<boolean> {
    this.ctx = ctx;
    this.peerCtx = 0;
    this.sndNxt = 0;
    this.rcvNxt = 0;
    this.ahead.clear();
    this.resetHeard = false;
    this.trailer = UdpIntegrity.Crc32c;
    const integ = this.wish === undefined ? {} : { integ: this.wish };
    const payload = frameBytes({ kind: 'ack', srcQpn: 1, dstQpn: 0x7ffffff0, ssn: 0 });
    for (let attempt = 0; attempt < 5; attempt++) {
      const cookie = await new Promise<{ time: number; mac: Uint8Array } | undefined>((res) => {
        const t = setTimeout(() => res(undefined), 500);
        this.cookieWait = (c) => {
          clearTimeout(t);
          res(c);
        };
        this.s.send(this.to, seal({ srcCtx: ctx, cookie: { time: 0, mac: new Uint8Array(8) }, ...integ, dstQpn: 0x7ffffff0, srcQpn: 1 }, payload));
      });
      this.cookieWait = undefined;
      if (!cookie) continue;
      const ok = await new Promise<boolean>((res) => {
        const t = setTimeout(() => res(false), 500);
        this.readyWait = () => {
          clearTimeout(t);
          res(true);
        };
        this.s.send(this.to, seal({ srcCtx: ctx, cookie, token: Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8), ackReq: true, ...integ, dstQpn: 0x7ffffff0, srcQpn: 1 }, payload));
      });
      this.readyWait = undefined;
      if (ok) {
        this.sndNxt = 1;
        return true;
      }
    }
    return false;
  }
}

export async function runUdpCampaign(o: CampaignOptions): Promise<CampaignResult> {
  const log = o.log ?? (() => {});
  const seed = o.seed >>> 0;
  const progressEvery = o.progressEvery ?? Math.max(1000, Math.floor(o.inputs / 10));
  const mon = new Monitor();
  const ring = new InputRing();
  const failures: string[] = [];
  const byRole: Record<string, number> = { off: 0, on: 0, validated: 0 };
  const byClass = new Map<string, number>();
  const learned: Learned = newLearned();
  let captured = 0;
  let toVictimViaRelay = 0;
  let injected = 0;
  let refusedSent = 0;
  const pending = new Set<NodeJS.Timeout>();

  const integrity = o.integrity ?? (seed & 1 ? 'xxh3' : 'crc32c');
  // The victim runs inline (workers: 0): the campaign reads its engine's tables.
  const V = await openDevice({ transport: 'udp', mtu: 1500, integrity, workers: 0 });
  const P = await openDevice({ transport: 'udp', mtu: 1500, integrity });
  const vAddr = V.address as unknown as { host: string; port: number };
  let relay: UdpRelay | undefined;
  const socks: UdpAttackSocket[] = [];
  let vp: ValidatedPeer | undefined;
  let result: CampaignResult | undefined;
  mon.start();
  try {
    relay = await startUdpRelay({
      target: vAddr,
      seed,
      tap: (msg, toServer) => {
        if (toServer) toVictimViaRelay++;
        observe(learned, msg, toServer, captured++);
      },
    });
    const pdV = V.allocPd();
    const cqV = V.createCq({ depth: 1024 });
    const qpV = pdV.createQp({ type: 'rc', sendCq: cqV, recvCq: cqV, maxSendWr: 64, maxRecvWr: 64, maxSge: 4 });
    const pdP = P.allocPd();
    const cqP = P.createCq({ depth: 1024 });
    const qpP = pdP.createQp({ type: 'rc', sendCq: cqP, recvCq: cqP, maxSendWr: 64, maxRecvWr: 64, maxSge: 4 });
    const pAddr = P.address as unknown as { host: string; port: number };
    const pViaRelay = await relay.clientAddress(pAddr);
    await Promise.all([qpV.connect({ address: pViaRelay, qpn: qpP.qpn }), qpP.connect({ address: relay.address, qpn: qpV.qpn })]);
    const transfer = new Transfer({ dev: V, pd: pdV, cq: cqV, qp: qpV }, { dev: P, pd: pdP, cq: cqP, qp: qpP }, seed);
    await transfer.round();
    // What V and P settled (the only context V has yet): the kind the on-path attacker will see.
    const settledLink = V.stats().link as unknown as Record<string, number>;
    const settled = settledLink.contextsXxh3 ? 'xxh3' : settledLink.contextsCrc32c ? 'crc32c' : settledLink.contextsNone ? 'none' : 'unsettled';
    if (settled !== integrity) throw new Error(`V and P settled ${settled}, not the ${integrity} both asked for`);
    // srd traffic on the same path (issue #11 hole 3's class: srd flows, which any sender can open).
    const srd = new SrdTransfer({ dev: V, pd: pdV }, { dev: P, pd: pdP }, pViaRelay, relay.address, seed);
    await srd.round();

    // The attacker's own protection domain on V: a region it is granted, ones it was granted and lost.
    const pd2 = V.allocPd();
    const cq2 = V.createCq({ depth: 4096 });
    const own = pd2.regMr(65536, ALL);
    const small = pd2.regMr(4096, Access.LocalWrite | Access.RemoteWrite);
    const dead: number[] = [];
    for (let i = 0; i < 4; i++) {
      const m = pd2.regMr(4096, ALL);
      dead.push(m.rkey);
      m.deregister();
    }
    const targets: Targets = {
      own: [{ stag: own.rkey, addr: own.addr, length: own.length }, { stag: small.rkey, addr: small.addr, length: small.length }],
      learned: [], dead, msn: [1, 1, 1, 1], maxData: 1400,
    };
    for (const k of transfer.stags) targets.learned.push({ stag: k, to: 0 });

    // Off-path sockets and the validated peer.
    for (let i = 0; i < 4; i++) socks.push(await UdpAttackSocket.open());
    const vsock = await UdpAttackSocket.open();
    socks.push(vsock);
    vp = new ValidatedPeer(vsock, vAddr, 0x5eed0000 | (seed & 0xffff), integrity === 'xxh3' ? UdpIntegrity.Xxh3 : UdpIntegrity.Crc32c);
    let vctx = vp.ctx;
    if (!(await vp.handshake(vctx))) throw new Error('validated attacker: the cookie handshake failed');
    if (vp.trailer !== (integrity === 'xxh3' ? UdpIntegrity.Xxh3 : UdpIntegrity.Crc32c)) throw new Error(`validated attacker: V settled trailer kind ${vp.trailer} for a ${integrity} wish`);
    let qp2: QueuePair | undefined;
    let qp2Since = 0;
    let qp2Made = 0;
    const newQp2 = (): void => {
      if (qp2) qp2.destroy();
      qp2 = pd2.createQp({ type: 'rc', sendCq: cq2, recvCq: cq2, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 });
      for (let i = 0; i < 8; i++) qp2.postRecv({ wrId: i, sgList: [{ addr: own.addr + i * 2048, length: 2048, lkey: own.lkey }] });
      vp!.qpn = 0x1000 + (qp2Made++ % 0xfff0);
      vp!.ssn = 1;
      targets.msn = [1, 1, 1, 1];
      qp2Since = Date.now();
      qp2.connect({ address: { transport: 'udp', host: '127.0.0.1', port: vsock.port }, qpn: vp!.qpn, timeoutMs: 3000 }).catch(() => {});
    };
    newQp2();
    let churnSock: UdpAttackSocket | undefined;
    let churns = 0;
    let churnOk = 0;

    const link = () => flatStats(V);
    const eng0 = flatStats(V);
    const peer0 = flatStats(P);
    const rx0 = eng0.rxDatagrams ?? 0;
    let attackerSentBase = 0;
    const attackerSent = (): number => socks.reduce((a, s) => a + s.sent, 0) + (churnSock?.sent ?? 0) + attackerSentBase;

    // The transfer keeps going while the attack runs.
    let stop = false;
    let transferError: unknown;
    const transferLoop = (async () => {
      while (!stop) {
        try {
          await transfer.round();
          await srd.round();
        } catch (e) {
          transferError = e;
          return;
        }
        await turn();
      }
    })();

    await sleep(50);
    mon.baseline();
    const t0 = performance.now();
    let lastLog = t0;
    let failedAt = -1;
    for (let i = 0; i < o.inputs; i++) {
      mon.index = i;
      const g = new Gen(inputRand(seed, i));
      const roll = g.r();
      let role: string;
      const roles = o.roles ?? ['off', 'on', 'validated'];
      let out: { bytes: Uint8Array; cls: string } | undefined;
      if (roll < 0.2 && roles.includes('on')) {
        const d = onPathDatagram(g, learned, targets);
        if (d && relay) {
          role = 'on';
          out = d;
          if (d.refused) refusedSent += d.copies;
          const send = (): void => {
            for (let c = 0; c < d.copies; c++) if (relay!.inject(d.bytes, true, pAddr)) injected++;
          };
          if (d.delayMs > 0) {
            const t = setTimeout(() => {
              pending.delete(t);
              send();
            }, d.delayMs);
            pending.add(t);
          } else send();
        } else role = 'off';
      } else role = roll < 0.55 ? 'off' : 'validated';
      if (!roles.includes(role)) role = roles.includes('validated') ? 'validated' : roles.includes('off') ? 'off' : 'none';
      if (role === 'none') continue;
      if (role === 'off') {
        const d = offPathDatagram(g, learned, targets);
        out = d;
        refusedSent++;
        socks[g.int(4)]!.send(vAddr, d.bytes);
      } else if (role === 'validated') {
        // Mostly the next PSN and a right ack (so the context lives and frames reach the engine).
        const p = hostilePayload(g, targets, g.chance(0.7) ? vp.ssn : g.edge32(vp.ssn, 64));
        // qp2 (70 %), the real rc QP (10 %), the real srd QP (10 %: any sender may open an srd flow), others.
        const qpnRoll = g.int(20);
        const dstQpn = qpnRoll < 14 ? (qp2?.qpn ?? 1) : qpnRoll < 16 ? qpV.qpn : qpnRoll < 18 ? srd.qpns.v : g.pick([0, 1, 0xffffffff, g.u32()]);
        const srcQpn = g.chance(0.9) ? vp.qpn : g.u32();
        const inOrder = g.chance(0.8);
        const psn = inOrder ? vp.sndNxt : g.edge32(vp.sndNxt, MAX_WINDOW);
        const ackPsn = g.chance(0.8) ? vp.rcvNxt : g.edge32(vp.rcvNxt, MAX_WINDOW);
        // dstCtx 0 (a peer that has not learnt V's id yet) is CRC32C whatever was settled.
        const dstCtx = g.chance(0.97) ? vp.peerCtx : 0;
        const b = seal({
          srcCtx: vp.ctx, dstCtx, psn, ackPsn, window: g.chance(0.9) ? 256 : g.int(0x10000),
          ackReq: g.chance(0.2), retx: g.chance(0.1), dstQpn, srcQpn, tsVal: g.u32(), tsEcr: g.chance(0.9) ? 0 : g.u32(),
          ...(g.chance(0.1) ? { sack: Array.from({ length: g.range(1, 8) }, () => { const s = g.edge32(vp!.rcvNxt, MAX_WINDOW); return { start: s, end: (s + g.range(0, 8)) >>> 0 }; }) } : {}),
        }, p.bytes, undefined, dstCtx === 0 ? UdpIntegrity.Crc32c : vp.trailer);
        if (inOrder) vp.sndNxt = (vp.sndNxt + 1) >>> 0;
        if (g.chance(0.3)) vp.ssn = (vp.ssn + 1) >>> 0;
        vsock.send(vAddr, b);
        out = { bytes: b, cls: `val/${p.cls}` };
      }
      byRole[role]! += 1;
      if (out) {
        const c = out.cls.split('/').slice(0, 3).join('/');
        byClass.set(c, (byClass.get(c) ?? 0) + 1);
        ring.push(i, role, out.cls, out.bytes);
      }

      if ((i & 31) === 31) {
        await turn();
        srd.pump();
        // The attacker's peered QP: a new one once V has failed it (most hostile frames do).
        const st = qp2?.state;
        if (st === QpState.Error || (st !== QpState.Rts && Date.now() - qp2Since > 3000)) newQp2();
        // Pace: stay within what V can read (a kernel drop would make the refusal check loose).
        const lag = (): number => attackerSent() + toVictimViaRelay + injected - ((flatStats(V).rxDatagrams ?? 0) - rx0);
        for (let w = 0; w < 200 && lag() > 1024; w++) await sleep(1);
      }
      if ((i & 1023) === 1023) {
        // Keep the attacker's footholds: its context (re-handshake after a RESET), its peered QP.
        if (vp.resetHeard) {
          vctx = (vctx + 1) >>> 0;
          await vp.handshake(vctx);
        }
        for (const [k, to] of learned.stags) if (!targets.learned.some((x) => x.stag === k) && targets.learned.length < 64) targets.learned.push({ stag: k, to });
        // Context churn: a fresh address completing the handshake now and then (pushes the per-host cap).
        if ((i & 8191) === 8191) {
          if (churnSock) {
            attackerSentBase += churnSock.sent;
            churnSock.close();
          }
          churnSock = await UdpAttackSocket.open();
          const cp = new ValidatedPeer(churnSock, vAddr, (0xc0000000 | (seed << 8) | churns) >>> 0, integrity === 'xxh3' ? UdpIntegrity.Xxh3 : UdpIntegrity.Crc32c);
          churns++;
          if (await cp.handshake(cp.ctx)) churnOk++;
        }
        if (mon.errors.length || transferError) {
          failedAt = i;
          break;
        }
      }
      if ((i + 1) % progressEvery === 0) {
        const now = performance.now();
        mon.sampleHeap();
        const s = link();
        log(`udp seed ${seed}: ${i + 1}/${o.inputs} inputs, ${Math.round((progressEvery * 1000) / (now - lastLog))}/s; rounds ${transfer.rounds}; heap ${(mon.heapMax / 1048576).toFixed(1)} MiB max; stall ${mon.maxStallMs.toFixed(1)} ms; contexts ${s.contexts}; qp2 ${qp2Made}`);
        lastLog = now;
      }
    }
    const seconds = (performance.now() - t0) / 1000;
    for (const t of pending) clearTimeout(t);
    pending.clear();
    stop = true;
    await transferLoop;
    // Let what is in flight land, then one more verified round.
    await sleep(200);
    if (!transferError) {
      try {
        await transfer.round();
        await srd.round();
      } catch (e) {
        transferError = e;
      }
    }
    const heapEnd = mon.sampleHeap();
    const s1 = flatStats(V);
    const rxDelta = (s1.rxDatagrams ?? 0) - rx0;
    const lost = Math.max(0, attackerSent() + toVictimViaRelay + injected - rxDelta);
    const keys = [...UDP_REFUSALS, ...ENGINE_REFUSALS];
    const refusalsDelta = sumOf(s1, keys) - sumOf(eng0, keys);
    const inputsDone = failedAt >= 0 ? failedAt + 1 : o.inputs;
    if (mon.errors.length) failures.push(`uncaught: ${mon.errors[0]!.split('\n').slice(0, 8).join(' | ')}`);
    if (transferError) failures.push(`transfer: ${(transferError as Error).message}`);
    if (qpV.state !== QpState.Rts) failures.push(`the real QP is in state ${qpV.state}, not RTS`);
    if (srd.v.qp.state !== QpState.Rts) failures.push(`the real srd QP is in state ${srd.v.qp.state}, not RTS`);
    if (mon.stalls > 0) failures.push(`${mon.stalls} event-loop stalls over ${STALL_MS} ms of own CPU (max ${mon.maxStallMs.toFixed(1)} ms near input ${mon.worstStall.index}, ${mon.worstStall.atMs} ms into the run, GC in that interval ${mon.worstStall.gcMs} ms; longest GC ${mon.maxGcMs.toFixed(1)} ms)`);
    const bound = o.heapBoundBytes ?? DEFAULT_HEAP_BOUND;
    if (heapEnd - mon.heapBase > bound) failures.push(`heap grew ${((heapEnd - mon.heapBase) / 1048576).toFixed(1)} MiB after GC, bound ${(bound / 1048576).toFixed(0)} MiB`);
    if (refusalsDelta < refusedSent - lost) failures.push(`refusal counters moved ${refusalsDelta}, fewer than the ${refusedSent} certainly-refused inputs (${lost} lost in the kernel)`);
    const tables = {
      contexts: s1.contexts ?? 0, hostsWithContexts: s1.hostsWithContexts ?? 0, resetHosts: s1.resetHosts ?? 0, retiredIds: s1.retiredIds ?? 0,
      engineQps: (V as unknown as { engine: { qps: Map<number, unknown> } }).engine?.qps?.size ?? -1,
    };
    if (tables.contexts > 1024 || tables.resetHosts > 4096 || tables.retiredIds > 4096) failures.push(`a table past its bound: ${JSON.stringify(tables)}`);
    let savedTo: string | undefined;
    if (failures.length) {
      savedTo = ring.save(o.failDir ?? 'fuzz-failures', 'udp', seed, failedAt >= 0 ? failedAt : inputsDone - 1, failures.join('; '));
      log(`FAILED: udp seed ${seed} at input ${failedAt >= 0 ? failedAt : inputsDone - 1}; last ${ring.size} inputs saved to ${savedTo}`);
    }
    result = {
      transport: 'udp', seed, integrity, inputs: inputsDone, seconds, rate: inputsDone / seconds, byRole, byClass: top(byClass),
      rounds: transfer.rounds, transferBytes: transfer.bytes + srd.bytes, qpState: String(qpV.state), refusedSent, refusalsDelta, lostInKernel: lost,
      counters: delta(s1, eng0, [...keys, 'rxDatagrams', 'contextsCreated', 'contextsReclaimed', 'contextsFailed', 'peerRestarts', 'resetsSent', 'resetsReceived', 'cookiesValidated', 'rxInDevice', 'rxAreaFull', 'srdFlowsFailed', 'srdFlowsEvicted']),
      tables, maxStallMs: mon.maxStallMs, maxLateMs: mon.maxLateMs, loopDelay: mon.loopDelay(), heapBase: mon.heapBase, heapMax: mon.heapMax, heapEnd,
      failures, ...(savedTo ? { savedTo } : {}),
      peerCounters: delta(flatStats(P), peer0, Object.keys(flatStats(P)).filter((k) => !/^(tx|rx|batches|frames|flushes|directS|directB|placeB|stagedB|txSocket)/.test(k))),
      extra: { worstStallIndex: mon.worstStall.index, worstStallGcMs: mon.worstStall.gcMs, maxGcMs: Math.round(mon.maxGcMs), qp2Made, hellosAnswered: vp.hellos, churns, churnOk, injected,
        srdRounds: srd.rounds, srdMessages: srd.messages, srdBytes: srd.bytes, srdForeign: srd.foreign, srdForeignErrors: srd.foreignErrors, srdFlowsV: (V as unknown as { engine: { qps: Map<number, { flows: Map<unknown, unknown> }> } }).engine?.qps?.get(srd.qpns.v)?.flows.size ?? -1 },
    };
    void (V as unknown as { udp?: UdpLink }).udp;
  } finally {
    mon.stop();
    for (const t of pending) clearTimeout(t);
    for (const s of socks) s.close();
    await relay?.close();
    await P.close();
    await V.close();
  }
  return result!;
}
