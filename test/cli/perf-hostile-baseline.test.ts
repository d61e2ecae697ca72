// The perf server's --baseline sockets against hostile peers (found by an audit; each case seen
// failing first). baselineOpen was taken as it came: respBytes -1 made Buffer.alloc throw out
// of a socket callback (the server died), reqBytes 0 spun `while (pending >= reqBytes)` for good,
// and the udp rr responder answered any source with respBytes: a 32-byte datagram from a third
// party got 8 MiB back (a reflector). Now baselineOpen needs a hello and the shape of one of the
// run's sizes, and the baseline sockets bind where the control connection arrived and serve only
// its peer's host (udp rr: only the address:port of the first request). The peer's traffic here
// carries the session's token (perf-baseline-token.test.ts: without it nothing is served); the
// third party is given it too, so these cases show the host and address checks on their own.
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type Bg, exitWithin, helloed, kill, rawControl, sleep, startPerfServer } from './perf-hostile-helpers.js';

let bg: Bg | undefined;
afterEach(async () => {
  if (bg) await kill(bg);
  bg = undefined;
});

// The control peer is 127.0.0.2 (this host too); the "third party" sends from 127.0.0.1.
const PEER = '127.0.0.2';
const read8M = { test: 'read_lat', verb: 'read', kind: 'lat', sizes: [1 << 23] };

async function udpSocket(host: string) {
  const s = createSocket({ type: 'udp4', recvBufferSize: 16 << 20 });
  s.on('error', () => {});
  let got = 0;
  s.on('message', (m) => (got += m.length));
  await new Promise<void>((r) => s.bind(0, host, r));
  return { s, got: () => got };
}

/** A read_lat request: [iteration][the session's token][28 bytes]. */
function request(iter: number, token: Buffer): Buffer {
  const d = Buffer.alloc(4 + token.length + 28);
  d.writeUInt32BE(iter, 0);
  token.copy(d, 4);
  return d;
}

const opened = (a: { result?: unknown } | undefined) => {
  const r = a!.result as { port: number; token: string };
  return { port: r.port, token: Buffer.from(r.token, 'hex') };
};

describe('perf server: baselineOpen is checked', () => {
  it('shapes no client sends are refused with one clear error; the server lives', async () => {
    const s = await startPerfServer('read_lat', 'tcp');
    bg = s.bg;
    const c = await helloed(s.port, { ...read8M, transport: 'tcp', sizes: [4096] });
    const cases: unknown[] = [
      { transport: 'tcp', mode: 'rr', reqBytes: 28, respBytes: -1 },
      { transport: 'tcp', mode: 'rr', reqBytes: 0, respBytes: 4096 },
      { transport: 'tcp', mode: 'rr', reqBytes: 28, respBytes: 1 << 23 },
      { transport: 'tcp', mode: 'rr', reqBytes: 28.5, respBytes: 4096 },
      { transport: 'tcp', mode: 'bw', reqBytes: 0, respBytes: 0 },
      { transport: 'udp', mode: 'rr', reqBytes: 28, respBytes: 4096 },
      null,
      'x',
    ];
    let id = 10;
    for (const p of cases) {
      c.call(++id, 'baselineOpen', p);
      const a = await c.answer(id, 5000);
      expect(a?.error, JSON.stringify(p)).toMatch(/^baselineOpen: /);
    }
    c.call(++id, 'baselineOpen', { transport: 'tcp', mode: 'rr', reqBytes: 28, respBytes: 4096 });
    expect((await c.answer(id))?.result).toMatchObject({ port: expect.any(Number) });
    expect(await exitWithin(s.bg, 200)).toBe('alive');
    expect(s.bg.err()).toBe('');
  }, 30_000);

  it('baselineOpen before hello is refused (it used to be served to whoever connected)', async () => {
    const s = await startPerfServer('write_bw', 'tcp');
    bg = s.bg;
    const c = await rawControl(s.port);
    c.call(1, 'baselineOpen', { transport: 'tcp', mode: 'rr', reqBytes: 0, respBytes: 1 });
    const a = await c.answer(1, 5000);
    expect(a?.result).toBeUndefined();
    expect(await exitWithin(s.bg, 500)).toBe('alive');
  }, 30_000);
});

