// The tcp campaign: a victim device V and a real peer P (tcp devices) whose rc QP pair (rdma_cm
// service 0x5ab0, protection domain 1) runs Transfer rounds through a clean, re-cutting,
// tapped proxy. Attackers:
// - sessions (role 'conn'): raw node:net connections straight to V that complete (or break) the
//   MPA handshake with V's listener for service 0 (another protection domain) and then send
//   hostile FPDUs (tcp-attack.ts) naming their own region, STags learned on the real stream,
//   deregistered and guessed ones;
// - the path (role 'path'): a victim QP pair (service 0x5ab1, a third PD) also through the
//   proxy, whose client→server FPDUs are rewritten with a fixed CRC, duplicated, reordered,
//   dropped or preceded by injected hostile FPDUs while P keeps writing and sending on it.
// The real connection is only re-cut, never altered (an on-path attacker who alters an MPA
// stream with a recomputed CRC breaks that connection by design: the victim pair shows it).
import net from 'node:net';
import { Access, connect, ErrorCode, listen, openDevice, Opcode, QpState, type CmListener, type Device, type QueuePair } from '../../src/index.js';
import type { Targets } from './ddp.js';
import { InputRing, Monitor, STALL_MS } from './monitor.js';
import { DEFAULT_HEAP_BOUND, delta, sumOf, top, type CampaignOptions, type CampaignResult } from './report.js';
import { Gen, inputRand } from './rng.js';
import { hostileFpdu, mpaRequest, refixCrc } from './tcp-attack.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';
import { ALL, Transfer } from './transfer.js';

// Every way V ends a connection moves one of these. connectionsRefused / connectionsRefusedHost:
// the connection caps of issue #11 hole 7 refuse a connection before it is tracked, so
// handshakesRefused never sees it. terminatesReceived: a session whose FPDUs reach a
// well-formed Terminate puts V's QP in ERROR, and V closes the stream after it (RFC 5040 §5.2)
// without a Terminate of its own — seed 24301 has five such sessions, and on runs where the
// path's victim pair added few counts they were the deficit behind 'refusal counters moved
// 213, fewer than the 214 sessions V refused or terminated'. connectionsRefusedMemory: a
// connection established with no device memory left for its staging (Terminate and close).
export const TCP_REFUSALS = ['terminatesSent', 'streamFaults', 'dropped', 'drops', 'duplicates', 'handshakesRefused', 'connectionsRefused', 'connectionsRefusedHost', 'connectionsRefusedMemory', 'terminatesReceived'] as const;
const REAL = 0x5ab0;
const VICTIM = 0x5ab1;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function flatStats(dev: Device): Record<string, number> {
  const s = dev.stats() as unknown as Record<string, unknown>;
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(s)) if (typeof v === 'number') out[k] = v;
  // Link counters under their own names; the engine's and the link's terminatesSent both count.
  for (const [k, v] of Object.entries((s.link ?? {}) as Record<string, unknown>)) if (typeof v === 'number') out[k in out ? `link.${k}` : k] = v;
  return out;
}
const REFUSAL_KEYS = [...TCP_REFUSALS, 'link.terminatesSent'];

interface SessionOutcome {
  used: number;
  /** V ended the connection (refused the request, or terminated the stream). */
  closedByV: boolean;
  accepted: boolean;
}

