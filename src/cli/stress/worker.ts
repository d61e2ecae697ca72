// One stress worker (a piscina task): two devices, `qps` connected QP pairs, and per pair an
// async loop that posts a seeded random operation, waits for its completion and checks every
// byte against a model of the target window. Pairs run concurrently; each owns its window,
// so the model is exact. Counters go to a shared Float64Array so the main thread can show a
// live progress line.
import { Access, openDevice, Opcode, WcOpcode, WcStatus } from '../../index.js';
import { Reaper } from './reaper.js';
import { Rng } from './rng.js';

export interface StressTask {
  index: number;
  seed: number;
  qps: number;
  deadline: number; // Date.now() value
  ops: number;
  maxSize: number;
  transport: 'udp' | 'tcp' | 'inproc';
  injectFault: boolean;
  /** [ops, bytes, errors, integrityFailures] per worker, at index*4. */
  counters: SharedArrayBuffer;
}

export interface StressResult {
  ops: number;
  bytes: number;
  errors: number;
  integrityFailures: number;
  latenciesUs: number[];
  mix: Record<string, number>;
  firstErrors: string[];
}

const RESERVOIR = 4096;
const ALL = Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead | Access.RemoteAtomic;

export default async function stressTask(t: StressTask): Promise<StressResult> {
  const rng = new Rng(t.seed);
  const counters = new Float64Array(t.counters, t.index * 4 * 8, 4);
  const res: StressResult = { ops: 0, bytes: 0, errors: 0, integrityFailures: 0, latenciesUs: [], mix: {}, firstErrors: [] };
  let seen = 0;
  const sample = (us: number) => {
    seen++;
    if (res.latenciesUs.length < RESERVOIR) res.latenciesUs.push(us);
    else {
      const j = rng.int(0, seen - 1);
      if (j < RESERVOIR) res.latenciesUs[j] = us;
    }
  };
  const fail = (kind: 'errors' | 'integrityFailures', msg: string) => {
    res[kind]++;
    counters[kind === 'errors' ? 2 : 3] = res[kind];
    if (res.firstErrors.length < 5) res.firstErrors.push(msg);
  };

  const opts = (t.transport === 'inproc' ? { transport: 'inproc' } : { transport: t.transport, host: '127.0.0.1', port: 0 }) as never;
  const devA = await openDevice(opts);
  const devB = await openDevice(opts);
  const win = Math.ceil(t.maxSize / 64) * 64 * 2 + 64; // data window + one atomic word at the end
  const pdA = devA.allocPd();
  const pdB = devB.allocPd();
  const cqA = devA.createCq({ depth: t.qps * 8 + 64 });
  const cqB = devB.createCq({ depth: t.qps * 8 + 64 });
  const local = pdA.regMr(t.qps * win, Access.LocalWrite);
  const target = pdB.regMr(t.qps * win, ALL);
  const recv = pdB.regMr(t.qps * win, Access.LocalWrite);
  const model = new Uint8Array(t.qps * win);
  const cap = { maxSendWr: 8, maxRecvWr: 8, maxSge: 4 };
  const qpA = Array.from({ length: t.qps }, () => pdA.createQp({ type: 'rc', sendCq: cqA, recvCq: cqA, ...cap }));
  const qpB = Array.from({ length: t.qps }, () => pdB.createQp({ type: 'rc', sendCq: cqB, recvCq: cqB, ...cap }));
  await Promise.all(
    qpA.flatMap((a, i) => [a.connect({ address: devB.address, qpn: qpB[i]!.qpn }), qpB[i]!.connect({ address: devA.address, qpn: a.qpn })]),
  );
  const reapA = new Reaper(cqA);
  const reapB = new Reaper(cqB);
  let nextWr = 1;
  let budget = t.ops;
  let injected = !t.injectFault;

  const pair = async (q: number): Promise<void> => {
    const base = q * win; // offset of this pair's window in every region
    const atom = base + win - 64; // 8-byte aligned atomic word (regions are 64-byte aligned)
    const qa = qpA[q]!;
    const qb = qpB[q]!;
    const bytesOf = (mr: { buffer: Uint8Array }, off: number, len: number) => mr.buffer.subarray(off, off + len);
    const range = () => {
      const len = rng.int(1, t.maxSize);
      const off = rng.int(0, win - 64 - len);
      return { off, len };
    };
    // With --inject-fault the run must fail: until the model is corrupted (at a write's check)
    // every op is a write, and the deadline does not end the run before one (a slow start on a
    // loaded machine could spend the whole --duration: no write, nothing injected, exit 0).
    while (budget > 0 && (Date.now() < t.deadline || !injected)) {
      budget--;
      const drawn = ['write', 'write', 'read', 'vread', 'send', 'fadd', 'cswap'][rng.int(0, 6)]!;
      const kind = injected ? drawn : 'write';
      res.mix[kind] = (res.mix[kind] ?? 0) + 1;
      const wrId = nextWr++;
      const t0 = performance.now();
      let moved = 0;
      try {
        if (kind === 'write') {
          const { off, len } = range();
          const src = bytesOf(local, base, len);
          rng.fill(src);
          const done = reapA.expect(wrId);
          qa.postSend({ wrId, opcode: Opcode.RdmaWrite, sgList: [{ addr: local.addr + base, length: len, lkey: local.lkey }], remoteAddr: target.addr + base + off, rkey: target.rkey });
          const wc = await done;
          if (wc.status !== WcStatus.Success) throw new Error(`write completed with status ${wc.status}`);
          model.set(src, base + off);
          if (!injected) {
            model[base + off] ^= 0xff;
            injected = true;
          }
          if (!equal(bytesOf(target, base + off, len), model.subarray(base + off, base + off + len))) fail('integrityFailures', `write of ${len} B at +${off} on QP pair ${q}: target differs from model`);
          moved = len;
        } else if (kind === 'read') {
          const { off, len } = range();
          const done = reapA.expect(wrId);
          qa.postSend({ wrId, opcode: Opcode.RdmaRead, sgList: [{ addr: local.addr + base, length: len, lkey: local.lkey }], remoteAddr: target.addr + base + off, rkey: target.rkey });
          const wc = await done;
          if (wc.status !== WcStatus.Success) throw new Error(`read completed with status ${wc.status}`);
          if (!equal(bytesOf(local, base, len), model.subarray(base + off, base + off + len))) fail('integrityFailures', `read of ${len} B at +${off} on QP pair ${q}: sink differs from model`);
          moved = len;
        } else if (kind === 'vread') {
          const n = rng.int(2, 4);
          const srcs: { addr: number; length: number; rkey: number }[] = [];
          const expect: Uint8Array[] = [];
          let total = 0;
          for (let i = 0; i < n; i++) {
            const len = rng.int(1, Math.max(1, Math.floor(t.maxSize / n)));
            const off = rng.int(0, win - 64 - len);
            srcs.push({ addr: target.addr + base + off, length: len, rkey: target.rkey });
            expect.push(model.subarray(base + off, base + off + len));
            total += len;
          }
          // Sinks split the total unevenly, independent of the source boundaries.
          const sinks: { addr: number; length: number; lkey: number }[] = [];
          const nSinks = Math.min(total, rng.int(1, 3));
          let left = total;
          let at = base;
          for (let i = 0; i < nSinks; i++) {
            const len = i === nSinks - 1 ? left : rng.int(1, left - (nSinks - 1 - i));
            sinks.push({ addr: local.addr + at, length: len, lkey: local.lkey });
            at += len + 8; // gaps between sinks: nothing may land there
            left -= len;
          }
          const done = reapA.expect(wrId);
          qa.postSend({ wrId, opcode: Opcode.RdmaRead, sgList: sinks, remoteSgList: srcs });
          const wc = await done;
          if (wc.status !== WcStatus.Success) throw new Error(`vectored read completed with status ${wc.status}`);
          const got = concat(sinks.map((s) => bytesOf(local, s.addr - local.addr, s.length)));
          if (!equal(got, concat(expect))) fail('integrityFailures', `vectored read (${n} sources, ${nSinks} sinks, ${total} B) on QP pair ${q}: sinks differ from model`);
          moved = total;
        } else if (kind === 'send') {
          const len = rng.int(1, t.maxSize);
          const src = bytesOf(local, base, len);
          rng.fill(src);
          const recvDone = reapB.expect(wrId);
          qb.postRecv({ wrId, sgList: [{ addr: recv.addr + base, length: win - 64, lkey: recv.lkey }] });
          const sendId = nextWr++;
          const sendDone = reapA.expect(sendId);
          qa.postSend({ wrId: sendId, opcode: Opcode.Send, sgList: [{ addr: local.addr + base, length: len, lkey: local.lkey }] });
          const [ws, wr] = await Promise.all([sendDone, recvDone]);
          if (ws.status !== WcStatus.Success || wr.status !== WcStatus.Success) throw new Error(`send completed with status ${ws.status}/${wr.status}`);
          if (wr.opcode !== WcOpcode.Recv || wr.byteLen !== len) fail('integrityFailures', `send of ${len} B on QP pair ${q}: receive completion says ${wr.byteLen} B`);
          else if (!equal(bytesOf(recv, base, len), src)) fail('integrityFailures', `send of ${len} B on QP pair ${q}: received bytes differ`);
          moved = len;
        } else {
          const dv = new DataView(target.buffer.buffer, target.buffer.byteOffset);
          const old = dv.getBigUint64(atom, true);
          const modelOld = readU64(model, atom);
          if (old !== modelOld) fail('integrityFailures', `atomic word on QP pair ${q} is ${old}, model ${modelOld}`);
          const add = rng.u64();
          const compare = rng.int(0, 1) === 0 ? modelOld : rng.u64();
          const done = reapA.expect(wrId);
          const sink = { addr: local.addr + base, length: 8, lkey: local.lkey };
          if (kind === 'fadd') qa.postSend({ wrId, opcode: Opcode.AtomicFetchAdd, compareAdd: add, sgList: [sink], remoteAddr: target.addr + atom, rkey: target.rkey });
          else qa.postSend({ wrId, opcode: Opcode.AtomicCmpSwap, compareAdd: compare, swap: add, sgList: [sink], remoteAddr: target.addr + atom, rkey: target.rkey });
          const wc = await done;
          if (wc.status !== WcStatus.Success) throw new Error(`${kind} completed with status ${wc.status}`);
          const returned = readU64(local.buffer, base);
          if (returned !== modelOld) fail('integrityFailures', `${kind} on QP pair ${q} returned ${returned}, model ${modelOld}`);
          const next = kind === 'fadd' ? (modelOld + add) & 0xffff_ffff_ffff_ffffn : modelOld === compare ? add : modelOld;
          writeU64(model, atom, next);
          if (readU64(target.buffer, atom) !== next) fail('integrityFailures', `${kind} on QP pair ${q} left ${readU64(target.buffer, atom)}, model ${next}`);
          moved = 8;
        }
        res.ops++;
        res.bytes += moved;
        counters[0] = res.ops;
        counters[1] = res.bytes;
        sample((performance.now() - t0) * 1000);
      } catch (e) {
        fail('errors', `${kind} on QP pair ${q}: ${(e as Error).message}`);
        return; // an RC QP in error flushes everything after: stop this pair
      }
    }
  };

  try {
    await Promise.all(qpA.map((_, q) => pair(q)));
  } finally {
    await reapA.stop();
    await reapB.stop();
    await devA.close();
    await devB.close();
  }
  return res;
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function readU64(b: Uint8Array, off: number): bigint {
  return new DataView(b.buffer, b.byteOffset, b.byteLength).getBigUint64(off, true);
}

function writeU64(b: Uint8Array, off: number, v: bigint): void {
  new DataView(b.buffer, b.byteOffset, b.byteLength).setBigUint64(off, v, true);
}
