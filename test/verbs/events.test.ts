// Async events (dev.on('event') / dev.events()) and AbortSignal on every wait. A peer killed
// with SIGKILL (a child process) must show up as an event within the documented time:
//   tcp: at once (the kernel resets the connection): 'qp-fatal' and 'disconnected', cause 'lost'.
//   udp: with work outstanding, within the QP's timeoutMs (here 1 s; default 8 s); idle (no
//   work posted), by the keepalive: within keepaliveMs × 2.5 (default 3000: 7.5 s; the test sets 1000: 2.5 s).
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import { getEventListeners } from 'node:events';
import { createServer, Server, type AddressInfo, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import {
  Access, connect, ErrorCode, listen, Opcode, openDevice, QpState, WcStatus,
  type Device, type DeviceEvent,
} from '../../src/index.js';

const devs: Device[] = [];
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const d of devs.splice(0)) await d.close();
});

async function dev(transport: 'udp' | 'tcp' | 'inproc', keepaliveMs?: number): Promise<Device> {
  const d = await openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0, ...(keepaliveMs === undefined ? {} : { keepaliveMs }) });
  devs.push(d);
  return d;
}

function rc(d: Device, extra: { timeoutMs?: number; depth?: number } = {}) {
  const pd = d.allocPd();
  const cq = d.createCq({ depth: extra.depth ?? 64 });
  const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1, ...(extra.timeoutMs ? { timeoutMs: extra.timeoutMs } : {}) });
  return { pd, cq, qp };
}

/** Collect events of `d` until `pred` holds for the list, or `ms` pass. */
function eventsUntil(d: Device, pred: (evs: DeviceEvent[]) => boolean, ms: number): Promise<DeviceEvent[]> {
  const evs: DeviceEvent[] = [];
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      d.off('event', on);
      reject(new Error(`events so far: ${JSON.stringify(evs.map((e) => e.type))}`));
    }, ms);
    const on = (ev: DeviceEvent): void => {
      evs.push(ev);
      if (pred(evs)) {
        clearTimeout(t);
        d.off('event', on);
        resolve(evs);
      }
    };
    d.on('event', on);
  });
}

