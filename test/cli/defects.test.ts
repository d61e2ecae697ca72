// The defects of issue #17, one test each, as a user meets them. Each of these failed on the
// code before the fix (noted in the commit that fixed it).
import { describe, expect, it } from 'vitest';
import { freePort, holdPort, sabre, sabreBg } from './helpers.js';

describe('#17 defects', () => {
  it('--server on a port already in use: one clear error, exit 1, no hang', async () => {
    const held = await holdPort();
    try {
      const r = sabre(['perf', 'write_bw', '--server', '-p', String(held.port)], 15_000);
      expect(r.timedOut, 'the server hung').toBe(false);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`port ${held.port}.*in use`));
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
    } finally {
      await held.close();
    }
  });

  it('-c srd --transport tcp: a usage error at once, exit 2, no hang, no server left behind', () => {
    const r = sabre(['perf', 'write_bw', '-c', 'srd', '--transport', 'tcp', '-n', '10'], 15_000);
    expect(r.timedOut, 'the client hung').toBe(false);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/srd.*(udp|datagram)/i);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('the --server side advertises the address the client reached it at, and prints its own table', async () => {
    const port = await freePort();
    const server = sabreBg(['perf', 'write_bw', '--server', '-p', String(port), '--transport', 'udp']);
    try {
      await server.waitFor(/Waiting for client/);
      // 127.0.0.2 is this host too, but not the 127.0.0.1 the old server always bound its device to.
      const c = sabre(['perf', 'write_bw', '127.0.0.2', '-p', String(port), '--transport', 'udp', '-s', '4096', '-n', '50', '--json'], 30_000);
      expect(c.code, c.stderr).toBe(0);
      const j = JSON.parse(c.stdout);
      expect(j.remote.address.host).toBe('127.0.0.2');
      expect(await server.exited).toBe(0);
      expect(server.out()).toContain('RDMA_Write BW Test');
      expect(server.out()).toMatch(/#bytes\s+#iterations\s+BW peak/);
      expect(server.out()).toMatch(/^ 4096\s+50\s+\d/m);
    } finally {
      server.child.kill('SIGKILL');
    }
  });

  it('an unknown option is our one-line error, not node\'s parseArgs advice; --version and -V work', () => {
    for (const args of [['perf', 'write_bw', '--frobnicate'], ['perf', 'write_bw', '-k'], ['stress', '--nope']]) {
      const r = sabre(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).not.toMatch(/positional argument/);
      expect(r.stderr).toMatch(/unknown option '(--frobnicate|-k|--nope)'.*sabre (perf|stress) --help/);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
    }
    for (const args of [['--version'], ['-V'], ['perf', '-V'], ['perf', 'write_bw', '--version']]) {
      const r = sabre(args);
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout).toMatch(/^sabre \d+\.\d+\.\d+/);
    }
  });

  it('baseline rows: labelled iterations, a measured BW peak, sabre÷baseline speed in one direction', () => {
    const bw = sabre(['perf', 'write_bw', '--transport', 'inproc', '-s', '65536', '-n', '400', '--baseline']);
    expect(bw.code, bw.stderr).toBe(0);
    const base = bw.stdout.split('\n').find((l) => l.includes('baseline'))!;
    expect(base, bw.stdout).toBeDefined();
    const cols = base.trim().split(/\s+/);
    expect(Number(cols[2]), 'BW peak of the baseline').toBeGreaterThan(0);
    expect(base).toMatch(/#iterations = /);
    const bj = JSON.parse(sabre(['perf', 'write_bw', '--transport', 'inproc', '-s', '65536', '-n', '400', '--baseline', '--json']).stdout);
    const lj = JSON.parse(sabre(['perf', 'read_lat', '--transport', 'inproc', '-s', '4096', '-n', '200', '--baseline', '--json']).stdout);
    const pair = (j: { results: Record<string, number | string>[] }) => [j.results.find((r) => r.source === 'sabre')!, j.results.find((r) => r.source !== 'sabre')!];
    const [bs, bb] = pair(bj);
    const [ls, lb] = pair(lj);
    // >1 means sabre was faster, for bandwidth and latency alike.
    expect(bb!.speedRatio).toBeCloseTo((bs!.bwAvgMiBs as number) / (bb!.bwAvgMiBs as number), 6);
    expect(lb!.speedRatio).toBeCloseTo((lb!.tTypical as number) / (ls!.tTypical as number), 6);
  });

  it('the raw read_lat baseline moves the size one way, as a read does (not an echo of it)', () => {
    const j = JSON.parse(sabre(['perf', 'read_lat', '--transport', 'tcp', '-s', '131072', '-n', '20', '--baseline', '--json'], 60_000).stdout);
    const b = j.results.find((r: { source: string }) => r.source === 'node:net');
    expect(b.iterations).toBe(20);
    expect(b.bytesToResponder).toBeLessThan(20 * 100);
    expect(b.bytesFromResponder).toBe(20 * 131072);
  });

  it('the latency table stays aligned from 1 MiB up', () => {
    const r = sabre(['perf', 'read_lat', '--transport', 'inproc', '-a', '-n', '5']);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n');
    const head = lines.find((l) => l.includes('#bytes'))!;
    const labels = ['#bytes', '#iterations', 't_min', 't_max', 't_typical', 't_avg', 't_stdev', '99%', '99.9%'];
    const at = labels.map((l) => head.indexOf(l));
    const rows = lines.filter((l) => /^ \d+\s/.test(l));
    expect(rows).toHaveLength(23);
    for (const row of rows) {
      const starts = [...row.matchAll(/\S+/g)].map((m) => m.index);
      expect(starts, row).toEqual(at);
    }
  });

  it('--json rows are flat objects', () => {
    const j = JSON.parse(sabre(['perf', 'send_bw', '--transport', 'inproc', '-s', '1024', '-n', '100', '--json']).stdout);
    expect(j.results[0]).not.toHaveProperty('result');
    expect(j.results[0]).toMatchObject({ source: 'sabre', bytes: 1024, iterations: 100 });
    for (const v of Object.values(j.results[0])) expect(typeof v === 'object' && v !== null).toBe(false);
  });
});
