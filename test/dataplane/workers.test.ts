// Jobs executed by two real data-plane workers must leave memory and results exactly as the
// same jobs run inline on this thread; CRC jobs are checked against @node-rs/crc32.
import { crc32c as nativeCrc32c } from '@node-rs/crc32';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLACE_DESC_BYTES, PLACE_OUT_BYTES, SG_DESC_BYTES, writePlaceDesc, writeSgDesc } from '../../src/dataplane/descriptors.js';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { type Job, JobOp, JobStatus, kernelFn, REQ_WORDS, runJob } from '../../src/dataplane/jobs.js';
import { DataPlaneWorkers } from '../../src/dataplane/workers.js';

let dm: DeviceMemory;
let workers: DataPlaneWorkers;

beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 8 << 20, maximumBytes: 64 << 20, workerSlots: 2, ringSlots: 16 });
  workers = await DataPlaneWorkers.start(dm, 2);
});

afterAll(async () => {
  await workers.close();
});

function rng(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0), s);
}

function runInline(jobs: Job[]) {
  const w = new Uint32Array(REQ_WORDS);
  return jobs.map((j) => {
    w.fill(0);
    w[0] = j.op;
    for (let x = 0; x < (j.args?.length ?? 0); x++) w[2 + x] = j.args![x]!;
    return runJob(dm.kernels, w, 0);
  });
}

describe('DataPlaneWorkers', () => {
  it('sgCopy and place batches on 2 workers equal the inline run, byte for byte', async () => {
    const r = rng(42);
    const src = dm.alloc(256 * 1024);
    const dst = dm.alloc(256 * 1024);
    const u8 = dm.u8();
    for (let i = 0; i < 256 * 1024; i++) u8[src + i] = r() & 0xff;
    const t = dm.regions;
    const si = t.allocIndex();
    const srcStag = t.nextStag(si);
    t.write(si, { base: src, length: 256 * 1024, stag: srcStag, pd: 1, access: 0 });
    const di = t.allocIndex();
    const dstStag = t.nextStag(di);
    t.write(di, { base: dst, length: 256 * 1024, stag: dstStag, pd: 1, access: 2 });
    // 40 jobs of 1..32 descriptors each, some deliberately out of bounds; each job owns its
    // descriptor and status areas, and jobs write disjoint 4 KiB slices of dst so the order
    // in which the two workers run them does not matter.
    const jobs: Job[] = [];
    const dv = dm.dataView();
    for (let j = 0; j < 40; j++) {
      const count = 1 + (r() % 32);
      const descs = dm.alloc(count * 32);
      const out = dm.alloc(count * 16);
      const slice = dst + j * 4096;
      for (let k = 0; k < count; k++) {
        const len = r() % 200;
        const off = r() % 4096;
        const bad = r() % 7 === 0;
        if (j % 2 === 0) {
          writeSgDesc(dv, descs + k * SG_DESC_BYTES, { src: src + (r() % 200000), dst: bad ? dst + 256 * 1024 - 10 + (len < 11 ? 20 : 0) : slice + Math.min(off, 4096 - len), len, srcIdx: si, dstIdx: di });
        } else {
          writePlaceDesc(dv, descs + k * PLACE_DESC_BYTES, { src: src + (r() % 200000), len, stag: bad ? dstStag ^ 0x80 : dstStag, pd: 1, to: slice + Math.min(off, 4096 - len), access: 2, tag: k });
        }
      }
      jobs.push({ op: j % 2 === 0 ? JobOp.SgCopy : JobOp.Place, args: [descs, count, t.base, t.capacity, out] });
    }
    // Compare the arena only: the rings below it move with every job.
    const arena = dm.map.arenaBase;
    const before = dm.u8().slice(arena);
    const viaWorkers = (await Promise.all([workers.submitBatch(jobs.slice(0, 20), 0), workers.submitBatch(jobs.slice(20), 1)])).flat();
    const afterWorkers = dm.u8().slice(arena);
    dm.u8().set(before, arena);
    const inline = runInline(jobs);
    expect(viaWorkers).toEqual(inline);
    expect(inline.some((x) => x.result > 0)).toBe(true);
    expect(Buffer.compare(Buffer.from(afterWorkers), Buffer.from(dm.u8().subarray(arena)))).toBe(0);
    expect(Buffer.compare(Buffer.from(before), Buffer.from(afterWorkers))).not.toBe(0);
  });

  it('more jobs than ring slots (back-pressure on the request ring) all complete', async () => {
    // Many submitters of one thread wait for room on the same 16-slot ring at once.
    const jobs: Job[] = Array.from({ length: 300 }, () => ({ op: JobOp.Nop }));
    const res = await Promise.all([workers.submitBatch(jobs, 0), workers.submitBatch(jobs, 1), workers.submitBatch(jobs, 0), ...jobs.map((j) => workers.submit(j))]);
    expect(res.flat().every((x) => x.status === JobStatus.Ok)).toBe(true);
  });

  it('unknown ops report Unsupported; a wild pointer reports Fault and the worker lives on', async () => {
    expect((await workers.submit({ op: 999 }, 0)).status).toBe(JobStatus.Unsupported);
    const huge = dm.memory.buffer.byteLength + 4096;
    const r = await workers.submit({ op: JobOp.SgCopy, args: [huge, 1, dm.regions.base, dm.regions.capacity, huge] }, 1);
    expect(r.status).toBe(JobStatus.Fault);
    expect((await workers.submit({ op: JobOp.Nop }, 1)).status).toBe(JobStatus.Ok);
  });

  it('CRC32C batches on 2 workers match @node-rs/crc32 and the inline run', async () => {
      expect(kernelFn(dm.kernels, 'crc32cBatch')).toBeTypeOf('function');
      const chunk = 64 * 1024;
      const n = 32;
      const data = dm.alloc(n * chunk);
      const r = rng(7);
      const u8 = dm.u8();
      for (let i = 0; i < n * chunk; i++) u8[data + i] = r() & 0xff;
      const descs = dm.alloc(n * 16);
      const dv = dm.dataView();
      for (let k = 0; k < n; k++) {
        dv.setUint32(descs + k * 16, data + k * chunk, true);
        dv.setUint32(descs + k * 16 + 4, chunk - k, true);
        dv.setUint32(descs + k * 16 + 8, k === 0 ? 0 : 0x1234_5678, true);
        dv.setUint32(descs + k * 16 + 12, 0, true);
      }
      const half = (n / 2) * 16;
      const res = await Promise.all([
        workers.submit({ op: JobOp.Crc32cBatch, args: [descs, n / 2] }, 0),
        workers.submit({ op: JobOp.Crc32cBatch, args: [descs + half, n / 2] }, 1),
        workers.submit({ op: JobOp.Crc32c, args: [data, n * chunk, 0] }, 0),
      ]);
      expect(res.map((x) => x.status)).toEqual([0, 0, 0]);
      const all = Buffer.from(dm.u8().subarray(data, data + n * chunk));
      expect(res[2]!.result).toBe(nativeCrc32c(all, 0));
      for (let k = 0; k < n; k++) {
        const piece = all.subarray(k * chunk, k * chunk + chunk - k);
        expect(dv.getUint32(descs + k * 16 + 12, true)).toBe(nativeCrc32c(piece, k === 0 ? 0 : 0x1234_5678));
      }
      expect(runInline([{ op: JobOp.Crc32c, args: [data, n * chunk, 0] }])[0]).toEqual(res[2]);
  });

  it('rejects more workers than slots, and a second data plane on the same memory', async () => {
    await expect(DataPlaneWorkers.start(dm, 1)).rejects.toThrow(/already runs/);
    const small = await DeviceMemory.create({ workerSlots: 1, initialBytes: 0, maximumBytes: 4 << 20 });
    await expect(DataPlaneWorkers.start(small, 2)).rejects.toThrow(/worker slots/);
  });
});

