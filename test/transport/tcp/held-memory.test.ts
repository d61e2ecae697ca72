// docs/resource-bounds.md, tcp: what one held connection costs the device — a peer that
// completed MPA through a listener, whose QP the application accepted, then went idle. The
// peers are two loopback hosts (127.0.0.1, 127.0.0.2) in a child process (so their sockets are
// not in the heap measured), each trying 16 more connections than the per-host cap (128): the
// device holds 256, refuses 32 (each refusal an MPA Reply with Reject naming the cap). Heap
// (JS heap + array buffers outside device memory, after GC)
// per held connection is measured and bounded; device memory per connection is the receive
// staging (512 KiB) and nothing else. Measured here: ≈ 16 KB of heap each (the connection,
// its socket, the accepted QP); 81 KB before the transmit slab (64 KiB) was made on first use.
import { spawn, type ChildProcess } from 'node:child_process';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { listen, openDevice, type QueuePair } from '../../../src/index.js';
import { MPA_REQUEST } from './raw-mpa.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

const PER_HOST = 128;
const EXTRA = 16;
/** The bound asserted (and documented): heap per held connection. */
const HEAP_PER_CONNECTION = 32 * 1024;

/** Peers in a child: `PER_HOST + EXTRA` connections from each host, each sends the MPA Request; prints how many got a Reply, how many a Reject, how many were closed unanswered. */
const PEERS = `
const net = require('node:net');
const port = Number(process.env.PORT), n = Number(process.env.N), req = Buffer.from(process.env.REQ, 'hex');
const socks = [];
let replied = 0, rejected = 0, closed = 0, done = 0;
const total = 2 * n;
const settle = () => { if (++done === total) process.stdout.write('replied ' + replied + ' rejected ' + rejected + ' closed ' + closed + '\\n'); };
for (const host of ['127.0.0.1', '127.0.0.2']) {
  for (let i = 0; i < n; i++) {
    const s = net.connect({ host: '127.0.0.1', port, localAddress: host });
    socks.push(s);
    let got = 0, settled = false, first = Buffer.alloc(0);
    const once = (f) => { if (!settled) { settled = true; f(); settle(); } };
    s.on('error', () => {});
    s.on('connect', () => s.write(req));
    // A Reply with R (byte 16, 0x20): refused at the cap, told why.
    s.on('data', (d) => { got += d.length; if (first.length < 20) first = Buffer.concat([first, d]); if (got >= 20) once(() => (first[16] & 0x20 ? rejected++ : replied++)); });
    s.on('close', () => once(() => closed++));
  }
}
process.stdin.on('data', () => {});
process.stdin.on('end', () => { for (const s of socks) s.destroy(); process.exit(0); });
`;

/** JS heap + array buffers after GC (device memory is a WebAssembly memory, not among them: dev.stats().memory). */
function measure(): number {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

describe('tcp: memory per held connection', () => {
  it(`two hosts each open ${PER_HOST + EXTRA} connections and complete MPA: ${2 * PER_HOST} held, the rest refused; heap per held connection < ${HEAP_PER_CONNECTION / 1024} KiB`, async () => {
    const dev = await openDevice({ transport: 'tcp' });
    cleanup.push(() => dev.close());
    const pd = dev.allocPd();
    const cq = dev.createCq({ depth: 64 });
    const l = listen(dev, { pd, backlog: 1024, qpInit: { sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 } });
    cleanup.push(() => l.close());
    const held: QueuePair[] = [];
    void (async () => {
      for await (const qp of l) held.push(qp);
    })().catch(() => {});
    const port = (dev.address as unknown as { port: number }).port;
    const link = (): Record<string, number> => dev.stats().link!;
    const mem0 = dev.stats().memory as unknown as { used: number };
    const used0 = mem0.used;
    const before = measure();
    const child: ChildProcess = spawn(process.execPath, ['-e', PEERS], {
      env: { ...process.env, PORT: String(port), N: String(PER_HOST + EXTRA), REQ: Buffer.from(MPA_REQUEST).toString('hex') },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    cleanup.push(() => {
      child.stdin?.end();
      child.kill();
    });
    const line = await new Promise<string>((res, rej) => {
      let out = '';
      const t = setTimeout(() => rej(new Error(`peers did not finish: ${out}`)), 40_000);
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n')) {
          clearTimeout(t);
          res(out.trim());
        }
      });
    });
    const end = Date.now() + 20_000;
    while (held.length < 2 * PER_HOST && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    expect(line).toBe(`replied ${2 * PER_HOST} rejected ${2 * EXTRA} closed 0`);
    expect(held.length).toBe(2 * PER_HOST);
    expect(link().endpointConnections).toBe(2 * PER_HOST);
    expect(link().connectionsRefusedHost).toBe(2 * EXTRA);
    await new Promise((r) => setTimeout(r, 200));
    const grown = measure() - before;
    const perConnection = grown / held.length;
    const deviceMemory = ((dev.stats().memory as unknown as { used: number }).used - used0) / held.length;
    if (process.env.HELD_VERBOSE) console.log({ grown, perConnection, deviceMemory });
    expect(perConnection).toBeLessThan(HEAP_PER_CONNECTION);
    // Device memory: the receive staging (512 KiB) and its CRC descriptors, nothing more.
    expect(deviceMemory).toBeLessThanOrEqual(512 * 1024 + 4096);
  }, 90_000);
});
