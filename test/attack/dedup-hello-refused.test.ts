// A dedup sender that refuses its receiver's HELLO (parameters it cannot use: a newer or a
// hostile receiver) failed its own sends — but told the receiver nothing. The receiver's channel
// arms its dedup idle deadline only on a sender→receiver message, so an application waiting for
// the object waited until the channel closed, its landing zone registered all that time; a file
// get whose HELLO the server refused failed with a misleading "expected the file's bytes".
// Checked: on refusing a HELLO the sender sends ABORT with status 5 (HELLO refused); the receiver
// counts it (dev.stats().dedup.received.helloRefused) and whoever waits on it gets
// SabreError(ERR_NOT_SUPPORTED, "... refused this receiver's HELLO ..."): DedupReceiver.next(),
// the channel's next(), the file client's get. Here the sender's check of the chunking
// parameters is made to refuse every HELLO (vi.mock of cdcParamsUsable): a receiver of this code
// can no longer send parameters its own chunker refuses (checked below: ERR_INVALID_ARGUMENT up
// front). Failed before the fix (the receiver was still waiting after 10 x dedupIdleMs).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { DedupReceiver, DedupSender, type MessagePipe, type RdmaWritePath } from '../../src/dedup/endpoint.js';
import { decode } from '../../src/dedup/messages.js';
import { dedupTotals } from '../../src/dedup/stats.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { DedupRecvCore } from '../../src/dedup/transfer.js';
import { FileClient, serveFiles } from '../../src/files/index.js';
import { connectChannel, listenChannels, openDevice, type Channel, type Device } from '../../src/index.js';
import { DedupEndStatus, DedupKind } from '../../src/wire/dedup-spec.js';
import { within } from '../lifecycle/within.js';
import { tempDir } from '../files/helpers.js';

const refuse = vi.hoisted(() => ({ on: true }));
vi.mock('../../src/kernels/cdc-params.js', async (orig) => {
  const m = await orig<typeof import('../../src/kernels/cdc-params.js')>();
  return { ...m, cdcParamsUsable: (o: Parameters<typeof m.cdcParamsUsable>[0]) => !refuse.on && m.cdcParamsUsable(o) };
});

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 16 << 20, maximumBytes: 64 << 20, workerSlots: 0 });
});

const failure = (p: Promise<unknown>): Promise<{ code?: string; message?: string } | undefined> =>
  p.then(() => undefined, (e: { code?: string; message?: string }) => e);

