// One error per cause (issue #26): an idle channel learns why its QP went down. A peer process
// killed with SIGKILL says nothing on the wire; the QP learns it from the link (tcp: the kernel
// resets the connection, at once; udp: the keepalive, within keepaliveMs × 2.5) with cause
// 'lost', and the channel must fail with the code for a failed link, ERR_UNREACHABLE
// (docs/channels.md, Close and failure) — its pending read and every later call alike. Before,
// the channel took the flushed receives for a close and failed ERR_CLOSED. A peer that closes on
// purpose (its channel, or its whole device) ends the channel with ERR_CLOSED / end of
// iteration, the codes for "the peer closed", never ERR_UNREACHABLE. A dedup send under way when
// the peer dies fails with the channel's code too (it was ERR_CLOSED, "the pipe closed").
// Over udp and tcp, NIC inline (workers 0) and threaded (the default).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { connectChannel, type Device, type DeviceAddress, listenChannels, openDevice } from '../../src/index.js';

const devs: Device[] = [];
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const d of devs.splice(0)) await d.close();
});

/** keepaliveMs 1000 on udp (default 3000) keeps the test short: a dead peer is seen within 2.5 s. */
async function dev(transport: 'udp' | 'tcp', workers: number | undefined): Promise<Device> {
  const d = await openDevice({ transport, host: '127.0.0.1', port: 0, ...(transport === 'udp' ? { keepaliveMs: 1000 } : {}), ...(workers === undefined ? {} : { workers }) });
  devs.push(d);
  return d;
}

/** A channel to a peer in a child process (test/channel/kill-peer-channel.mjs), its first message ('hello') taken. */
async function channelToChild(transport: 'udp' | 'tcp', workers: number | undefined) {
  const a = await dev(transport, workers);
  const child = spawn(process.execPath, ['test/channel/kill-peer-channel.mjs', transport, String(workers ?? 'default')], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const peer = JSON.parse((await lines.next()).value as string) as { address: DeviceAddress };
  const ch = await connectChannel(a, peer.address, { service: 9 });
  expect((await lines.next()).value).toBe('ready');
  const it = ch[Symbol.asyncIterator]();
  expect(await it.next()).toEqual({ done: false, value: 'hello' });
  return { child, ch, it };
}

for (const transport of ['udp', 'tcp'] as const) {
  for (const workers of [0, undefined]) {
    describe(`a channel's peer over ${transport} (workers ${workers ?? 'default'})`, () => {
      it('killed with SIGKILL while the channel is idle: the pending read and later calls reject ERR_UNREACHABLE, within the keepalive deadline', async () => {
        const { child, ch, it } = await channelToChild(transport, workers);
        // Idle: let the CREDIT that taking 'hello' sent be acknowledged (a write still out when the
        // peer dies is the retransmission timer's to end, after retryTimeoutMs: 6 s), then only
        // receives are posted and a read waits.
        await new Promise((r) => setTimeout(r, 500));
        const next = it.next();
        const settled = next.then(() => performance.now(), () => performance.now());
        const t0 = performance.now();
        child.kill('SIGKILL');
        await expect(next).rejects.toMatchObject({ code: 'ERR_UNREACHABLE' });
        const ms = (await settled) - t0;
        // Documented (docs/errors.md, Async events): tcp at once; udp within keepaliveMs × 2.5 = 2.5 s (3 s with timer slack).
        expect(ms).toBeLessThan(transport === 'tcp' ? 1000 : 3000);
        await expect(ch.send(new Uint8Array(1))).rejects.toMatchObject({ code: 'ERR_UNREACHABLE' });
        await expect(it.next()).rejects.toMatchObject({ code: 'ERR_UNREACHABLE' });
        await ch.close();
      }, 20_000);

      if (transport === 'tcp') {
        it('killed with SIGKILL during a dedup send: the send rejects with the channel\'s code (ERR_UNREACHABLE), not ERR_CLOSED', async () => {
          const { child, ch, it } = await channelToChild(transport, workers);
          // 64 MiB no chunk of which the peer holds: still moving when the peer dies 20 ms in.
          let settled = false;
          const sent = ch.send(randomFillSync(new Uint8Array(64 << 20)), { dedup: true }).finally(() => void (settled = true));
          const sendErr = sent.then(() => undefined, (e: unknown) => e);
          await new Promise((r) => setTimeout(r, 20));
          expect(settled, 'the dedup send was still under way at the kill').toBe(false);
          child.kill('SIGKILL');
          const readErr = await it.next().then(() => undefined, (e: unknown) => e);
          expect(readErr).toMatchObject({ code: 'ERR_UNREACHABLE' });
          // Before, 'dedup: the pipe closed: …' was ERR_CLOSED whatever closed it.
          expect(await sendErr).toMatchObject({ code: 'ERR_UNREACHABLE', message: expect.stringMatching(/^dedup: the pipe closed: channel: /) });
          await ch.close();
        }, 20_000);
      }

      it('closing its channel: the pending read ends (done), later sends reject ERR_CLOSED', async () => {
        const a = await dev(transport, workers);
        const b = await dev(transport, workers);
        const l = listenChannels(b, { service: 9 });
        const [c, s] = await Promise.all([connectChannel(a, b.address, { service: 9 }), l.accept(10_000)]);
        const next = c[Symbol.asyncIterator]().next();
        await s.close();
        expect(await next).toEqual({ done: true, value: undefined });
        await expect(c.send(new Uint8Array(1))).rejects.toMatchObject({ code: 'ERR_CLOSED' });
        l.close();
      });

      it('closing its device: the pending read and later sends reject ERR_CLOSED (the QP\'s close notice, cause closed), within a second', async () => {
        const a = await dev(transport, workers);
        const b = await dev(transport, workers);
        const l = listenChannels(b, { service: 9 });
        const [c] = await Promise.all([connectChannel(a, b.address, { service: 9 }), l.accept(10_000)]);
        const t0 = performance.now();
        const failed = c[Symbol.asyncIterator]().next().then(
          () => expect.unreachable('the read resolved'),
          (e: unknown) => ({ e, ms: performance.now() - t0 }),
        );
        await b.close();
        const { e, ms } = await failed;
        expect(e).toMatchObject({ code: 'ERR_CLOSED' });
        expect(ms).toBeLessThan(1000);
        await expect(c.send(new Uint8Array(1))).rejects.toMatchObject({ code: 'ERR_CLOSED' });
      });
    });
  }
}