describe('perf server: baseline sockets serve only the control peer', () => {
  it('udp rr: a third party\'s requests get nothing back; the peer\'s first address:port is the only one answered', async () => {
    const s = await startPerfServer('read_lat', 'udp');
    bg = s.bg;
    const c = await helloed(s.port, { ...read8M, transport: 'udp' }, PEER);
    c.call(2, 'baselineOpen', { transport: 'udp', mode: 'rr', reqBytes: 28, respBytes: 1 << 23 });
    const { port, token } = opened(await c.answer(2));
    const third = await udpSocket('127.0.0.1');
    for (let i = 0; i < 3; i++) {
      third.s.send(request(100 + i, token), port, '127.0.0.1');
      await sleep(200);
    }
    const peer = await udpSocket(PEER);
    peer.s.send(request(1, token), port, '127.0.0.1');
    // The peer's own request is answered (8 MiB; loopback may drop some of it under load).
    const until = Date.now() + 5000;
    while (Date.now() < until && peer.got() === 0) await sleep(50);
    // Another port on the peer's host, after the first request: not answered.
    const other = await udpSocket(PEER);
    other.s.send(request(2, token), port, '127.0.0.1');
    await sleep(800);
    c.call(3, 'baselineResult');
    const counts = (await c.answer(3))!.result as { bytesIn: number; bytesOut: number; datagrams: number };
    expect(third.got()).toBe(0);
    expect(other.got()).toBe(0);
    expect(peer.got()).toBeGreaterThan(0);
    expect(counts.bytesOut).toBe(1 << 23);
    expect(counts.datagrams).toBe(1);
    for (const x of [third, peer, other]) x.s.close();
  }, 30_000);

  it('udp bw: the sink acks and counts only the peer\'s host', async () => {
    const s = await startPerfServer('write_bw', 'udp');
    bg = s.bg;
    const c = await helloed(s.port, { transport: 'udp' }, PEER);
    c.call(2, 'baselineOpen', { transport: 'udp', mode: 'bw', reqBytes: 0, respBytes: 0 });
    const { port, token } = opened(await c.answer(2));
    const third = await udpSocket('127.0.0.1');
    const peer = await udpSocket(PEER);
    const d = Buffer.alloc(4 + token.length + 100);
    d.writeUInt32BE(0x80000000, 0); // ack now
    token.copy(d, 4);
    for (let i = 0; i < 3; i++) third.s.send(d, port, '127.0.0.1');
    peer.s.send(d, port, '127.0.0.1');
    await sleep(800);
    c.call(3, 'baselineResult');
    const counts = (await c.answer(3))!.result as { datagrams: number };
    expect(third.got()).toBe(0);
    expect(peer.got()).toBe(8);
    expect(counts.datagrams).toBe(1);
    third.s.close();
    peer.s.close();
  }, 30_000);

  it('tcp: a connection from another host is closed unanswered; the peer\'s is answered', async () => {
    const s = await startPerfServer('read_lat', 'tcp');
    bg = s.bg;
    const c = await helloed(s.port, { ...read8M, transport: 'tcp', sizes: [4096] }, PEER);
    c.call(2, 'baselineOpen', { transport: 'tcp', mode: 'rr', reqBytes: 28, respBytes: 4096 });
    const { port, token } = opened(await c.answer(2));
    const dial = async (from: string) => {
      const d = connect({ port, host: '127.0.0.1', localAddress: from });
      d.on('error', () => {});
      let got = 0;
      d.on('data', (b) => (got += b.length));
      await new Promise<void>((r) => d.once('connect', () => r()).once('close', () => r()));
      d.write(Buffer.concat([token, Buffer.alloc(28 * 4)]));
      await sleep(800);
      const closed = d.destroyed || d.readyState !== 'open';
      d.destroy();
      return { got, closed };
    };
    const third = await dial('127.0.0.1');
    expect(third.got).toBe(0);
    expect(third.closed).toBe(true);
    const peer = await dial(PEER);
    expect(peer.got).toBe(4 * 4096);
    expect(await exitWithin(s.bg, 100)).toBe('alive');
  }, 30_000);
});
