// In-band chunk hashing from data-plane workers: two real worker threads advance the same chunk
// maps at the same time (segments of every chunk split between them, in shuffled order), through
// the ring job JobOp.ChunkHashBatch. The map's lock keeps each update whole, the watermark keeps
// the order irrelevant: every digest equals @node-rs/xxhash's, every byte hashed once.
import { xxh3 } from '@node-rs/xxhash';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { JobOp, JobStatus } from '../../src/dataplane/jobs.js';
import { DataPlaneWorkers } from '../../src/dataplane/workers.js';
import { ChunkMap, ChunkStatus } from '../../src/dedup/chunk-map.js';
import { DEDUP_HASH_DESC } from '../../src/wire/spec.js';

let dm: DeviceMemory;
let workers: DataPlaneWorkers;

beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 16 << 20, maximumBytes: 64 << 20, workerSlots: 2, ringSlots: 64 });
  workers = await DataPlaneWorkers.start(dm, 2);
});

afterAll(async () => {
  await workers.close();
});

describe('chunk hashing on data-plane workers', () => {
  it('two workers advancing the same maps concurrently give the reference digests', async () => {
    const N = 3 << 20;
    const src = new Uint8Array(randomBytes(N));
    const zone = dm.alloc(N);
    dm.u8().set(src, zone); // placed already; the jobs report the segments
    const lens: number[] = [];
    for (let left = N, i = 0; left > 0; i++) {
      const l = Math.min(left, 4096 + ((i * 7919) % 60_000));
      lens.push(l);
      left -= l;
    }
    let at = 0;
    const chunks = lens.map((len) => {
      const hash = xxh3.xxh128(src.subarray(at, at + len));
      at += len;
      return { len, hash };
    });
    const map = new ChunkMap(dm, zone, N, lens.length);
    map.arm(chunks);
    // 1400-byte segments, shuffled, dealt alternately to two descriptor lists.
    const segs: Array<[number, number]> = [];
    for (let off = 0; off < N; off += 1400) segs.push([off, Math.min(1400, N - off)]);
    let s = 12345;
    for (let i = segs.length - 1; i > 0; i--) {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      const j = s % (i + 1);
      [segs[i], segs[j]] = [segs[j]!, segs[i]!];
    }
    const D = DEDUP_HASH_DESC.size;
    const lists = [segs.filter((_, i) => i % 2 === 0), segs.filter((_, i) => i % 2 === 1)];
    const descs = lists.map((l) => {
      const d = dm.alloc(l.length * D);
      const dv = dm.dataView();
      l.forEach(([off, len], i) => {
        dv.setUint32(d + i * D, map.addr, true);
        dv.setUint32(d + i * D + 4, zone + off, true);
        dv.setUint32(d + i * D + 8, len, true);
        dv.setUint32(d + i * D + 12, 0, true);
      });
      return d;
    });
    // Each worker gets its list in batches of 64 segments, all submitted at once.
    const jobs: Array<Promise<{ status: number; result: number }>> = [];
    for (let w = 0; w < 2; w++) {
      for (let i = 0; i < lists[w]!.length; i += 64) {
        jobs.push(workers.submit({ op: JobOp.ChunkHashBatch, args: [descs[w]! + i * D, Math.min(64, lists[w]!.length - i)] }, w));
      }
    }
    const results = await Promise.all(jobs);
    expect(results.every((r) => r.status === JobStatus.Ok)).toBe(true);
    const finalized = results.reduce((a, r) => a + r.result, 0);
    // An interval list can overflow under this much disorder; finish() completes those chunks.
    expect(finalized + map.finish()).toBe(lens.length);
    for (let i = 0; i < lens.length; i++) {
      expect(map.status(i)).toBe(ChunkStatus.Ok);
      expect(map.digest(i)).toBe(chunks[i]!.hash);
    }
    expect(map.stats()).toMatchObject({ ok: lens.length, mismatch: 0, bytesHashed: N, segments: segs.length, rewrites: 0 });
    map.free();
  });
});
