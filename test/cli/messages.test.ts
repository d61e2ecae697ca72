// What the CLI and the API say when a user gets something wrong or small: the message names
// the real problem (a negative number is out of range, not a missing value; an empty token is
// refused, not replaced), and numbers read as a person writes them.
import { describe, expect, it } from 'vitest';
import { Access, openDevice, WorkRequestError } from '../../src/index.js';
import { formatRate } from '../../src/cli/table.js';
import { sabre } from './helpers.js';

describe('CLI messages', () => {
  it('a negative number is out of range, not "needs a value"', () => {
    for (const args of [['perf', 'write_bw', '-s', '-5'], ['perf', 'write_bw', '--duration', '-1'], ['serve', '.', '-p', '-4']]) {
      const r = sabre(args, 15_000);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).not.toMatch(/needs a value/);
      expect(r.stderr).toMatch(/must be .*got '-\d'/);
    }
  });

  it('serve --token "" is refused, not a random token', () => {
    const r = sabre(['serve', '.', '--token', ''], 15_000);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--token is empty/);
    expect(r.stdout).not.toMatch(/token:/);
  });

  it('one worker is "1 worker"', () => {
    const r = sabre(['stress', '--workers', '1', '--qps', '1', '--duration', '0.5', '--transport', 'inproc'], 30_000);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/1 worker x 1 QP pair,/);
  });

  it('rates in the unit that shows them', () => {
    expect(formatRate(340_200)).toBe('340.2 kB/s');
    expect(formatRate(12)).toBe('12 B/s');
    expect(formatRate(2.5e6)).toBe('2.5 MB/s');
    expect(formatRate(3.21e9)).toBe('3.21 GB/s');
    expect(formatRate(Number.NaN)).toBe('0 B/s');
  });
});

describe('API messages', () => {
  it('regMr of more than a region holds says so', async () => {
    const dev = await openDevice({ transport: 'inproc' });
    try {
      expect(() => dev.allocPd().regMr(8 * 2 ** 30, Access.LocalWrite)).toThrow(/8589934592 is more than one region holds/);
      expect(() => dev.allocPd().regMr(-1, Access.LocalWrite)).toThrow(/positive integer.*not -1/);
    } finally {
      await dev.close();
    }
  });

  it('a promise helper\'s failed work request is named by its operation, not an internal wrId', async () => {
    const a = await openDevice({ transport: 'inproc' });
    const b = await openDevice({ transport: 'inproc' });
    try {
      const pa = a.allocPd(), pb = b.allocPd();
      const ca = a.createCq({ depth: 16 }), cb = b.createCq({ depth: 16 });
      const qa = pa.createQp({ type: 'rc', sendCq: ca, recvCq: ca, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
      const qb = pb.createQp({ type: 'rc', sendCq: cb, recvCq: cb, maxSendWr: 4, maxRecvWr: 4, maxSge: 1 });
      await Promise.all([qa.connect({ address: b.address, qpn: qb.qpn }), qb.connect({ address: a.address, qpn: qa.qpn })]);
      const src = pa.regMr(64, Access.LocalWrite);
      const dst = pb.regMr(64, Access.LocalWrite); // no RemoteWrite: the write is refused
      const err = await qa.write({ sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WorkRequestError);
      expect((err as Error).message).toMatch(new RegExp(`^RdmaWrite on QP ${qa.qpn} completed with RemAccessErr`));
      expect((err as Error).message).not.toMatch(/1844674407/);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('a reader that goes away', () => {
  it('`sabre … | head -1`: exit quietly on EPIPE, no unhandled error', async () => {
    const { spawn } = await import('node:child_process');
    const { MAIN } = await import('./helpers.js');
    const child = spawn(process.execPath, [MAIN, 'perf', 'write_bw', '--transport', 'inproc', '-s', '4096', '-n', '2000'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    // Take the first output, then close our end of the pipe (as head -1 does).
    await new Promise<void>((r) => child.stdout.once('data', () => r()));
    child.stdout.destroy();
    const t = setTimeout(() => child.kill('SIGKILL'), 30_000);
    const code = await new Promise<number | null>((r) => child.once('close', (c) => r(c)));
    clearTimeout(t);
    expect(err).not.toMatch(/EPIPE|Unhandled/);
    expect(code).toBe(0);
  });
});
