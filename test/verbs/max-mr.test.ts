// openDevice({ maxMr }): the region table holds exactly that many registrations (ibverbs'
// max_mr); one more is refused with ERR_NO_MEMORY, and a freed entry is reusable. Channels need
// two regions per end, so 10,000 channels on one device need maxMr above 20,000.
import { describe, expect, it } from 'vitest';
import { Access, openDevice } from '../../src/index.js';

describe('openDevice maxMr', () => {
  it('registers exactly maxMr regions, refuses the next, reuses a freed entry', async () => {
    const dev = await openDevice({ transport: 'inproc', maxMr: 10 });
    try {
      const pd = dev.allocPd();
      const mrs = Array.from({ length: 10 }, () => pd.regMr(64, Access.LocalWrite));
      expect(() => pd.regMr(64, Access.LocalWrite)).toThrow(expect.objectContaining({ code: 'ERR_NO_MEMORY' }));
      mrs[3]!.deregister();
      expect(pd.regMr(64, Access.LocalWrite).valid).toBe(true);
    } finally {
      await dev.close();
    }
  });

  it('rejects a maxMr out of range', async () => {
    await expect(openDevice({ transport: 'inproc', maxMr: 0 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    await expect(openDevice({ transport: 'inproc', maxMr: 1 << 24 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
  });

  it('a device of 30,000 regions', async () => {
    const dev = await openDevice({ transport: 'inproc', maxMr: 30_000 });
    try {
      const pd = dev.allocPd();
      for (let i = 0; i < 30_000; i++) pd.regMr(64, Access.LocalWrite);
      expect(() => pd.regMr(64, Access.LocalWrite)).toThrow(expect.objectContaining({ code: 'ERR_NO_MEMORY' }));
    } finally {
      await dev.close();
    }
  });
});
