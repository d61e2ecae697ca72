// The server's dedup limits are checked where they are given: a NaN, fractional, zero or
// negative dedupMaxTransfers or dedupMaxBytes would otherwise make its cap compare false and
// let any number of transfers, each holding up to twice dedupMaxBytes, run at once.
import { describe, expect, it } from 'vitest';
import { serveFiles } from '../../src/index.js';
import { tempDir } from './helpers.js';

describe('serveFiles: dedup limits', () => {
  it.each([
    ['dedupMaxTransfers', Number.NaN],
    ['dedupMaxTransfers', -1],
    ['dedupMaxTransfers', 0],
    ['dedupMaxTransfers', 2.5],
    ['dedupMaxBytes', Number.NaN],
    ['dedupMaxBytes', -4096],
    ['dedupMaxBytes', Infinity],
  ] as const)('%s = %s → ERR_INVALID_ARGUMENT before anything is opened', async (key, value) => {
    const dir = tempDir('dedup-opts');
    await expect(serveFiles(dir, { transports: ['udp'], [key]: value })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining(key) });
  });

  it('positive integers are taken', async () => {
    const srv = await serveFiles(tempDir('dedup-opts'), { transports: ['udp'], dedupMaxTransfers: 2, dedupMaxBytes: 1 << 20 });
    await srv.close();
  });
});
