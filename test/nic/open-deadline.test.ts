// openDevice waits for its NIC thread to report the link open. A thread that never answers (stuck
// loading, a deadlock in its start) used to hang openDevice for good; now the wait has a deadline
// (SABRE_NIC_START_MS, default 30 s): openDevice rejects ERR_TIMEOUT and the thread is ended.
import { fileURLToPath } from 'node:url';
import type { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openDevice } from '../../src/index.js';
import { within } from '../lifecycle/within.js';

const started: Worker[] = [];
vi.mock('../../src/nic/thread-start.js', async (orig) => {
  const real = await orig<typeof import('../../src/nic/thread-start.js')>();
  return {
    ...real,
    threadScript: () => fileURLToPath(new URL('./silent-nic.mjs', import.meta.url)),
    startNicWorker: (script: string, o: Parameters<typeof real.startNicWorker>[1]) => {
      const w = real.startNicWorker(script, o);
      started.push(w);
      return w;
    },
  };
});

afterEach(() => {
  delete process.env['SABRE_NIC_START_MS'];
});

describe('a NIC thread that never reports its link open', () => {
  it.each(['udp', 'tcp'] as const)('%s: openDevice rejects ERR_TIMEOUT at its deadline and the thread is ended', { timeout: 20_000 }, async (transport) => {
    process.env['SABRE_NIC_START_MS'] = '300';
    const opened = openDevice({ transport, host: '127.0.0.1', port: 0, workers: 1 }).catch((e: unknown) => e);
    const err = await within(opened, 8_000);
    expect(err).toMatchObject({ code: 'ERR_TIMEOUT' });
    const w = started.at(-1)!;
    await within(new Promise((r) => (w.threadId === -1 ? r(undefined) : w.once('exit', r))), 5_000);
  });
});
