// What a peer can make a channel end hold or wait for, each pushed past its bound over real
// devices on 127.0.0.1: decoded values (elements, depth), staging sized by the peer's grant,
// rendezvous bytes held per peer and per device, channels per peer, the rendezvous DONE that
// never comes, and a failing channel telling its peer.
import { describe, expect, it } from 'vitest';
import { channelStats, connectChannel, listenChannels, type Channel } from '../../src/index.js';
import { decodeValue, encodeValue, scanValue } from '../../src/channel/codec.js';
import { rawListener, until } from './raw.js';
import { sendUntilRefused, udpDevices } from './devices.js';
import { pattern } from './sim.js';

const dev = udpDevices();
const tcpDev = udpDevices('tcp');

const LIM = { maxElements: 1 << 20, maxDepth: 256 };

/** An array32 of n empty maps: one JS object per byte. */
function objectBomb(n: number): Uint8Array {
  const b = new Uint8Array(5 + n).fill(0x80);
  b[0] = 0xdd;
  new DataView(b.buffer).setUint32(1, n);
  return b;
}

describe('decoding a value a peer sent is bounded (codec)', () => {
  it('an object bomb (one empty map per byte) is refused by the scan, before msgpackr builds anything', () => {
    const r = decodeValue(objectBomb(4 << 20), LIM);
    expect(r).toMatchObject({ ok: false, limit: true, error: expect.stringMatching(/more than 1048576 elements/) });
  });

  it('nesting past maxDepth, a count larger than the bytes left, and extensions that read out of band are refused', () => {
    expect(scanValue(new Uint8Array(1000).fill(0x91), LIM)).toMatch(/nested deeper than 256/);
    expect(scanValue(Uint8Array.of(0xdd, 0x80, 0, 0, 0, 0xc0), LIM)).toBe('truncated');
    // 0xd4 0x73: msgpackr's Set extension, which reads the value after it.
    expect(scanValue(Uint8Array.of(0x92, 0xd4, 0x73, 0x00, 0x91, 0xc0), LIM)).toMatch(/extension type 115/);
    expect(scanValue(Uint8Array.of(0xc1), LIM)).toMatch(/not MessagePack/);
  });

  it('bytes after the value are refused by the scan (msgpackr never walks a maximal message of them)', () => {
    const b = new Uint8Array(16 << 20).fill(0x80);
    b[0] = 0x01; // a one-byte value, then 16 MiB of empty maps
    const r = decodeValue(b, LIM);
    expect(r).toMatchObject({ ok: false, limit: false });
    expect(!r.ok && r.error).toMatch(/bytes after the value/);
    expect(scanValue(encodeValue({ a: [1, 2] }), LIM)).toBeUndefined();
  });

  it('an object with more than 65,535 keys encodes (map32) and decodes where the limits allow it', () => {
    const o: Record<string, number> = {};
    for (let i = 0; i < 70_000; i++) o[`k${i}`] = i;
    const b = encodeValue(o);
    expect(scanValue(b, { maxElements: 1 << 18, maxDepth: 4 })).toBeUndefined();
    const r = decodeValue(b, { maxElements: 1 << 18, maxDepth: 4 });
    expect(r.ok && Object.keys(r.value as object).length).toBe(70_000);
    expect(decodeValue(b, { maxElements: 1 << 17, maxDepth: 4 })).toMatchObject({ ok: false, limit: true });
  });

  it('what the encoder writes passes the scan and decodes as before', () => {
    const v = { a: [1, -2, 3.5, 'x'.repeat(300), null, true, undefined], b: new Date(1_700_000_000_000), c: new Uint8Array(70_000).fill(7), d: { e: { f: [[[]]] } } };
    const bytes = encodeValue(v);
    const r = decodeValue(bytes, LIM);
    expect(r.ok).toBe(true);
    expect(r).toEqual(decodeValue(bytes));
    expect(decodeValue(encodeValue(new Array(1000).fill({})), { maxElements: 1001, maxDepth: 2 }).ok).toBe(true);
    expect(decodeValue(encodeValue(new Array(1000).fill({})), { maxElements: 1000, maxDepth: 2 }).ok).toBe(false);
  });
});

