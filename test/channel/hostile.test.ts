// A hostile or silent peer over real devices: the peer is raw verbs (cm + QP + regions) speaking
// the channel's wire format by hand (src/channel/wire.ts), so it can do what a channel never
// would — ignore an ENLARGE, grant an rkey it does not own or a range past its region, write a
// data message into the wrong slot. The channel under test must fail cleanly with a stable code
// on send / iteration, write nothing outside a region, and release its QP and every region.
import { describe, expect, it } from 'vitest';
import {
  Access, channelStats, connect, connectChannel, listenChannels, Opcode,
  type Channel, type Device, type DeviceAddress,
} from '../../src/index.js';
import { dataImm } from '../../src/channel/wire.js';
import { ChanType } from '../../src/wire/channel-spec.js';
import { udpDevices } from './devices.js';
import { pattern } from './sim.js';

const dev = udpDevices();

import { rawListener, RawEnd, until } from './raw.js';

const RW = Access.LocalWrite | Access.RemoteWrite;

function expectReleased(a: Device, c: Channel): void {
  expect(channelStats(a)).toMatchObject({ channels: 0, registeredBytes: 0, failed: 1 });
  expect(c.pd.mrs.size, 'regions left registered').toBe(0);
  expect(c.pd.qps.size, 'QP left').toBe(0);
}

describe('a silent or hostile receiver (raw peer)', () => {
  it('never answers an enlargement: send rejects with ERR_TIMEOUT, the channel closes, nothing leaks', async () => {
    const a = await dev();
    const b = await dev();
    const { raw, accepted } = await rawListener(b, 5);
    const c = await connectChannel(a, b.address, { service: 5, timeoutMs: 300 });
    await accepted;
    await c.send(pattern(100, 1));
    const t0 = performance.now();
    await expect(c.send(pattern(1000, 2))).rejects.toMatchObject({ code: 'ERR_TIMEOUT', message: expect.stringMatching(/did not answer an enlargement/) });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
    expect(raw.ctrl.map((m) => m.type)).toContain(ChanType.Enlarge);
    expect(raw.data).toEqual([{ slot: 0, len: 100 }]);
    await expect(c.send(pattern(1, 3))).rejects.toMatchObject({ code: 'ERR_TIMEOUT' });
    await expect(c[Symbol.asyncIterator]().next()).rejects.toMatchObject({ code: 'ERR_TIMEOUT' });
    expectReleased(a, c);
  });

  it('answers with an rkey it does not own: the write is refused, send rejects with ERR_PROTOCOL, nothing written', async () => {
    const a = await dev();
    const b = await dev();
    const { raw, accepted } = await rawListener(b, 6);
    const big = raw.pd.regMr(8 * 4096, RW);
    raw.onCtrl = (m) => {
      if (m.type === ChanType.Enlarge) raw.sendCtrl({ type: ChanType.Grant, grant: { epoch: 1, slots: 8, slotSize: 4096, addr: big.addr, rkey: (big.rkey ^ 0x5500) >>> 0, phase: 1 } });
    };
    const c = await connectChannel(a, b.address, { service: 6, timeoutMs: 2000 });
    await accepted;
    await expect(c.send(pattern(1000, 2))).rejects.toMatchObject({ code: 'ERR_PROTOCOL', message: expect.stringMatching(/refused a write/) });
    expect(big.buffer.every((x) => x === 0)).toBe(true);
    expect(raw.data).toEqual([]);
    expectReleased(a, c);
  });

  it('answers with a range past its region: writes inside land, the first past the end is refused, the bytes after the region are untouched', async () => {
    const a = await dev();
    const b = await dev();
    const { raw, accepted } = await rawListener(b, 7);
    const big = raw.pd.regMr(2 * 4096, RW);
    const canary = raw.pd.regMr(64 * 1024, RW);
    expect(canary.addr).toBeGreaterThanOrEqual(big.addr + big.length);
    raw.onCtrl = (m) => {
      // Eight 4 KiB slots over a region of two.
      if (m.type === ChanType.Enlarge) raw.sendCtrl({ type: ChanType.Grant, grant: { epoch: 1, slots: 8, slotSize: 4096, addr: big.addr, rkey: big.rkey, phase: 1 } });
    };
    const c = await connectChannel(a, b.address, { service: 7, timeoutMs: 2000 });
    await accepted;
    // 3000 B each: no two share a 4 KiB slot (they would be packed), so they take slots 0, 1, 2.
    const results = await Promise.allSettled([1, 2, 3].map((i) => c.send(pattern(3000, i))));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    expect((results[2] as PromiseRejectedResult).reason).toMatchObject({ code: 'ERR_PROTOCOL' });
    await until(() => raw.data.length === 2);
    expect(raw.data.map((d) => d.slot)).toEqual([0, 1]);
    expect(Buffer.from(big.buffer.subarray(0, 3000)).equals(Buffer.from(pattern(3000, 1)))).toBe(true);
    expect(canary.buffer.every((x) => x === 0)).toBe(true);
    expectReleased(a, c);
  });
});

describe('a hostile sender (raw peer)', () => {
  it('a data message in the wrong slot: iteration rejects with ERR_PROTOCOL, the channel releases everything', async () => {
    const a = await dev();
    const b = await dev();
    const l = listenChannels(b, { service: 8 });
    const raw = new RawEnd(a);
    const qp = await connect(a, b.address as DeviceAddress, { pd: raw.pd, qpInit: raw.qpInit, service: 8, setup: raw.setup });
    raw.start(qp);
    const s = await l.accept(5000);
    await until(() => raw.peerGrant !== undefined);
    const g = raw.peerGrant!;
    raw.writeData(g, 0, 0, pattern(10, 1));
    raw.writeData(g, 3, 1, pattern(10, 2));
    const it = s[Symbol.asyncIterator]();
    const first = await it.next();
    expect((first.value as Uint8Array).length).toBe(10);
    await expect(it.next()).rejects.toMatchObject({ code: 'ERR_PROTOCOL', message: expect.stringMatching(/slot 3, the next slot is 1/) });
    expect(channelStats(b)).toMatchObject({ channels: 0, registeredBytes: 0, failed: 1 });
    expect(s.pd.mrs.size).toBe(0);
    l.close();
  });

  it('a value that does not decode: iteration rejects with ERR_PROTOCOL', async () => {
    const a = await dev();
    const b = await dev();
    const l = listenChannels(b, { service: 10 });
    const raw = new RawEnd(a);
    const qp = await connect(a, b.address as DeviceAddress, { pd: raw.pd, qpInit: raw.qpInit, service: 10, setup: raw.setup });
    raw.start(qp);
    const s = await l.accept(5000);
    await until(() => raw.peerGrant !== undefined);
    const g = raw.peerGrant!;
    // A msgpack array32 header claiming 2^31 elements, then nothing.
    raw.scratch.buffer.set([0xdd, 0x80, 0, 0, 0], 0);
    qp.postSend({
      wrId: 99, opcode: Opcode.RdmaWriteWithImm, imm: dataImm(g.epoch, true, 0, 0), remoteAddr: g.addr, rkey: g.rkey,
      sgList: [{ addr: raw.scratch.addr, length: 5, lkey: raw.scratch.lkey }],
    });
    await expect(s[Symbol.asyncIterator]().next()).rejects.toMatchObject({ code: 'ERR_PROTOCOL', message: expect.stringMatching(/does not decode/) });
    expect(s.pd.mrs.size).toBe(0);
    l.close();
  });
});
