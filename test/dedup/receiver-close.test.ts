// The dedup receiver's lifecycle: close() settles a pending next() (and a for-await) with
// ERR_CLOSED, and next() after close rejects at once — the pipe is the caller's and may stay
// open, so the receiver's own close must end its waits. In-process pipe, no device.
import { beforeAll, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { DedupReceiver, type MessagePipe } from '../../src/dedup/endpoint.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { within } from '../lifecycle/within.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 32 << 20, maximumBytes: 256 << 20, workerSlots: 0 });
});

it('close() while next() and for-await wait: both settle at once, next() after close rejects with ERR_CLOSED', async () => {
  const pipe: MessagePipe = { send: () => undefined, onMessage: () => undefined };
  const store = new ChunkStore(dm);
  const zone = { addr: dm.alloc(1 << 20), rkey: 0x1234, length: 1 << 20 };
  const rx = new DedupReceiver({ pipe, mem: dm, store, scope: 's', zone, slots: 4, key: new Uint8Array(32).fill(7), avg: 8192, keepReceived: false });
  const pending = rx.next();
  const loop = (async () => {
    for await (const _ of rx) void _;
  })();
  await new Promise((r) => setTimeout(r, 10));
  rx.close();
  await expect(within(pending, 200)).rejects.toMatchObject({ code: 'ERR_CLOSED' });
  await within(loop, 200);
  await expect(within(rx.next(), 50)).rejects.toMatchObject({ code: 'ERR_CLOSED' });
  store.close();
  dm.free(zone.addr);
});
