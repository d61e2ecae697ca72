// Real sockets on 127.0.0.1: two transports in this process, and one in a child process,
// moving generated payloads both ways with every byte compared. Traffic stays on loopback.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { UdpSockets } from '../../../src/transport/udp/socket.js';
import type { Failure } from '../../../src/transport/udp/endpoint.js';
import { makePayload, payloadIndex, sameBytes } from '../../sim/random.js';

const CHILD = fileURLToPath(new URL('./peer-child.mjs', import.meta.url));

// Same size rule as peer-child.mjs.
function sizeFor(i: number, max: number): number {
  return i % 5 === 4 ? 4 + ((i * 131) % 200) : max;
}

/** Exactly what a peer following that rule sends for `bytes` (its last payload overshoots). */
function scheduleTotal(bytes: number, max: number): number {
  let total = 0;
  for (let i = 0; total < bytes; i++) total += sizeFor(i, max);
  return total;
}

interface Side {
  t: UdpSockets;
  got: Map<number, number>;
  bytesOk: number;
  bad: number;
  acked: number;
  failed: Failure[];
  sent: number;
  sentBytes: number;
  wake: () => void;
}

async function side(opts: Parameters<typeof UdpSockets.open>[0]): Promise<Side> {
  const s = { got: new Map(), bytesOk: 0, bad: 0, acked: 0, failed: [], sent: 0, sentBytes: 0, wake: () => {} } as unknown as Side;
  s.t = await UdpSockets.open(opts, {
    onDelivery(d) {
      const idx = payloadIndex(d.payload);
      s.got.set(idx, (s.got.get(idx) ?? 0) + 1);
      if (sameBytes(d.payload, makePayload(idx, sizeFor(idx, s.t.endpoint.maxPayload)))) s.bytesOk += d.payload.length;
      else s.bad++;
      s.wake();
    },
    onAcked(ids) {
      s.acked += ids.length;
      s.wake();
    },
    onFailed(f) {
      s.failed.push(...f);
      s.wake();
    },
  });
  return s;
}

function pump(s: Side, to: { host: string; port: number }, total: number): void {
  const max = s.t.endpoint.maxPayload;
  while (s.sentBytes < total && s.sent - s.acked < 512) {
    const len = sizeFor(s.sent, max);
    s.t.send(to, makePayload(s.sent, len));
    s.sent++;
    s.sentBytes += len;
  }
}

function until(sides: Side[], cond: () => boolean, ms: number, onWake: () => void = () => {}): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('transfer did not finish in time')), ms);
    const wake = () => {
      onWake();
      if (cond()) {
        clearTimeout(timer);
        resolve();
      }
    };
    for (const s of sides) s.wake = wake;
    wake();
  });
}

function checkReceived(s: Side, n: number): void {
  expect(s.bad).toBe(0);
  expect(s.got.size).toBe(n);
  for (let i = 0; i < n; i++) expect(s.got.get(i)).toBe(1);
}

const open: UdpSockets[] = [];
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const t of open.splice(0)) await t.close();
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill();
});