describe('a refused dedup HELLO reaches the receiver', () => {
  it('over a pipe: the sender sends ABORT (status 5), the receiver\'s next() rejects with ERR_NOT_SUPPORTED, counted', async () => {
    let toTx: (b: Uint8Array) => void = () => undefined;
    let toRx: (b: Uint8Array) => void = () => undefined;
    const fromTx: Uint8Array[] = [];
    const txPipe: MessagePipe = { send: (b) => void (fromTx.push(b), queueMicrotask(() => toRx(b))), onMessage: (h) => void (toTx = h) };
    const rxPipe: MessagePipe = { send: (b) => void queueMicrotask(() => toTx(b)), onMessage: (h) => void (toRx = h) };
    const rdma: RdmaWritePath = { stage: () => 0, write: () => Promise.resolve() };
    const tx = new DedupSender({ pipe: txPipe, rdma, mem: dm });
    const store = new ChunkStore(dm);
    const zone = { addr: dm.alloc(1 << 18), rkey: 0x77, length: 1 << 18 };
    const before = { ...dedupTotals(dm).received };
    const rx = new DedupReceiver({ pipe: rxPipe, mem: dm, store, scope: 'r', zone, slots: 2, avg: 4096, inBand: false });
    const got = await failure(within(rx.next(), 2000));
    expect(got?.code).toBe('ERR_NOT_SUPPORTED');
    expect(got?.message).toMatch(/refused this receiver's HELLO/);
    expect(fromTx.map((b) => decode(b))).toEqual([{ kind: DedupKind.Abort, xfer: 0, status: DedupEndStatus.HelloRefused }]);
    const after = dedupTotals(dm).received;
    expect(after.helloRefused - before.helloRefused).toBe(1);
    expect(after.failed - before.failed).toBe(0); // no transfer began
    // Every later wait on this receiver ends the same way (no HELLO will be taken on this pipe).
    expect((await failure(within(rx.next(), 500)))?.code).toBe('ERR_NOT_SUPPORTED');
    expect((await failure(tx.send(new Uint8Array(10))))?.code).toBe('ERR_MALFORMED');
    tx.close();
    rx.close();
    store.close();
    dm.free(zone.addr);
  });

  async function pair(transport: 'inproc' | 'udp'): Promise<{ a: Device; b: Device; c: Channel; s: Channel }> {
    const open = async (): Promise<Device> => {
      const d = await openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });
      cleanup.push(() => d.close());
      return d;
    };
    const a = await open();
    const b = await open();
    const l = listenChannels(b, { service: 9, dedupIdleMs: 300 });
    cleanup.push(() => l.close());
    const [c, s] = await Promise.all([connectChannel(a, b.address, { service: 9, dedupIdleMs: 300 }), l.accept(10_000)]);
    cleanup.push(() => c.close(), () => s.close());
    return { a, b, c, s };
  }

  it.each(['inproc', 'udp'] as const)('over %s channels: the receiving application gets ERR_NOT_SUPPORTED at once, counted; the channel goes on', async (transport) => {
    const { b, c, s } = await pair(transport);
    const x = new Uint8Array(randomBytes(200_000));
    const sendErr = await failure(c.send(x, { dedup: true }));
    expect(sendErr?.code).toBe('ERR_MALFORMED');
    expect(sendErr?.message).toMatch(/HELLO with unusable parameters/);
    const rxErr = await failure(within(s.next(), 3000));
    expect(rxErr?.code).toBe('ERR_NOT_SUPPORTED');
    expect(rxErr?.message).toMatch(/refused this receiver's HELLO/);
    const st = b.stats() as unknown as { dedup: { received: { helloRefused: number; failed: number } } };
    expect(st.dedup.received.helloRefused).toBe(1);
    expect(s.stats().state).toBe('open');
    await c.send('after');
    expect((await within(s.next(), 3000)).value).toBe('after');
  }, 30_000);

  it('a file get --dedup whose HELLO the server refuses fails with that reason, not "expected the file\'s bytes"', async () => {
    const dir = tempDir('dedup-refused');
    const local = tempDir('dedup-refused-local');
    cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }), () => fs.rmSync(local, { recursive: true, force: true }));
    fs.writeFileSync(join(dir, 'a'), randomBytes(100_000));
    const srv = await serveFiles(dir, { transports: ['inproc'], token: 't0ken' });
    cleanup.push(() => srv.close());
    const c = await FileClient.connect({ host: '127.0.0.1', port: srv.address.port }, { token: 't0ken', transport: 'inproc' });
    cleanup.push(() => c.end());
    const err = await failure(within(c.get('a', join(local, 'a'), { dedup: true }), 20_000));
    expect(err?.message).toMatch(/refused this receiver's HELLO/);
    expect(err?.message).not.toMatch(/expected the file/);
    expect(fs.existsSync(join(local, 'a'))).toBe(false);
  }, 30_000);
});

describe('chunking parameters a receiver\'s own chunker refuses are the caller\'s misuse, found up front', () => {
  it('DedupRecvCore and a channel\'s dedupBasis throw ERR_INVALID_ARGUMENT for avg 1000 / min 8', async () => {
    const store = new ChunkStore(dm);
    const zone = { addr: 0x10000, rkey: 1, length: 1 << 20 };
    for (const o of [{ avg: 1000 }, { avg: 4096, min: 8 }, { avg: 128 }, { avg: 4096, normalization: 7 }]) {
      expect(() => new DedupRecvCore({ mem: dm, store, scope: 'm', zone, slots: 2, ...o }), JSON.stringify(o)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }));
    }
    store.close();
    const d = await openDevice({ transport: 'inproc' });
    cleanup.push(() => d.close());
    const l = listenChannels(d, { service: 9 });
    cleanup.push(() => l.close());
    const [c] = await Promise.all([connectChannel(d, d.address, { service: 9 }), l.accept(10_000)]);
    cleanup.push(() => c.close());
    expect(() => c.dedupBasis('m', new Uint8Array(32), 1000)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }));
    c.dedupBasis('m', new Uint8Array(32), 4096);
  }, 30_000);
});