describe('the ring slots', () => {
  it('a slot smaller than a job (jobReq) is refused when the map is planned, before a job could spill into the next slot', async () => {
    await expect(DeviceMemory.create({ workerSlots: 1, initialBytes: 0, maximumBytes: 4 << 20, ringSlotBytes: 16 })).rejects.toThrow(/ringSlotBytes/);
    const d = await DeviceMemory.create({ workerSlots: 1, initialBytes: 0, maximumBytes: 4 << 20, ringSlotBytes: 32 });
    const w = await DataPlaneWorkers.start(d, 1);
    expect((await w.submit({ op: JobOp.Nop })).status).toBe(JobStatus.Ok);
    await w.close();
  });
});

describe('DataPlaneWorkers shutdown', () => {
  it('close() finishes in-flight jobs, stops the workers, and rejects later submits', async () => {
    const d = await DeviceMemory.create({ workerSlots: 2, initialBytes: 0, maximumBytes: 4 << 20 });
    const w = await DataPlaneWorkers.start(d, 2);
    const inflight = w.submitBatch(Array.from({ length: 50 }, () => ({ op: JobOp.Nop })), 1);
    await w.close();
    expect((await inflight).length).toBe(50);
    await expect(w.submit({ op: JobOp.Nop })).rejects.toThrow(/closed/);
    // The slots are free again.
    const w2 = await DataPlaneWorkers.start(d, 2);
    expect((await w2.submit({ op: JobOp.Nop })).status).toBe(0);
    await w2.close();
  });
});
