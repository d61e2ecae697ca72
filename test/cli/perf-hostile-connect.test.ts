// What the perf server does with the SideInfo a client sends in `connect` (found by an audit;
// seen failing first): its QPs dialled the address as given, any host:port, so the server could
// be pointed at a third party (tcp: MPA connections and bytes; udp: datagrams until the link's
// retries ran out). Now the device address must be of the server's transport, on the host the
// control connection came from, with one QP per negotiated QP and the buffer's numbers.
import { createSocket } from 'node:dgram';
import { createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type Bg, exitWithin, helloed, kill, sleep, startPerfServer } from './perf-hostile-helpers.js';

let bg: Bg | undefined;
afterEach(async () => {
  if (bg) await kill(bg);
  bg = undefined;
});

const qpList = (n: number) => Array.from({ length: n }, (_, i) => ({ qpn: i + 1, psn: 1 }));
const side = (address: unknown, qps = 1) => ({ address, qps: qpList(qps), rkey: 1, vaddr: 0, length: 64, slotBytes: 64, slots: 1 });

describe('perf server: connect names only the control peer', () => {
  it('tcp: an address on another host (the control peer is 127.0.0.2) is refused; nothing dials it', async () => {
    let conns = 0;
    const socks: Socket[] = [];
    const victim = createServer((s) => {
      conns++;
      socks.push(s);
      s.on('error', () => {});
    });
    await new Promise<void>((r) => victim.listen(0, '127.0.0.1', r));
    const vport = (victim.address() as AddressInfo).port;
    try {
      const s = await startPerfServer('write_bw', 'tcp');
      bg = s.bg;
      const c = await helloed(s.port, { qps: 4 }, '127.0.0.2');
      c.call(2, 'connect', side({ transport: 'tcp', host: '127.0.0.1', port: vport }, 4));
      const a = await c.answer(2, 15_000);
      await sleep(300);
      expect(a?.error).toMatch(/connect: the client's device address "127.0.0.1" is not the host of its control connection \(127.0.0.2\)/);
      expect(conns).toBe(0);
    } finally {
      for (const x of socks) x.destroy();
      victim.close();
    }
  }, 40_000);

  it('udp: a silent third party on another host gets no datagram', async () => {
    let n = 0;
    const victim = createSocket('udp4');
    victim.on('message', () => n++);
    await new Promise<void>((r) => victim.bind(0, '127.0.0.1', r));
    try {
      const s = await startPerfServer('write_bw', 'udp');
      bg = s.bg;
      const c = await helloed(s.port, { transport: 'udp', qps: 8 }, '127.0.0.2');
      c.call(2, 'connect', side({ transport: 'udp', host: '127.0.0.1', port: victim.address().port }, 8));
      const a = await c.answer(2, 15_000);
      await sleep(500);
      expect(a?.error).toMatch(/is not the host of its control connection/);
      expect(n).toBe(0);
    } finally {
      victim.close();
    }
  }, 40_000);

  it('malformed sides are one clear error each, never a crash; the server takes a good connect after them', async () => {
    const s = await startPerfServer('write_bw', 'udp');
    bg = s.bg;
    const c = await helloed(s.port, { transport: 'udp', qps: 2 });
    const cases: unknown[] = [
      side({ transport: 'udp', host: '127.0.0.1', port: 70000 }, 2),
      side({ transport: 'udp', host: '127.0.0.1', port: -1 }, 2),
      side({ transport: 'udp', host: 'no-such-host.invalid', port: 9 }, 2),
      side({ transport: 'udp', host: 12, port: 'x' }, 2),
      side({ transport: 'udp', host: '255.255.255.255', port: 9 }, 2),
      side({ transport: 'tcp', host: '127.0.0.1', port: 9 }, 2),
      side({ transport: 'udp', host: '127.0.0.1', port: 9, ports: [9, 'x'] }, 2),
      side({ transport: 'udp', host: '127.0.0.1', port: 9 }, 1),
      side({ transport: 'udp', host: '127.0.0.1', port: 9 }, 64),
      { ...side({ transport: 'udp', host: '127.0.0.1', port: 9 }, 2), slots: -1 },
      { ...side({ transport: 'udp', host: '127.0.0.1', port: 9 }, 2), slots: 0 },
      side(null, 2),
      null,
      'x',
    ];
    let id = 10;
    for (const p of cases) {
      c.call(++id, 'connect', p);
      const a = await c.answer(id, 5000);
      expect(a?.error, JSON.stringify(p)).toMatch(/^connect: /);
    }
    expect(await exitWithin(s.bg, 200)).toBe('alive');
    expect(s.bg.err()).toBe('');
  }, 40_000);
});
