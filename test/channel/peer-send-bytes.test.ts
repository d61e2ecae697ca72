// A peer that sends bytes with a Send where the channel granted none breaks the protocol, and the
// channel says so: ERR_PROTOCOL, with what the peer did. After its HELLO every receive is posted
// with an empty scatter list (only writes with immediate follow), and the HELLO's receive holds
// 64 bytes; a Send with bytes after the HELLO, or a HELLO longer than 64 bytes, completes that
// receive LocLenErr. The core took every receive error but a flush for a failed link, so both
// failed the channel ERR_UNREACHABLE ("receive failed: LocLenErr") — the first case failed before
// the fix; the second did too (it was never checked: the listener never hands that channel out,
// so it is checked here from the connecting side). Over udp and tcp, NIC inline and threaded.
import { afterEach, describe, expect, it } from 'vitest';
import {
  connect, connectChannel, type Device, type DeviceAddress, listen, listenChannels, Opcode, openDevice,
} from '../../src/index.js';
import { CHAN_HELLO_BUF } from '../../src/wire/channel-spec.js';
import { RawEnd, until } from './raw.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

for (const transport of ['udp', 'tcp'] as const) {
  for (const workers of [0, undefined]) {
    describe(`a peer that sends bytes with a Send (${transport}, workers ${workers ?? 'default'})`, () => {
      const pair = async (): Promise<[Device, Device]> => {
        const opts = { transport, host: '127.0.0.1', port: 0, ...(workers === undefined ? {} : { workers }) };
        const a = await openDevice(opts);
        const b = await openDevice(opts);
        devs.push(a, b);
        return [a, b];
      };

      it('after its HELLO: the channel fails ERR_PROTOCOL, naming the Send', async () => {
        const [a, b] = await pair();
        const l = listenChannels(b, { service: 31 });
        const raw = new RawEnd(a);
        const qp = await connect(a, b.address as DeviceAddress, { pd: raw.pd, qpInit: raw.qpInit, service: 31, setup: raw.setup });
        raw.start(qp);
        const s = await l.accept(5000);
        await until(() => raw.peerGrant !== undefined);
        raw.scratch.buffer.set([1, 2, 3, 4, 5, 6, 7, 8], 0);
        qp.postSend({ wrId: 50, opcode: Opcode.Send, sgList: [{ addr: raw.scratch.addr, length: 8, lkey: raw.scratch.lkey }] });
        await expect(s[Symbol.asyncIterator]().next()).rejects.toMatchObject({
          code: 'ERR_PROTOCOL', message: expect.stringMatching(/sent a Send with bytes after its HELLO.*LocLenErr/),
        });
        await expect(s.send(new Uint8Array(1))).rejects.toMatchObject({ code: 'ERR_PROTOCOL' });
        l.close();
      });

      it(`a HELLO longer than the ${CHAN_HELLO_BUF}-byte HELLO buffer: connectChannel rejects ERR_PROTOCOL`, async () => {
        const [a, b] = await pair();
        const raw = new RawEnd(b);
        const l = listen(b, { pd: raw.pd, qpInit: raw.qpInit, service: 32, setup: raw.setup });
        const sent = l.accept(10_000).then((qp) => {
          raw.scratch.buffer.fill(9, 0, 200);
          qp.postSend({ wrId: 51, opcode: Opcode.Send, sgList: [{ addr: raw.scratch.addr, length: 200, lkey: raw.scratch.lkey }] });
          l.close();
        });
        await expect(connectChannel(a, b.address, { service: 32 })).rejects.toMatchObject({
          code: 'ERR_PROTOCOL', message: expect.stringMatching(/HELLO is longer than the 64-byte HELLO buffer.*LocLenErr/),
        });
        await sent;
      });
    });
  }
}
