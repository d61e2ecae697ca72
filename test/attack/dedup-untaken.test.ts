// A peer that pushes dedup sends into a channel whose application is not reading (or reads
// slowly). An ordinary message the application has not taken stays in the channel's window, so
// an unread backlog stops the sender; a finished dedup object left the window for a queue of its
// own and nothing stopped the next one. A sender of zeros (one chunk, repeated) paid a few bytes
// per object while the receiver assembled and kept each one whole: 300 sends of 4 MiB left
// 1.2 GiB at a receiver that did not read, none of it in its stats. On the file server a token
// holder could do this on a get --dedup channel, which the server never reads after the AUTH.
// Now a finished object not yet taken holds back the dedup messages behind it, as an unread
// message does: the sender waits, and what it sent all arrives, in order, once the reader reads.
import { describe, it } from 'vitest';
import { type Channel, connectChannel, listenChannels, openDevice } from '../../src/index.js';

const N = 40;
const SIZE = 4 << 20;

// The transports at once (devices of their own, the context's expect): most of each is the 5 s
// a held-back send is given.
describe.concurrent('dedup sends into a channel nobody reads', () => {
  it.for(['udp', 'tcp'] as const)(`%s: ${N} dedup sends of ${SIZE >> 20} MiB: the sender is held back after the first few; all arrive byte-exact once the reader reads`, { timeout: 90_000 }, async (transport, { expect }) => {
    const a = await openDevice({ transport, host: '127.0.0.1', port: 0 });
    const b = await openDevice({ transport, host: '127.0.0.1', port: 0 });
    const l = listenChannels(a, { service: 78, maxMessage: 64 << 20 });
    try {
      const acc = l[Symbol.asyncIterator]().next();
      const tx = await connectChannel(b, { transport, host: '127.0.0.1', port: a.address.port as number }, { service: 78, maxMessage: 64 << 20 });
      const rx = (await acc).value as Channel;
      const payload = (i: number): Uint8Array => new Uint8Array(SIZE).fill(i + 1);
      // One send at a time (dedup sends go one at a time anyway); a send not done 5 s after it
      // started is taken as held back. Bounded: N sends.
      let done = 0;
      const sends: Promise<void>[] = [];
      for (let i = 0; i < N; i++) {
        const p = tx.send(payload(i), { dedup: true });
        sends.push(p);
        const r = await Promise.race([p.then(() => 'done'), new Promise((res) => setTimeout(() => res('held'), 5000))]);
        if (r !== 'done') break;
        done++;
      }
      // The old code let all of them through to a receiver that was not reading.
      expect(done).toBeLessThanOrEqual(3);
      // Every send goes through once the reader reads, in order, nothing lost.
      for (let i = 0; i < sends.length; i++) {
        const m = await rx.next();
        expect(m.done).toBe(false);
        const v = m.value as Uint8Array;
        expect(v.length).toBe(SIZE);
        expect(v[0]).toBe(i + 1);
        expect(v[SIZE - 1]).toBe(i + 1);
      }
      await Promise.all(sends);
      await tx.close();
    } finally {
      l.close();
      await a.close();
      await b.close();
    }
  });
});
