// The closes below the features that own threads, sockets or files: the metrics HTTP server,
// the kernel pool (piscina), the data-plane workers, the stress worker's completion reaper and a
// jailed file. Each closes once — every call returns the first call's promise, so a caller of
// the second close does not go on before the work is done — and whatever it still owes settles
// with the closed error instead of hanging or surfacing another layer's error.
import fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Reaper, type Wc } from '../../src/cli/stress/reaper.js';
import { ErrorCode } from '../../src/core/errors.js';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { JobOp } from '../../src/dataplane/jobs.js';
import { KernelPool } from '../../src/dataplane/pool.js';
import { DataPlaneWorkers } from '../../src/dataplane/workers.js';
import { Jail, type JailFile } from '../../src/files/jail.js';
import { SabreMetrics } from '../../src/metrics/registry.js';
import { startMetricsServer } from '../../src/metrics/server.js';
import { FileAccess, FileStatus } from '../../src/wire/files-spec.js';
import { tempDir } from '../files/helpers.js';
import { within } from './within.js';

describe('the metrics server', () => {
  it('close twice: one promise; the port is released once it settles', async () => {
    const s = await startMetricsServer(new SabreMetrics(), 0);
    expect((await fetch(s.url)).status).toBe(200);
    const first = s.close();
    const second = s.close();
    expect(second).toBe(first);
    await within(second, 5000);
    await expect(fetch(s.url)).rejects.toThrow();
  });
});

describe('the kernel pool', () => {
  it('a task still running at close rejects with ERR_CLOSED; close twice is one promise', async () => {
    const dm = await DeviceMemory.create({ initialBytes: 1 << 20, maximumBytes: 4 << 20, workerSlots: 0 });
    const pool = new KernelPool(dm, { threads: 1 });
    const buf = dm.alloc(64 << 10);
    const running = pool.run('crc32c', [buf, 64 << 10, 0]);
    const first = pool.close();
    expect(pool.close()).toBe(first);
    await expect(within(running, 5000)).rejects.toMatchObject({ code: ErrorCode.Closed });
    await within(first, 10_000);
    await expect(pool.run('crc32c', [buf, 1, 0])).rejects.toMatchObject({ code: ErrorCode.Closed });
  });
});

describe('the data-plane workers', () => {
  it('close twice is one promise, and neither settles before the workers have let go of the memory', async () => {
    const dm = await DeviceMemory.create({ workerSlots: 2, initialBytes: 0, maximumBytes: 4 << 20 });
    const w = await DataPlaneWorkers.start(dm, 2);
    const first = w.close();
    const second = w.close();
    expect(second).toBe(first);
    await within(second, 15_000);
    // The memory's worker slots are free once any close has settled.
    const again = await DataPlaneWorkers.start(dm, 2);
    expect((await again.submit({ op: JobOp.Nop })).status).toBe(0);
    await again.close();
    await expect(w.submit({ op: JobOp.Nop })).rejects.toMatchObject({ code: ErrorCode.Closed });
  });
});

describe("the stress worker's reaper", () => {
  /** A CQ that never completes anything. */
  const idleCq = { poll: (): Wc[] => [], wait: (ms = 100) => new Promise<void>((r) => setTimeout(r, Math.min(ms, 20))) };

  it('a completion still expected at stop rejects with ERR_CLOSED; stop twice is one promise', async () => {
    const r = new Reaper(idleCq);
    const waiting = r.expect(7);
    const first = r.stop();
    expect(r.stop()).toBe(first);
    await expect(within(waiting, 2000)).rejects.toMatchObject({ code: ErrorCode.Closed });
    await within(first, 2000);
    await expect(r.expect(8)).rejects.toMatchObject({ code: ErrorCode.Closed });
  });

  it('a completion that arrives reaches its waiter', async () => {
    const wc: Wc = { wrId: 3, status: 0, opcode: 0, byteLen: 5 };
    let queued: Wc[] = [wc];
    const r = new Reaper({ poll: () => queued.splice(0), wait: () => new Promise<void>((res) => setTimeout(res, 5)) });
    await expect(within(r.expect(3), 2000)).resolves.toBe(wc);
    queued = [];
    await r.stop();
  });
});

describe.skipIf(!fs.existsSync('/proc/self/fd'))('a jailed file', () => {
  it('a second close shares the first: it settles only after the committed rename, with its status', async () => {
    const dir = fs.realpathSync(tempDir('closers'));
    try {
      const jail = await Jail.open(dir);
      const o = await jail.open(['put.bin'], FileAccess.Write | FileAccess.Create | FileAccess.Replace, 0o644, false);
      expect(o.status).toBe(FileStatus.Success);
      const f = (o as { file: JailFile }).file;
      await f.write(new Uint8Array([1, 2, 3]), 0);
      const first = f.close(true);
      // The connection's teardown closing every file races the request's close.
      const second = f.close(false);
      expect(second).toBe(first);
      expect(await within(second, 5000)).toBe(FileStatus.Success);
      expect([...fs.readFileSync(join(dir, 'put.bin'))]).toEqual([1, 2, 3]);
      expect(fs.readdirSync(dir)).toEqual(['put.bin']);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
