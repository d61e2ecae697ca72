import { crc32c as nativeCrc32c } from '@node-rs/crc32';
import { describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { KernelPool } from '../../src/dataplane/pool.js';

describe('KernelPool (piscina over the device memory)', () => {
  it('bulk CRC32C of chunks on 2 pool threads matches @node-rs/crc32; kernels mutate the shared bytes', async () => {
    const dm = await DeviceMemory.create({ initialBytes: 8 << 20, maximumBytes: 16 << 20, workerSlots: 0 });
    const pool = new KernelPool(dm, { threads: 2 });
    try {
      const len = 3 * 1024 * 1024 + 12345;
      const buf = dm.alloc(len);
      const u8 = dm.u8();
      let s = 1;
      for (let i = 0; i < len; i++) u8[buf + i] = (s = (Math.imul(s, 1103515245) + 12345) >>> 0) >>> 24;
      const chunk = 256 * 1024;
      const crcs = await pool.crc32cChunks(buf, len, chunk);
      expect(crcs.length).toBe(Math.ceil(len / chunk));
      const bytes = Buffer.from(dm.u8().subarray(buf, buf + len));
      crcs.forEach((c, k) => expect(c).toBe(nativeCrc32c(bytes.subarray(k * chunk, Math.min(len, (k + 1) * chunk)))));
      // A whole-buffer task, and an sgCopy task whose effect this thread must see.
      expect((await pool.run('crc32c', [buf, len, 0])) as number >>> 0).toBe(nativeCrc32c(bytes));
      const t = dm.regions;
      const i = t.allocIndex();
      t.write(i, { base: buf, length: len, stag: t.nextStag(i), pd: 1, access: 0 });
      const desc = dm.alloc(64);
      const dv = dm.dataView();
      [buf + 10, buf + 1000, 500, i, i].forEach((v, k) => dv.setUint32(desc + 4 * k, v, true));
      expect(await pool.run('sgCopy', [desc, 1, t.base, t.capacity, desc + 32])).toBe(1);
      expect(Buffer.compare(Buffer.from(dm.u8().subarray(buf + 1000, buf + 1500)), bytes.subarray(10, 510))).toBe(0);
      await expect(pool.run('nope', [])).rejects.toThrow(/no kernel/);
    } finally {
      await pool.close();
    }
    await expect(pool.run('crc32c', [0, 0, 0])).rejects.toThrow(/closed/);
  });
});
