// What a connection nobody has taken yet keeps (src/transport/tcp/unowned.ts) was bounded by the
// ULPDU bytes alone: a peer sending tiny FPDUs (8 bytes on the wire for an empty ULPDU) made it
// keep one copy object per FPDU (~100+ bytes of heap each, more than 10x what it sent) while the
// byte count stayed far below the 1 MiB that pauses the socket. Now each ULPDU kept is charged
// its bookkeeping too, so the socket pauses after a bounded number of them.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { MpaConnector } from '../../src/transport/tcp/connector.js';
import { encodeSabrePd } from '../../src/transport/tcp/private-data.js';
import { cat, fpdu } from '../transport/tcp/raw-mpa.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

function cmRequest(service: number, qpn: number): Uint8Array {
  const block = encodeSabrePd({ kind: 'connect', initiatorQpn: qpn, responderQpn: 0, nonce: 12345, service });
  const pd = cat(Uint8Array.of(0x00, 0x10, 0x00, 0x10), block);
  return cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, pd.length >> 8, pd.length & 0xff), pd);
}

const heap = (): number => {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
};

describe('tiny ULPDUs on a tcp connection nobody has taken yet', () => {
  it('2 million empty FPDUs (16 MB on the wire) keep a bounded number of copies', async () => {
    const dm = await DeviceMemory.create({ initialBytes: 8 << 20, maximumBytes: 64 << 20, regionEntries: 16, workerSlots: 0 });
    const ep = await MpaConnector.listen({ dp: dm, connection: { mpa: { timeoutMs: 20_000 } } });
    cleanup.push(() => ep.close());
    ep.onConnectRequest((r) => void r.accept(5).catch(() => {}));
    const s = net.connect({ host: '127.0.0.1', port: ep.address.port });
    s.on('error', () => {});
    let got = 0;
    s.on('data', (d) => (got += d.length));
    cleanup.push(() => void s.destroy());
    await new Promise<void>((r) => s.once('connect', () => r()));
    s.write(cmRequest(7, 0x99));
    for (let i = 0; i < 100 && got === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(got).toBeGreaterThan(0); // the MPA Reply
    const one = fpdu(new Uint8Array(0));
    expect(one.length).toBe(8);
    const chunk = Buffer.from(cat(...Array.from({ length: 65536 }, () => one))); // 512 KiB, 65536 FPDUs
    const h0 = heap();
    let peak = 0;
    const total = 32; // 2 Mi FPDUs
    let sent = 0;
    const deadline = Date.now() + 4000;
    while (sent < total && Date.now() < deadline) {
      if (s.write(chunk)) sent++;
      else {
        await Promise.race([new Promise((r) => s.once('drain', r)), new Promise((r) => setTimeout(r, 300))]);
        if (s.writableLength > 0) { peak = Math.max(peak, heap() - h0); continue; }
        sent++;
      }
      await new Promise((r) => setImmediate(r));
      peak = Math.max(peak, heap() - h0);
    }
    for (let i = 0; i < 10; i++) {
      await new Promise((r) => setTimeout(r, 50));
      peak = Math.max(peak, heap() - h0);
    }
    // Before: ~130 bytes of heap per empty FPDU kept, ~250 MB for what was sent here.
    expect(peak).toBeLessThan(48 << 20);
    // It stopped reading: most of what was offered is still with the kernel or the client.
    expect(sent).toBeLessThan(total);
  }, 30_000);
});
