// The perf server's control channel in process (serveControl, control-server.ts), against peers
// that misbehave on purpose: one that writes calls and never reads its answers (answers used to
// pile up in the server without bound, every call served at once), handlers that must not
// overlap, a connection that never says hello, and more waiting connections than the cap.
import { connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { closeNet } from '../net-fixture.js';
import { Refusals, serveControl } from '../../src/cli/perf/control-server.js';

let server: Server | undefined;
const socks: Socket[] = [];
afterEach(async () => {
  await closeNet(socks, server);
  server = undefined;
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function start(handler: (m: string, p: unknown) => Promise<unknown>, limits = {}): Promise<number> {
  server = await serveControl('127.0.0.1', 0, (m, p) => handler(m, p), () => {}, limits);
  return (server.address() as AddressInfo).port;
}

async function dial(port: number): Promise<{ sock: Socket; got: () => string; closed: () => boolean }> {
  const sock = connect({ port, host: '127.0.0.1' });
  socks.push(sock);
  sock.on('error', () => {});
  let got = '';
  let closed = false;
  sock.on('data', (d) => (got += d));
  sock.on('close', () => (closed = true));
  await new Promise<void>((r) => sock.once('connect', () => r()));
  return { sock, got: () => got, closed: () => closed };
}

const call = (id: number, method: string) => JSON.stringify({ id, method }) + '\n';

describe('serveControl', () => {
  it('a peer that never reads its answers: the server stops reading its calls (bounded handler calls)', async () => {
    let served = 0;
    const answer = 'a'.repeat(64 * 1024);
    const port = await start(async (m) => {
      if (m !== 'hello') served++;
      return m === 'hello' ? 'ok' : answer;
    });
    const c = await dial(port);
    c.sock.write(call(1, 'hello'));
    await sleep(200);
    c.sock.pause(); // never read another answer
    let lines = '';
    for (let i = 0; i < 5000; i++) lines += call(i + 2, 'x');
    c.sock.write(lines); // ~150 KiB of calls: all in the server's socket buffer at once
    await sleep(3000);
    // 5000 answers of 64 KiB would be 312 MiB held in the server; the kernel's buffers take a few MiB.
    expect(served).toBeGreaterThan(0);
    expect(served).toBeLessThan(1000);
  }, 20_000);

  it('lines are served one at a time, in order: a handler is never entered while another runs', async () => {
    let inFlight = 0;
    let most = 0;
    const order: number[] = [];
    const port = await start(async (m, p) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await sleep(5);
      if (m === 'n') order.push(p as number);
      inFlight--;
      return null;
    });
    const c = await dial(port);
    let lines = JSON.stringify({ id: 1, method: 'hello' }) + '\n';
    for (let i = 0; i < 50; i++) lines += JSON.stringify({ id: i + 2, method: 'n', params: i }) + '\n';
    c.sock.write(lines);
    const until = Date.now() + 10_000;
    while (Date.now() < until && order.length < 50) await sleep(20);
    expect(most).toBe(1);
    expect(order).toEqual(Array.from({ length: 50 }, (_, i) => i));
  }, 20_000);

  it('no hello within the deadline: the connection is closed and counted', async () => {
    const refusals = new Refusals();
    const port = await start(async () => null, { helloMs: 300, refusals });
    const c = await dial(port);
    const until = Date.now() + 5000;
    while (Date.now() < until && !c.closed()) await sleep(20);
    expect(c.closed()).toBe(true);
    expect(refusals.counts['hello-timeout']).toBe(1);
  });

  it('connections past the waiting cap are closed at once and counted', async () => {
    const refusals = new Refusals();
    const port = await start(async () => null, { maxWaiting: 3, refusals });
    const cs = [];
    for (let i = 0; i < 5; i++) cs.push(await dial(port));
    await sleep(300);
    expect(cs.map((c) => c.closed())).toEqual([false, false, false, true, true]);
    expect(refusals.counts.connection).toBe(2);
  });

  it('a hello that fails leaves the server free: the next connection\'s hello takes it, and the others are closed', async () => {
    let first = true;
    const port = await start(async (m) => {
      if (m === 'hello' && first) {
        first = false;
        throw new Error('bad hello');
      }
      return 'ok';
    });
    const a = await dial(port);
    const b = await dial(port);
    const w = await dial(port);
    a.sock.write(call(1, 'hello'));
    await sleep(200);
    b.sock.write(call(1, 'hello'));
    const until = Date.now() + 5000;
    while (Date.now() < until && !(a.closed() && w.closed())) await sleep(20);
    expect(a.got()).toContain('"error":"bad hello"');
    expect(b.got()).toContain('"result":"ok"');
    expect(a.closed()).toBe(true);
    expect(w.closed()).toBe(true);
    expect(b.closed()).toBe(false);
  });
});