describe('UDP transport over real sockets (127.0.0.1)', () => {
  for (const [name, mtu, sockets] of [['65000-byte datagrams', 65000, 1], ['1472-byte datagrams, 3 sockets striped', 1472, 3]] as const) {
    it(`same process, ${name}: 16 MB one way, 4 MB back, exact`, async () => {
      const a = await side({ mtu, sockets });
      const b = await side({ mtu, sockets });
      open.push(a.t, b.t);
      expect(a.t.address.transport).toBe('udp');
      expect(a.t.address.port).toBeGreaterThan(0);
      const AB = mtu === 65000 ? 16 << 20 : 8 << 20;
      const BA = 4 << 20;
      await until(
        [a, b],
        () => a.sentBytes >= AB && b.sentBytes >= BA && a.acked === a.sent && b.acked === b.sent,
        60_000,
        () => {
          pump(a, b.t.address, AB);
          pump(b, a.t.address, BA);
        },
      );
      expect(a.failed).toEqual([]);
      expect(b.failed).toEqual([]);
      checkReceived(b, a.sent);
      checkReceived(a, b.sent);
      expect(b.bytesOk).toBe(a.sentBytes);
      expect(a.bytesOk).toBe(b.sentBytes);
      expect(a.t.endpoint.counters.badCrc + b.t.endpoint.counters.badCrc).toBe(0);
      if (sockets > 1) {
        // Both directions found one context per peer although datagrams came from several ports.
        expect(a.t.endpoint.contexts).toBe(1);
        expect(b.t.endpoint.contexts).toBe(1);
      }
    });
  }

  it('two processes: 8 MB each way through a forked peer, exact on both sides', async () => {
    const a = await side({ mtu: 65000 });
    open.push(a.t);
    const BYTES = 8 << 20;
    const child = spawn(process.execPath, [CHILD, JSON.stringify({ host: '127.0.0.1', sendBytes: BYTES, expectBytes: BYTES, maxMs: 60_000 })], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    children.push(child);
    const lines = createInterface({ input: child.stdout! });
    const msgs: Record<string, unknown>[] = [];
    let onMsg = () => {};
    lines.on('line', (l) => {
      msgs.push(JSON.parse(l));
      onMsg();
    });
    const childAddr = await new Promise<{ host: string; port: number }>((resolve) => {
      onMsg = () => {
        const r = msgs.find((m) => m.ready);
        if (r) resolve(r.ready as { host: string; port: number });
      };
    });
    child.stdin!.write(JSON.stringify({ peer: a.t.address }) + '\n');
    onMsg = () => a.wake();
    await until(
      [a],
      // All of the child's bytes, not just BYTES of them: a payload reordered behind the
      // overshoot would otherwise still be in flight.
      () => a.sentBytes >= BYTES && a.acked === a.sent && a.bytesOk >= scheduleTotal(BYTES, a.t.endpoint.maxPayload) && msgs.some((m) => m.done || m.timeout),
      60_000,
      () => pump(a, childAddr, BYTES),
    ).catch((e) => {
      throw new Error(`${String(e)}; child said ${JSON.stringify(msgs)}`);
    });
    const done = msgs.find((m) => m.done)!.done as Record<string, number>;
    expect(done.failed).toBe(0);
    expect(done.bad).toBe(0);
    expect(done.dupes).toBe(0);
    expect(done.bytesOk).toBe(a.sentBytes);
    expect(done.acked).toBe(done.sent);
    checkReceived(a, done.sent);
    expect(a.bytesOk).toBe(done.sentBytes);
    child.stdin!.write(JSON.stringify({ close: true }) + '\n');
    await new Promise((r) => child.once('exit', r));
    expect(child.exitCode).toBe(0);

  });

  it('a peer that vanished: retries, then every outstanding payload fails and the context is freed', async () => {
    const a = await side({ mtu: 1472, context: { initialRtoMs: 5, minRtoMs: 5, maxRtoMs: 20, retryLimit: 3, retryTimeoutMs: 0 } });
    open.push(a.t);
    // A bound-then-closed port: nothing listens there any more.
    const gone = await UdpSockets.open();
    const addr = gone.address;
    await gone.close();
    for (let i = 0; i < 20; i++) a.t.send(addr, makePayload(i, 100));
    await until([a], () => a.failed.length === 20, 10_000);
    expect(a.acked).toBe(0);
    expect(new Set(a.failed.map((f) => f.reason))).toEqual(new Set(['retry-exceeded']));
    expect(a.t.endpoint.contexts).toBe(0);
    expect(a.t.endpoint.counters.contextsFailed).toBe(1);
  });

  it('a peer addressed by name: bind and send still go through the resolver (IP literals skip it)', async () => {
    const a = await side({ host: 'localhost' });
    const b = await side({ host: '127.0.0.1' });
    try {
      const max = a.t.endpoint.maxPayload;
      let total = 0;
      for (let i = 0; i < 8; i++) {
        a.t.send({ host: 'localhost', port: b.t.address.port }, makePayload(i, sizeFor(i, max)));
        total += sizeFor(i, max);
      }
      const deadline = Date.now() + 10_000;
      while ((b.got.size < 8 || a.acked < 8) && Date.now() < deadline) await new Promise<void>((r) => (a.wake = b.wake = r, setTimeout(r, 50)));
      expect([...b.got.keys()].sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(b.bytesOk).toBe(total);
      expect(a.acked).toBe(8);
    } finally {
      await a.t.close();
      await b.t.close();
    }
  });

  it('close() fails outstanding work, releases the sockets and leaves no timer behind', async () => {
    const before = process.getActiveResourcesInfo().filter((r) => r === 'UDPWrap' || r === 'Timeout').length;
    const a = await side({});
    const b = await side({});
    a.t.send(b.t.address, makePayload(0, 1000));
    await a.t.close();
    await b.t.close();
    expect(a.failed.map((f) => f.reason)).toEqual(['closed']);
    // libuv finishes closing handles on a later loop turn: give it a bounded number of turns.
    let after = Infinity;
    for (let i = 0; i < 50 && after > before; i++) {
      await new Promise((r) => setTimeout(r, 1));
      after = process.getActiveResourcesInfo().filter((r) => r === 'UDPWrap' || r === 'Timeout').length;
    }
    expect(after, JSON.stringify(process.getActiveResourcesInfo())).toBeLessThanOrEqual(before);
    expect(() => a.t.send(b.t.address, makePayload(1, 10))).toThrow(/closed/);
  });
});