export async function runTcpCampaign(o: CampaignOptions): Promise<CampaignResult> {
  const log = o.log ?? (() => {});
  const seed = o.seed >>> 0;
  const roles = o.roles ?? ['conn', 'path'];
  const progressEvery = o.progressEvery ?? Math.max(1000, Math.floor(o.inputs / 10));
  const mon = new Monitor();
  const ring = new InputRing();
  const failures: string[] = [];
  const byRole: Record<string, number> = { conn: 0, path: 0 };
  const byClass = new Map<string, number>();
  const count = (role: string, cls: string, bytes: Uint8Array, index: number): void => {
    byRole[role] = (byRole[role] ?? 0) + 1;
    const c = cls.split('/').slice(0, 3).join('/');
    byClass.set(c, (byClass.get(c) ?? 0) + 1);
    ring.push(index, role, cls, bytes);
  };
  const learned = new Map<number, number>();
  const V = await openDevice({ transport: 'tcp' });
  const P = await openDevice({ transport: 'tcp' });
  const vPort = (V.address as unknown as { port: number }).port;
  let proxy: TcpProxy | undefined;
  const listeners: CmListener[] = [];
  const open = new Set<net.Socket>();
  let result: CampaignResult | undefined;
  // Ends every loop below; set in finally too, so a run that throws does not leave them looping.
  let stop = false;
  mon.start();
  try {
    // The path: learns STags from every tagged FPDU (T bit) it carries; mutates the victim pair.
    let pathIndex = 0;
    let pathInputs = 0;
    const pathSeed = (seed ^ 0x9a7b) >>> 0;
    let targets: Targets | undefined;
    proxy = await startTcpProxy({
      target: { host: '127.0.0.1', port: vPort },
      seed,
      modeFor: (n) => (n === 0 ? 'clean' : 'mutate'),
      tap: (f) => {
        if (f.length >= 2 + 14 + 4 && (f[2]! & 0x80) !== 0 && learned.size < 64) {
          const dv = new DataView(f.buffer, f.byteOffset, f.length);
          learned.set(dv.getUint32(4), dv.getUint32(12));
        }
      },
      mutate: (f) => {
        if (!roles.includes('path') || !targets) return [f];
        const g = new Gen(inputRand(pathSeed, pathIndex++));
        if (!g.chance(0.3)) return [f];
        pathInputs++;
        const k = g.int(6);
        let out: Uint8Array[];
        let cls: string;
        if (k === 0) {
          const m = Uint8Array.from(f);
          for (let i = g.range(1, 3); i > 0; i--) m[2 + g.int(Math.max(1, m.length - 6))] = g.int(256);
          out = [refixCrc(m)];
          cls = 'path/rewrite';
        } else if (k === 1) {
          out = [f, f];
          cls = 'path/dup';
        } else if (k === 2) {
          out = [];
          cls = 'path/drop';
        } else if (k === 3) {
          const h = hostileFpdu(g, targets);
          out = [h.bytes, f];
          cls = `path/inject/${h.cls}`;
        } else if (k === 4) {
          const m = Uint8Array.from(f);
          m[m.length - 1] ^= 0x40;
          out = [m];
          cls = 'path/bad-crc';
        } else {
          // Header fields only: STag/TO or QN/MSN/MO bytes, CRC fixed.
          const m = Uint8Array.from(f);
          const at = 2 + g.range(2, Math.min(17, m.length - 7));
          m[at] = g.int(256);
          out = [refixCrc(m)];
          cls = 'path/hdr';
        }
        count('path', cls, out[0] ?? f, pathIndex - 1);
        return out;
      },
    });

    // V: the real listener (PD1), the attackers' listener (PD2, service 0), the victim's (PD3).
    const pdV = V.allocPd();
    const cqV = V.createCq({ depth: 1024 });
    const qpInit = { sendCq: cqV, recvCq: cqV, maxSendWr: 64, maxRecvWr: 64, maxSge: 4 };
    const lReal = listen(V, { pd: pdV, service: REAL, qpInit });
    listeners.push(lReal);
    const pd2 = V.allocPd();
    const cq2 = V.createCq({ depth: 8192 });
    const own = pd2.regMr(65536, ALL);
    const small = pd2.regMr(4096, Access.LocalWrite | Access.RemoteWrite);
    const dead: number[] = [];
    for (let i = 0; i < 4; i++) {
      const m = pd2.regMr(4096, ALL);
      dead.push(m.rkey);
      m.deregister();
    }
    const lAtt = listen(V, {
      pd: pd2, qpInit: { sendCq: cq2, recvCq: cq2, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 },
      setup: (qp) => {
        for (let i = 0; i < 4; i++) qp.postRecv({ wrId: i, sgList: [{ addr: own.addr + i * 4096, length: 4096, lkey: own.lkey }] });
      },
    });
    listeners.push(lAtt);
    const pd3 = V.allocPd();
    const cq3 = V.createCq({ depth: 8192 });
    const vicMr = pd3.regMr(65536, ALL);
    const lVic = listen(V, {
      pd: pd3, service: VICTIM, qpInit: { sendCq: cq3, recvCq: cq3, maxSendWr: 16, maxRecvWr: 64, maxSge: 1 },
      setup: (qp) => {
        for (let i = 0; i < 32; i++) qp.postRecv({ wrId: i, sgList: [{ addr: vicMr.addr + (i % 16) * 4096, length: 4096, lkey: vicMr.lkey }] });
      },
    });
    listeners.push(lVic);
    // Accepted attacker / victim QPs are kept until V fails them, then destroyed (bounded by the backlog).
    const accepted = new Set<QueuePair>();
    let acceptedTotal = 0;
    const acceptLoop = async (l: CmListener): Promise<void> => {
      while (!stop) {
        try {
          const qp = await l.accept(500);
          accepted.add(qp);
          acceptedTotal++;
        } catch (e) {
          // A timeout: look again. A closed listener (the run failed and its finally closes
          // them) rejects at once: looping on it would spin in microtasks and hide the failure.
          if ((e as { code?: string }).code === ErrorCode.Closed) return;
        }
        for (const qp of accepted) if (qp.state === QpState.Error) {
          accepted.delete(qp);
          qp.destroy();
        }
        cq2.poll(256);
        cq3.poll(256);
      }
    };
    const loops = [acceptLoop(lAtt), acceptLoop(lVic)];

    // The real pair through the proxy (its first connection: clean).
    const pdP = P.allocPd();
    const cqP = P.createCq({ depth: 1024 });
    const [qpP, qpV] = await Promise.all([
      connect(P, proxy.address, { pd: pdP, service: REAL, qpInit: { sendCq: cqP, recvCq: cqP, maxSendWr: 64, maxRecvWr: 64, maxSge: 4 } }),
      lReal.accept(10_000),
    ]);
    const transfer = new Transfer({ dev: V, pd: pdV, cq: cqV, qp: qpV }, { dev: P, pd: pdP, cq: cqP, qp: qpP }, seed);
    await transfer.round();
    targets = {
      own: [{ stag: own.rkey, addr: own.addr, length: own.length }, { stag: small.rkey, addr: small.addr, length: small.length }],
      learned: [], dead, msn: [1, 1, 1, 1], maxData: 2048,
    };
    for (const [k, to] of learned) targets.learned.push({ stag: k, to });

    // The victim pair: P writes and sends on it; the path mutates it; a new pair once it fails.
    let victims = 0;
    const pdPv = P.allocPd();
    const cqPv = P.createCq({ depth: 4096 });
    const src = pdPv.regMr(8192, ALL);
    const victimLoop = async (): Promise<void> => {
      while (!stop && roles.includes('path')) {
        let qp: QueuePair | undefined;
        try {
          qp = await connect(P, proxy!.address, { pd: pdPv, service: VICTIM, timeoutMs: 3000, qpInit: { sendCq: cqPv, recvCq: cqPv, maxSendWr: 16, maxRecvWr: 4, maxSge: 1 } });
          victims++;
          // Batches of 6 writes and 2 sends (V posts 32 receives per victim QP), so the path
          // has FPDUs to work on; the next batch once these completed.
          for (let i = 0; !stop && qp.state === QpState.Rts && i < 10_000; i++) {
            for (let j = 0; j < 6; j++) {
              qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 1 + ((i * 8 + j) * 97) % 8192, lkey: src.lkey }], remoteAddr: vicMr.addr + ((i + j) % 8) * 4096, rkey: vicMr.rkey });
            }
            for (let j = 0; j < 2; j++) qp.postSend({ wrId: 2, opcode: Opcode.Send, sgList: [{ addr: src.addr, length: 1 + ((i * 2 + j) * 31) % 4096, lkey: src.lkey }] });
            let got = 0;
            const t = Date.now();
            // A dropped FPDU leaves the stream waiting for bytes that never come: give up soon.
            while (got < 8 && Date.now() - t < 250 && qp.state === QpState.Rts) {
              got += cqPv.poll(16).length;
              if (got < 8) await cqPv.wait(50).catch(() => {});
            }
            if (got < 8) break;
          }
        } catch {
          await sleep(20);
        }
        if (qp) qp.destroy();
        cqPv.poll(1024);
      }
    };
    const vLoop = victimLoop();

    // The transfer keeps going meanwhile.
    let transferError: unknown;
    const transferLoop = (async () => {
      while (!stop) {
        try {
          await transfer.round();
        } catch (e) {
          transferError = e;
          return;
        }
        await new Promise((r) => setImmediate(r));
      }
    })();

    const s0 = flatStats(V);
    await sleep(50);
    mon.baseline();
    const t0 = performance.now();
    let lastLog = t0;
    let lastLogInputs = 0;
    let next = 0;
    let sessions = 0;
    let refusedSessions = 0;
    let acceptedSessions = 0;
    let failedAt = -1;

    const session = async (base: number, room: number): Promise<SessionOutcome> => {
      const g0 = new Gen(inputRand(seed, base));
      const req = mpaRequest(g0, 0);
      const sock = net.connect(vPort, '127.0.0.1');
      open.add(sock);
      let rx = Buffer.alloc(0);
      let closed = false;
      let weEnded = false;
      let wake: () => void = () => {};
      sock.on('data', (d: Buffer) => {
        rx = rx.length < 1 << 16 ? Buffer.concat([rx, d]) : rx;
        wake();
      });
      sock.on('error', () => {});
      sock.on('connect', () => wake());
      sock.on('close', () => {
        closed = true;
        open.delete(sock);
        wake();
      });
      const until = (pred: () => boolean, ms: number): Promise<boolean> => new Promise((res) => {
        const t = setTimeout(() => {
          wake = () => {};
          res(pred());
        }, ms);
        const check = (): void => {
          if (pred()) {
            clearTimeout(t);
            wake = () => {};
            res(true);
          }
        };
        wake = check;
        check();
      });
      await until(() => closed || sock.readyState === 'open', 2000);
      if (closed) return { used: 0, closedByV: false, accepted: false };
      sock.write(req.bytes);
      count('conn', req.cls, req.bytes, base);
      let used = 1;
      const replied = (): boolean => rx.length >= 20 && rx.length >= 20 + rx.readUInt16BE(18);
      await until(() => closed || replied(), 2000);
      const ok = !closed && replied() && (rx[16]! & 0x20) === 0;
      if (!ok) {
        const byV = closed;
        sock.destroy();
        return { used, closedByV: byV, accepted: false };
      }
      const t: Targets = { ...targets!, msn: [1, 1, 1, 1] };
      const k = Math.min(room - 1, g0.range(1, 24));
      const parts: Uint8Array[] = [];
      for (let j = 1; j <= k; j++) {
        const f = hostileFpdu(new Gen(inputRand(seed, base + j)), t);
        parts.push(f.bytes);
        count('conn', f.cls, f.bytes, base + j);
      }
      used += k;
      const all = Buffer.concat(parts);
      // One write, or the stream cut in two or three at random bytes.
      const cuts = [0, ...[g0.int(all.length + 1), g0.int(all.length + 1)].slice(0, g0.int(3)).sort((a, b) => a - b), all.length];
      for (let c = 0; c + 1 < cuts.length; c++) {
        if (closed) break;
        sock.write(all.subarray(cuts[c], cuts[c + 1]));
        if (c + 2 < cuts.length) await new Promise((r) => setImmediate(r));
      }
      await until(() => closed, 60);
      const byV = closed;
      if (!closed) {
        weEnded = true;
        sock.destroy();
      }
      void weEnded;
      return { used, closedByV: byV, accepted: true };
    };

    const C = 6;
    const inflight = new Set<Promise<void>>();
    const total = (): number => byRole.conn! + byRole.path!;
    while (failedAt < 0 && total() < o.inputs) {
      while (roles.includes('conn') && inflight.size < C && total() + 25 * inflight.size < o.inputs) {
        const base = next;
        const room = 25;
        next += room;
        const p = session(base, room).then((r) => {
          sessions++;
          if (r.accepted) acceptedSessions++;
          if (r.closedByV) refusedSessions++;
          // Indices a session did not use stay unused (each session owns its block of 25).
          inflight.delete(p);
        });
        inflight.add(p);
      }
      mon.index = total();
      if (inflight.size) await Promise.race(inflight);
      else await sleep(10);
      if (mon.errors.length || transferError) failedAt = next;
      const done = total();
      if (done - lastLogInputs >= progressEvery) {
        const now = performance.now();
        mon.sampleHeap();
        const s = flatStats(V);
        log(`tcp seed ${seed}: ${done}/${o.inputs} inputs (${byRole.path} on the path), ${Math.round(((done - lastLogInputs) * 1000) / (now - lastLog))}/s; sessions ${sessions}; rounds ${transfer.rounds}; victims ${victims}; heap ${(mon.heapMax / 1048576).toFixed(1)} MiB max; stall ${mon.maxStallMs.toFixed(1)} ms; links ${s.links} conns ${s.endpointConnections}`);
        lastLog = now;
        lastLogInputs = done;
      }
    }
    await Promise.all(inflight);
    const seconds = (performance.now() - t0) / 1000;
    stop = true;
    await Promise.all([transferLoop, vLoop, ...loops]);
    await sleep(200);
    if (!transferError) {
      try {
        await transfer.round();
      } catch (e) {
        transferError = e;
      }
    }
    // A refusal is counted on the connection's 'close', which under load can land after the
    // attacker saw its socket end: give the counters up to 2 s to catch up (the check stays
    // strict — a refusal never counted still fails it).
    for (const until = performance.now() + 2000; performance.now() < until; ) {
      if (sumOf(flatStats(V), REFUSAL_KEYS) - sumOf(s0, REFUSAL_KEYS) >= refusedSessions) break;
      await sleep(20);
    }
    const heapEnd = mon.sampleHeap();
    const s1 = flatStats(V);
    const refusalsDelta = sumOf(s1, REFUSAL_KEYS) - sumOf(s0, REFUSAL_KEYS);
    const inputs = byRole.conn! + byRole.path!;
    if (mon.errors.length) failures.push(`uncaught: ${mon.errors[0]!.split('\n').slice(0, 8).join(' | ')}`);
    if (transferError) failures.push(`transfer: ${(transferError as Error).message}`);
    if (qpV.state !== QpState.Rts) failures.push(`the real QP is in state ${qpV.state}, not RTS`);
    if (mon.stalls > 0) failures.push(`${mon.stalls} event-loop stalls over ${STALL_MS} ms of own CPU (max ${mon.maxStallMs.toFixed(1)} ms near input ${mon.worstStall.index}, ${mon.worstStall.atMs} ms into the run, GC in that interval ${mon.worstStall.gcMs} ms; longest GC ${mon.maxGcMs.toFixed(1)} ms)`);
    const bound = o.heapBoundBytes ?? DEFAULT_HEAP_BOUND;
    if (heapEnd - mon.heapBase > bound) failures.push(`heap grew ${((heapEnd - mon.heapBase) / 1048576).toFixed(1)} MiB after GC, bound ${(bound / 1048576).toFixed(0)} MiB`);
    if (refusalsDelta < refusedSessions) failures.push(`refusal counters moved ${refusalsDelta}, fewer than the ${refusedSessions} sessions V refused or terminated`);
    const tables = { links: s1.links ?? 0, endpointConnections: s1.endpointConnections ?? 0, acceptedQps: accepted.size };
    let savedTo: string | undefined;
    if (failures.length) {
      savedTo = ring.save(o.failDir ?? 'fuzz-failures', 'tcp', seed, failedAt >= 0 ? failedAt : next - 1, failures.join('; '));
      log(`FAILED: tcp seed ${seed} at input ${failedAt >= 0 ? failedAt : next - 1}; last ${ring.size} inputs saved to ${savedTo}`);
    }
    result = {
      transport: 'tcp', seed, inputs, seconds, rate: inputs / seconds, byRole, byClass: top(byClass),
      rounds: transfer.rounds, transferBytes: transfer.bytes, qpState: String(qpV.state), refusedSent: refusedSessions, refusalsDelta, lostInKernel: 0,
      counters: delta(s1, s0, [...REFUSAL_KEYS, 'segmentsIn', 'connections', 'controlIn', 'timeouts', 'rnrNaksSent']),
      tables, maxStallMs: mon.maxStallMs, maxLateMs: mon.maxLateMs, loopDelay: mon.loopDelay(), heapBase: mon.heapBase, heapMax: mon.heapMax, heapEnd,
      failures, ...(savedTo ? { savedTo } : {}),
      extra: { worstStallIndex: mon.worstStall.index, worstStallGcMs: mon.worstStall.gcMs, maxGcMs: Math.round(mon.maxGcMs), sessions, acceptedSessions, refusedSessions, victims, acceptedQps: acceptedTotal, pathInputs, proxyConnections: proxy.connections },
    };
  } finally {
    stop = true;
    mon.stop();
    for (const s of open) s.destroy();
    for (const l of listeners) l.close();
    await proxy?.close();
    await P.close();
    await V.close();
  }
  return result!;
}