describe.each(['tcp', 'udp'] as const)('a peer killed with SIGKILL over %s', (transport) => {
  it('raises qp-fatal and disconnected within the documented time', async () => {
    const a = await dev(transport);
    const { pd, cq, qp } = rc(a, { timeoutMs: 1000 });
    const child = spawn(process.execPath, ['test/verbs/kill-peer.mjs', transport], { stdio: ['pipe', 'pipe', 'inherit'] });
    children.push(child);
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    const peer = JSON.parse((await lines.next()).value as string) as { address: { transport: string }; qpn: number; addr: number; rkey: number };
    const perQp: string[] = [];
    qp.on('event', (ev: DeviceEvent) => perQp.push(ev.type));
    const established = eventsUntil(a, (evs) => evs.some((e) => e.type === 'established'), 10_000);
    child.stdin!.write(`${JSON.stringify({ address: a.address, qpn: qp.qpn })}\n`);
    await qp.connect({ address: peer.address, qpn: peer.qpn });
    expect((await lines.next()).value).toBe('ready');
    expect(await established).toEqual([{ type: 'established', qpn: qp.qpn }]);

    const t0 = performance.now();
    const fatal = eventsUntil(a, (evs) => evs.some((e) => e.type === 'qp-fatal') && evs.some((e) => e.type === 'disconnected'), 5000);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    // udp learns of a dead peer only from work left unanswered (as RC does): post a write.
    const src = pd.regMr(64, Access.LocalWrite);
    if (transport === 'udp') qp.postSend({ wrId: 1, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 64, lkey: src.lkey }], remoteAddr: peer.addr, rkey: peer.rkey });
    const evs = await fatal;
    const ms = performance.now() - t0;
    expect(evs.find((e) => e.type === 'qp-fatal')).toMatchObject({ qpn: qp.qpn });
    expect(evs.find((e) => e.type === 'disconnected')).toMatchObject({ qpn: qp.qpn });
    // Cause 'lost' both ways: tcp from the connection's end, udp from the QP's own timeoutMs
    // (its watchdog: nothing heard from the peer's engine) — before, udp's events had no cause.
    expect(evs.find((e) => e.type === 'qp-fatal')).toMatchObject({ cause: 'lost' });
    expect(evs.find((e) => e.type === 'disconnected')).toMatchObject({ cause: 'lost' });
    expect(qp.state).toBe(QpState.Error);
    expect(ms).toBeLessThan(transport === 'tcp' ? 1000 : 3000);
    // The same events, on the QP they name.
    expect(perQp).toEqual(expect.arrayContaining(['established', 'qp-fatal', 'disconnected']));
    if (transport === 'udp') expect(cq.poll(4)).toMatchObject([{ wrId: 1, status: WcStatus.RetryExcErr }]);
  }, 20_000);

  it('an idle peer (no work posted) killed: qp-fatal and disconnected, cause lost, within keepaliveMs × 2.5 (1000 here: 2.5 s)', async () => {
    const a = await dev(transport, transport === 'udp' ? 1000 : undefined); // udp: keepaliveMs 1000 (default 3000) keeps the test short
    const { cq, qp } = rc(a);
    const child = spawn(process.execPath, ['test/verbs/kill-peer.mjs', transport], { stdio: ['pipe', 'pipe', 'inherit'] });
    children.push(child);
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    const peer = JSON.parse((await lines.next()).value as string) as { address: { transport: string }; qpn: number };
    child.stdin!.write(`${JSON.stringify({ address: a.address, qpn: qp.qpn })}\n`);
    await qp.connect({ address: peer.address, qpn: peer.qpn });
    expect((await lines.next()).value).toBe('ready');
    // Idle but alive: past several keepalive intervals nothing fires (the probes are answered).
    const early: DeviceEvent[] = [];
    const onEarly = (ev: DeviceEvent): void => void early.push(ev);
    a.on('event', onEarly);
    await new Promise((r) => setTimeout(r, transport === 'udp' ? 2500 : 100));
    a.off('event', onEarly);
    expect(early).toEqual([]);
    if (transport === 'udp') expect((a.stats().link as Record<string, number>).keepalives).toBeGreaterThan(0);

    const fatal = eventsUntil(a, (evs) => evs.some((e) => e.type === 'qp-fatal') && evs.some((e) => e.type === 'disconnected'), 5000);
    const t0 = performance.now();
    child.kill('SIGKILL');
    const evs = await fatal;
    const ms = performance.now() - t0;
    expect(evs.find((e) => e.type === 'qp-fatal')).toMatchObject({ qpn: qp.qpn, cause: 'lost' });
    expect(evs.find((e) => e.type === 'disconnected')).toMatchObject({ qpn: qp.qpn, cause: 'lost' });
    expect(qp.state).toBe(QpState.Error);
    // Documented: tcp at once; udp within keepaliveMs × 2.5 = 2.5 s (3 s with timer slack).
    expect(ms).toBeLessThan(transport === 'tcp' ? 1000 : 3000);
    // Three probes 500 ms apart went unanswered first (the kill may fall anywhere in the idle second).
    if (transport === 'udp') expect(ms).toBeGreaterThan(1000);
    expect(cq.poll(4)).toEqual([]);
  }, 20_000);
});

describe('openDevice({ keepaliveMs })', () => {
  it('takes an integer in 0..3600000 (0: off), refuses anything else with ERR_INVALID_ARGUMENT before binding', async () => {
    for (const keepaliveMs of [-1, 1.5, 3_600_001, Number.NaN, '1000' as unknown as number]) {
      await expect(openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, keepaliveMs }), String(keepaliveMs)).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
    }
    for (const keepaliveMs of [0, 250]) devs.push(await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0, keepaliveMs }));
  });
});

describe('events', () => {
  it('cq-error on a CQ overrun; dev.events() iterates and ends when the device closes', async () => {
    const a = await dev('inproc');
    const b = await dev('inproc');
    const x = rc(a, { depth: 1 });
    const y = rc(b);
    await Promise.all([x.qp.connect({ address: b.address, qpn: y.qp.qpn }), y.qp.connect({ address: a.address, qpn: x.qp.qpn })]);
    const it = a.events();
    const src = x.pd.regMr(64, Access.LocalWrite);
    const dst = y.pd.regMr(64, Access.LocalWrite | Access.RemoteWrite);
    for (let i = 0; i < 3; i++) x.qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    const seen: string[] = [];
    const reader = (async () => {
      for await (const ev of it) seen.push(ev.type);
    })();
    for (let i = 0; i < 50 && !seen.includes('cq-error'); i++) await new Promise((r) => setTimeout(r, 10));
    expect(seen).toContain('cq-error');
    expect(seen).toContain('qp-fatal');
    await a.close();
    await reader; // the iteration ended with the device
  });

  it('dev.events({ signal }): aborting rejects the pending next() with ERR_ABORTED', async () => {
    const a = await dev('inproc');
    const ac = new AbortController();
    const it = a.events({ signal: ac.signal });
    const next = it.next();
    ac.abort(new Error('stop'));
    await expect(next).rejects.toMatchObject({ code: ErrorCode.Aborted });
    expect(a.listenerCount('event')).toBe(0);
  });
});

