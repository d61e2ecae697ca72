// Load: what a user does — file get/put, dedup get/put, a channel stream — on udp and tcp while
// CPU hogs saturate every core, and while either process blocks its event loop for a few
// seconds. Nothing that TCP itself would survive may fail, and no byte may be wrong. The suite
// runs a short version; `npm run load` the long one (SABRE_LOAD_LONG=1: bigger files, longer
// blocks, longer streams).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BLOCK_MS, blockLoop, LONG, channelStream, connectFiles, type Far, FILE_BYTES, halfChanged, localDir, pattern, putGet, sha, startFar, startHogs,
  STREAM_MESSAGES, type Transport,
} from './harness.js';

const T = LONG ? 600_000 : 120_000;

let far: Far;
beforeAll(async () => {
  far = await startFar();
}, 60_000);
afterAll(async () => {
  await far?.close();
});

describe.each(['udp', 'tcp'] as Transport[])('load over %s', (transport) => {
  it('CPU hogs on every core: put/get, dedup put/get and a channel stream all succeed, byte-exact', async () => {
    const stop = startHogs(T);
    const dir = localDir();
    try {
      const c = await connectFiles(far, transport);
      try {
        const plain = pattern(FILE_BYTES, 1);
        expect(sha(await putGet(c, dir, `hog-${transport}.bin`, plain, false))).toBe(sha(plain));
        // The server holds the plain file; a half-changed copy goes by dedup, then comes back.
        const v2 = halfChanged(plain, 50);
        expect(sha(await putGet(c, dir, `hog-${transport}.bin`, v2, true))).toBe(sha(v2));
      } finally {
        await c.end();
      }
      expect(await channelStream(transport, far, STREAM_MESSAGES)).toBe(STREAM_MESSAGES);
    } finally {
      stop();
    }
  }, T);

  it(`the client blocks its event loop for ${BLOCK_MS} ms in the middle of each transfer`, async () => {
    const dir = localDir();
    const c = await connectFiles(far, transport);
    try {
      for (const dedup of [false, true]) {
        const bytes = halfChanged(pattern(FILE_BYTES, 2), dedup ? 70 : 60);
        const t = setTimeout(() => blockLoop(BLOCK_MS), 20);
        const back = await putGet(c, dir, `cblock-${transport}.bin`, bytes, dedup);
        clearTimeout(t);
        expect(sha(back), `dedup ${dedup}`).toBe(sha(bytes));
      }
    } finally {
      await c.end();
    }
    const t = setTimeout(() => blockLoop(BLOCK_MS), 20);
    expect(await channelStream(transport, far, STREAM_MESSAGES)).toBe(STREAM_MESSAGES);
    clearTimeout(t);
  }, T);

  it(`the server blocks its event loop for ${BLOCK_MS} ms in the middle of each transfer`, async () => {
    const dir = localDir();
    const c = await connectFiles(far, transport);
    try {
      for (const dedup of [false, true]) {
        const bytes = halfChanged(pattern(FILE_BYTES, 3), dedup ? 90 : 80);
        const block = (async () => {
          await new Promise((r) => setTimeout(r, 20));
          return far.command(`block ${BLOCK_MS}`);
        })();
        const back = await putGet(c, dir, `sblock-${transport}.bin`, bytes, dedup);
        expect(await block).toBe('blocked');
        expect(sha(back), `dedup ${dedup}`).toBe(sha(bytes));
      }
    } finally {
      await c.end();
    }
    const block = (async () => {
      await new Promise((r) => setTimeout(r, 20));
      return far.command(`block ${BLOCK_MS}`);
    })();
    expect(await channelStream(transport, far, STREAM_MESSAGES)).toBe(STREAM_MESSAGES);
    expect(await block).toBe('blocked');
  }, T);
});
