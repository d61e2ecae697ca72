// Link.detach at the socket shell (core/detach.ts): a datagram handed to node:dgram for a peer
// named by host name waits in node while the name resolves, holding views of the memory; the
// shell must say so (false: the memory waits), where it used to count only libuv's queue.
import dgram from 'node:dgram';
import { afterEach, expect, it } from 'vitest';
import { ownsViewsOf } from '../../../src/core/detach.js';
import { UdpSockets } from '../../../src/transport/udp/socket.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

it.each([['localhost'], ['127.0.0.1']] as const)('a view sent to %s, detached as node takes it and then overwritten: either detach waits or no marker byte leaves', async (host) => {
  const raw = dgram.createSocket('udp4');
  await new Promise<void>((r) => raw.bind(0, '127.0.0.1', () => r()));
  cleanup.push(() => void raw.close());
  const got: Buffer[] = [];
  raw.on('message', (m) => got.push(m));
  const mem = new Uint8Array(new SharedArrayBuffer(4096)).fill(0x11);
  let free: boolean | undefined;
  let a: UdpSockets | undefined;
  // At the end of the first flush: the datagram is in node's hands.
  a = await UdpSockets.open({ host: '127.0.0.1', port: 0, integrity: 'none' }, {
    onTimerChanged: () => {
      if (free !== undefined || a === undefined || a.endpoint.counters.txDatagrams === 0) return;
      free = a.detach(ownsViewsOf(mem));
      // A memory that may be reused is reused at once.
      if (free) mem.fill(0xee);
    },
  });
  cleanup.push(() => a!.close(0));
  a.send({ host, port: raw.address().port }, mem.subarray(0, 1024));
  for (let i = 0; i < 500 && got.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  expect(got.length, 'the datagram arrived').toBeGreaterThan(0);
  // A leak shows as the 1024 payload bytes; the header's random ids and a first contact's CRC
  // trailer may hold the marker's value a byte or two at a time.
  const leaked = got.reduce((n, m) => {
    const k = m.filter((x) => x === 0xee).length;
    return n + (k >= 16 ? k : 0);
  }, 0);
  expect(leaked, 'marker bytes on the wire').toBe(0);
  // An IP literal goes out synchronously: nothing to wait for.
  expect(free, 'what detach said while node held the datagram').toBe(host === '127.0.0.1');
  // Once node has sent it, the memory may go.
  expect(a.detach(ownsViewsOf(mem))).toBe(true);
});