describe.each(['udp', 'tcp', 'inproc'] as const)('AbortSignal over %s', (transport) => {
  it('aborts qp.connect: ERR_ABORTED at once, the QP in ERROR (resettable)', async () => {
    const a = await dev(transport);
    const b = await dev(transport);
    const { qp } = rc(a);
    const { qp: other } = rc(b); // never connects back
    const ac = new AbortController();
    const p = qp.connect({ address: b.address, qpn: other.qpn, signal: ac.signal });
    const t0 = performance.now();
    ac.abort();
    await expect(p).rejects.toMatchObject({ code: ErrorCode.Aborted });
    expect(performance.now() - t0).toBeLessThan(200);
    expect(qp.state).toBe(QpState.Error);
    qp.modify({ state: QpState.Reset });
    expect(qp.state).toBe(QpState.Reset);
  });

  it('aborts listener.accept: ERR_ABORTED, and the next connection goes to the next accept', async () => {
    const s = await dev(transport);
    const c = await dev(transport);
    const l = listen(s, { service: 5 });
    const ac = new AbortController();
    const aborted = l.accept(undefined, { signal: ac.signal });
    ac.abort();
    await expect(aborted).rejects.toMatchObject({ code: ErrorCode.Aborted });
    const [qc, qs] = await Promise.all([connect(c, s.address, { service: 5 }), l.accept(5000)]);
    expect(qc.state).toBe(QpState.Rts);
    expect(qs.state).toBe(QpState.Rts);
    l.close();
  });

  it('aborts cm connect: ERR_ABORTED at once, its QP destroyed', async () => {
    const a = await dev(transport);
    const b = await dev(transport);
    const ac = new AbortController();
    ac.abort(); // already aborted: never starts
    await expect(connect(a, b.address, { service: 9, signal: ac.signal })).rejects.toMatchObject({ code: ErrorCode.Aborted });
    // Aborted while under way: the abort comes in the same turn as the call, before any answer
    // from b (which has no listener and would refuse): ERR_ABORTED, nothing else, at once.
    const ac2 = new AbortController();
    const t0 = performance.now();
    const p = connect(a, b.address, { service: 9, signal: ac2.signal, timeoutMs: 10_000 });
    ac2.abort();
    await expect(p).rejects.toMatchObject({ code: ErrorCode.Aborted });
    expect(performance.now() - t0).toBeLessThan(500);
    if (transport !== 'inproc') {
      // Aborted mid-wait: a peer that takes the packets or the connection and never answers
      // (udp: a plain socket; tcp: a server that accepts and never speaks MPA). Without the
      // abort this would wait the full 10 s.
      const silent = transport === 'udp' ? dgram.createSocket('udp4') : createServer(() => {});
      const held: Socket[] = [];
      if (silent instanceof Server) silent.on('connection', (c) => held.push(c));
      await new Promise<void>((r) => (silent instanceof Server ? silent.listen(0, '127.0.0.1', r) : silent.bind(0, '127.0.0.1', r)));
      try {
        const port = (silent.address() as AddressInfo).port;
        const ac3 = new AbortController();
        const p3 = connect(a, { transport, host: '127.0.0.1', port } as never, { service: 9, signal: ac3.signal, timeoutMs: 10_000 });
        await new Promise((r) => setTimeout(r, 150));
        const t1 = performance.now();
        ac3.abort();
        await expect(p3).rejects.toMatchObject({ code: ErrorCode.Aborted });
        expect(performance.now() - t1).toBeLessThan(200);
      } finally {
        for (const c of held) c.destroy();
        await new Promise<void>((r) => (silent instanceof Server ? silent.close(() => r()) : silent.close(r)));
      }
    }
    // The wait's resources are released: no listener left on the signal.
    expect(getEventListeners(ac2.signal, 'abort')).toHaveLength(0);
  });

  it('aborts cq.wait: ERR_ABORTED; the CQ still wakes a later wait', async () => {
    const a = await dev(transport);
    const b = await dev(transport);
    const x = rc(a);
    const y = rc(b);
    await Promise.all([x.qp.connect({ address: b.address, qpn: y.qp.qpn }), y.qp.connect({ address: a.address, qpn: x.qp.qpn })]);
    const ac = new AbortController();
    const w = x.cq.wait(60_000, { signal: ac.signal });
    ac.abort();
    await expect(w).rejects.toMatchObject({ code: ErrorCode.Aborted });
    const src = x.pd.regMr(64, Access.LocalWrite);
    const dst = y.pd.regMr(64, Access.LocalWrite | Access.RemoteWrite);
    x.qp.postSend({ wrId: 5, opcode: Opcode.RdmaWrite, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey });
    await x.cq.wait(5000);
    expect(x.cq.poll(1)).toMatchObject([{ wrId: 5, status: WcStatus.Success }]);
  });
});