describe('channel limits against a peer', () => {
  it('a value past maxValueElements in one rendezvous message fails the receiver with ERR_LIMIT_EXCEEDED, counted, and the sender is told', async () => {
    const a = await dev();
    const b = await dev();
    // maxBufferedBytes 0: the second message is not read before the application reaches it.
    const l = listenChannels(b, { service: 20, maxValueElements: 1000, maxBufferedBytes: 0 });
    const c = await connectChannel(a, b.address, { service: 20 });
    const s = await l.accept(5000);
    // ~100 KB of empty maps: rendezvous (above the 32 KiB slots).
    await c.send(new Array(100_000).fill({}));
    const big = c.send(pattern(1 << 20, 3));
    await expect(s[Symbol.asyncIterator]().next()).rejects.toMatchObject({ code: 'ERR_LIMIT_EXCEEDED', message: expect.stringMatching(/maxValueElements/) });
    expect(channelStats(b)).toMatchObject({ limitRefusals: 1, failed: 1, channels: 0, registeredBytes: 0 });
    // The failing end sent an abort before destroying its QP: the pending send ends at once.
    await expect(big).rejects.toMatchObject({ code: 'ERR_CLOSED', message: expect.stringMatching(/the peer failed the channel/) });
    await until(() => channelStats(a).channels === 0);
    l.close();
  });

  it('a HELLO with maxEager 2^32-1 granting 200 x 4 MiB slots does not size our staging (maxStageBytes)', async () => {
    const a = await dev();
    const b = await dev();
    const { accepted } = await rawListener(b, 21, true);
    const c = await connectChannel(a, b.address, { service: 21 });
    await accepted;
    const st = c.stats();
    expect(st.state).toBe('open');
    // Fixed region + phase-0 slots + at most the 256 KiB staging cap.
    expect(st.registeredBytes).toBeLessThanOrEqual(2048 + 1024 + (256 << 10));
    expect(channelStats(a).registeredBytes).toBe(st.registeredBytes);
    await c.close();
  });

  it('rendezvous bytes held for one peer stop at maxPeerRendezvousBytes: further offers wait (counted), then all arrive', async () => {
    const a = await dev();
    const b = await dev();
    const l = listenChannels(b, { service: 22, maxPeerRendezvousBytes: 1536 << 10 });
    const cs: Channel[] = [];
    const ss: Channel[] = [];
    for (let i = 0; i < 3; i++) {
      cs.push(await connectChannel(a, b.address, { service: 22 }));
      ss.push(await l.accept(5000));
    }
    const sends = cs.map((c, i) => c.send(pattern(1 << 20, 40 + i)));
    await until(() => channelStats(b).rendezvousWaits >= 2);
    // One 1 MiB message is held (read, not yet taken); the other two wait, holding nothing.
    expect(channelStats(b)).toMatchObject({ rendezvousHeldBytes: 1 << 20, peers: 1 });
    const got = await Promise.all(ss.map(async (s) => (await s[Symbol.asyncIterator]().next()).value as Uint8Array));
    await Promise.all(sends);
    got.forEach((g, i) => expect(Buffer.from(g).equals(Buffer.from(pattern(1 << 20, 40 + i)))).toBe(true));
    expect(channelStats(b).rendezvousHeldBytes).toBe(0);
    l.close();
  });

  it('rendezvous bytes held for all peers stop at maxDeviceRendezvousBytes: a second peer\'s offer waits until the first is taken', async () => {
    const a = await dev();
    const a2 = await dev();
    const b = await dev();
    const l = listenChannels(b, { service: 25, maxDeviceRendezvousBytes: 1536 << 10 });
    const c1 = await connectChannel(a, b.address, { service: 25 });
    const s1 = await l.accept(5000);
    const c2 = await connectChannel(a2, b.address, { service: 25 });
    const s2 = await l.accept(5000);
    const p1 = c1.send(pattern(1 << 20, 1));
    await until(() => channelStats(b).rendezvousHeldBytes === 1 << 20);
    const p2 = c2.send(pattern(1 << 20, 2));
    await until(() => channelStats(b).rendezvousWaits >= 1);
    expect(channelStats(b)).toMatchObject({ rendezvousHeldBytes: 1 << 20, peers: 2 });
    expect(s2.stats().readsInFlight).toBe(0);
    expect(((await s1[Symbol.asyncIterator]().next()).value as Uint8Array).length).toBe(1 << 20);
    expect(((await s2[Symbol.asyncIterator]().next()).value as Uint8Array).length).toBe(1 << 20);
    await Promise.all([p1, p2]);
    expect(channelStats(b).rendezvousHeldBytes).toBe(0);
    l.close();
  });

  // tcp too: a dial's source port is not its device's, so a peer there is the dialing device's
  // host and per-device nonce (before, every tcp channel counted as a peer of its own and the cap
  // never held).
  it.each(['udp', 'tcp'] as const)('%s: channels per peer stop at maxChannelsPerPeer: the next is refused and told, another peer still gets in', async (t) => {
    const mk = t === 'udp' ? dev : tcpDev;
    const a = await mk();
    const b = await mk();
    const other = await mk();
    const l = listenChannels(b, { service: 23, maxChannelsPerPeer: 2 });
    const ok = [await connectChannel(a, b.address, { service: 23 }), await connectChannel(a, b.address, { service: 23 })];
    await l.accept(5000);
    await l.accept(5000);
    const third = sendUntilRefused(() => connectChannel(a, b.address, { service: 23 }), pattern(10, 1));
    await expect(third).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    expect(channelStats(b)).toMatchObject({ peerCapRefused: 1, peers: 1 });
    await until(() => channelStats(b).channels === 2);
    const c = await connectChannel(other, b.address, { service: 23 });
    const s = await l.accept(5000);
    await c.send(pattern(10, 2));
    expect(((await s[Symbol.asyncIterator]().next()).value as Uint8Array).length).toBe(10);
    expect(channelStats(b)).toMatchObject({ peers: 2, channels: 3 });
    for (const x of ok) await x.send(pattern(5, 3));
    l.close();
  });

  it('an offered message whose DONE never comes rejects with ERR_TIMEOUT after rendezvousTimeoutMs (a silent peer)', async () => {
    const a = await dev();
    const b = await dev();
    const { raw, accepted } = await rawListener(b, 24);
    const c = await connectChannel(a, b.address, { service: 24, rendezvousTimeoutMs: 300 });
    await accepted;
    await expect(c.send(pattern(100_000, 5))).rejects.toMatchObject({ code: 'ERR_TIMEOUT', message: expect.stringMatching(/no DONE/) });
    expect(raw.ctrl.some((m) => m.type === 6)).toBe(true);
    expect(channelStats(a)).toMatchObject({ channels: 0, registeredBytes: 0 });
  });
});
