// Channels accepted by a listener with `preauth` start untrusted: small fixed registration, only
// small messages, no rendezvous, no dedup sends, a per-peer cap — until ch.authorize().
import { describe, expect, it } from 'vitest';
import { channelStats, connect, connectChannel, listenChannels, type DeviceAddress } from '../../src/index.js';
import { RawEnd, until } from './raw.js';
import { sendUntilRefused, udpDevices } from './devices.js';
import { pattern } from './sim.js';

const dev = udpDevices();

/** Fixed region (HELLO buffer, 8 mailbox slots, scratch) + phase 0 (256 B x 4) of the default ladder. */
const IDLE = 64 + 8 * 32 + 64 + 1024;

describe('preauth listener: untrusted channels', () => {
  it('take messages up to preauth.maxMessage within a small fixed registration; after authorize() the full ladder', async () => {
    const a = await dev();
    const b = await dev();
    const l = listenChannels(b, { service: 30, preauth: {} });
    const c = await connectChannel(a, b.address, { service: 30 });
    const s = await l.accept(5000);
    expect(s.authorized).toBe(false);
    expect(channelStats(b).untrusted).toBe(1);
    const it = s[Symbol.asyncIterator]();
    await c.send(pattern(4096, 1));
    expect(Buffer.from((await it.next()).value as Uint8Array).equals(Buffer.from(pattern(4096, 1)))).toBe(true);
    // One slot of 4096 bytes instead of phase 1's 8 x 4 KiB (and phase 0 is gone after the fence).
    expect(s.stats().registeredBytes).toBeLessThanOrEqual(IDLE + 4096);
    s.authorize();
    expect(s.authorized).toBe(true);
    expect(channelStats(b).untrusted).toBe(0);
    s.authorize();
    await c.send(pattern(30_000, 2));
    await c.send(pattern(200_000, 3));
    expect(((await it.next()).value as Uint8Array).length).toBe(30_000);
    expect(((await it.next()).value as Uint8Array).length).toBe(200_000);
    expect(s.stats().phase).toBe(2);
    await c.close();
    l.close();
  });

  it('a message above preauth.maxMessage fails the channel with a counted refusal; the sender is told', async () => {
    const a = await dev();
    const b = await dev();
    const l = listenChannels(b, { service: 31, preauth: { maxMessage: 1000 } });
    const c = await connectChannel(a, b.address, { service: 31 });
    const s = await l.accept(5000);
    await expect(c.send(pattern(1001, 1))).rejects.toMatchObject({ code: 'ERR_CLOSED', message: expect.stringMatching(/the peer failed/) });
    await expect(s[Symbol.asyncIterator]().next()).rejects.toMatchObject({ code: 'ERR_LIMIT_EXCEEDED', message: expect.stringMatching(/before authorization/) });
    expect(channelStats(b)).toMatchObject({ limitRefusals: 1, channels: 0, registeredBytes: 0, untrusted: 0 });
    l.close();
  });

  it('a rendezvous OFFER before authorization is refused, nothing registered for it', async () => {
    const a = await dev();
    const b = await dev();
    const l = listenChannels(b, { service: 32, preauth: {} });
    // The sender's own ladder has small slots: a 3000-byte message goes by rendezvous.
    const c = await connectChannel(a, b.address, { service: 32 });
    const s = await l.accept(5000);
    await expect(c.send(pattern(100_000, 1))).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    await expect(s[Symbol.asyncIterator]().next()).rejects.toMatchObject({ code: 'ERR_LIMIT_EXCEEDED', message: expect.stringMatching(/OFFER/) });
    expect(channelStats(b)).toMatchObject({ limitRefusals: 1, rendezvousHeldBytes: 0, registeredBytes: 0 });
    l.close();
  });

  it('dedup sends are refused before authorization and accepted after', async () => {
    const a = await dev();
    const b = await dev();
    const l = listenChannels(b, { service: 33, preauth: {} });
    const c = await connectChannel(a, b.address, { service: 33 });
    const s = await l.accept(5000);
    await expect(c.send(pattern(1000, 1), { dedup: true })).rejects.toMatchObject({ code: 'ERR_NOT_SUPPORTED' });
    expect(s.pd.mrs.size, 'no landing zone registered').toBe(1);
    // (A refused sender remembers the refusal for its channel: the next one asks afresh.)
    const c2 = await connectChannel(a, b.address, { service: 33 });
    const s2 = await l.accept(5000);
    s2.authorize();
    await c2.send(pattern(300_000, 2), { dedup: true });
    expect(((await s2[Symbol.asyncIterator]().next()).value as Uint8Array).length).toBe(300_000);
    expect(s.authorized).toBe(false);
    l.close();
  });

  it('untrusted channels per peer stop at preauth.maxPerPeer; authorizing one makes room', async () => {
    const a = await dev();
    const b = await dev();
    const l = listenChannels(b, { service: 34, preauth: { maxPerPeer: 2 } });
    await connectChannel(a, b.address, { service: 34 });
    await connectChannel(a, b.address, { service: 34 });
    const s1 = await l.accept(5000);
    await l.accept(5000);
    const third = sendUntilRefused(() => connectChannel(a, b.address, { service: 34 }), pattern(10, 1));
    await expect(third).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    expect(channelStats(b)).toMatchObject({ peerCapRefused: 1, untrusted: 2 });
    s1.authorize();
    const c4 = await connectChannel(a, b.address, { service: 34 });
    const s4 = await l.accept(5000);
    await c4.send(pattern(10, 2));
    expect(((await s4[Symbol.asyncIterator]().next()).value as Uint8Array).length).toBe(10);
    expect(channelStats(b)).toMatchObject({ untrusted: 2, channels: 3 });
    l.close();
  });

  it('a greedy HELLO (maxEager 2^32-1, 200 x 4 MiB slots) does not size the untrusted end\'s staging past phase 0', async () => {
    const a = await dev();
    const b = await dev();
    const l = listenChannels(b, { service: 35, preauth: {} });
    const raw = new RawEnd(a);
    const qp = await connect(a, b.address as DeviceAddress, { pd: raw.pd, qpInit: raw.qpInit, service: 35, setup: raw.setup });
    raw.start(qp, true);
    const s = await l.accept(5000);
    await until(() => raw.peerGrant !== undefined);
    expect(s.stats().registeredBytes).toBeLessThanOrEqual(IDLE + 1024);
    // The server's own reply to the untrusted peer is staged within that budget too.
    void s.send(pattern(900, 1)).catch(() => undefined);
    await until(() => raw.data.length === 1);
    expect(s.stats().registeredBytes).toBeLessThanOrEqual(IDLE + 1024);
    l.close();
  });
});
