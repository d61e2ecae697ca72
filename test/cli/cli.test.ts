// The `sabre` command as a user runs it: spawned from dist/, tables and JSON checked, exit
// statuses checked (0 clean, 1 on errors or integrity failures, 2 on usage errors).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const MAIN = join(process.cwd(), 'dist', 'cli', 'main.js');

function sabre(args: string[], timeoutMs = 60_000) {
  const r = spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', timeout: timeoutMs });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('sabre usage', () => {
  it('prints help and exits 0', () => {
    const r = sabre(['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/perf <test>/);
    expect(r.stdout).toMatch(/stress/);
  });

  it.each([
    [['bogus'], /unknown command 'bogus'/],
    [['perf'], /perf needs a test/],
    [['perf', 'write_bww'], /test must be one of/],
    [['perf', 'write_bw', '-s', 'abc'], /--size must be an integer/],
    [['perf', 'write_bw', '--frobnicate'], /frobnicate/],
    [['stress', '--workers', '0'], /--workers must be between 1 and 64/],
    [['perf', 'atomic_lat', '-s', '64'], /--size must be 8/],
  ])('usage error %j is one line and exit 2', (args, msg) => {
    const r = sabre(args as string[]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(msg as RegExp);
  });

  it('has help per command', () => {
    for (const c of ['perf', 'stress', 'start', 'kernels']) {
      const r = sabre([c, '--help']);
      expect(r.code, c).toBe(0);
      expect(r.stdout, c).toMatch(new RegExp(`usage: sabre ${c}`));
    }
  });
});

describe('sabre perf (inproc)', () => {
  it('write_bw prints the perftest header block and a bandwidth row', () => {
    const r = sabre(['perf', 'write_bw', '--transport', 'inproc', '-s', '4096', '-n', '300']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('RDMA_Write BW Test');
    expect(r.stdout).toMatch(/Connection type : RC/);
    expect(r.stdout).toMatch(/ local address: LID 0000 QPN 0x[0-9a-f]+ PSN 0x[0-9a-f]+ RKey 0x[0-9a-f]{8} VAddr 0x[0-9a-f]+/);
    expect(r.stdout).toMatch(/ remote address: LID 0000 QPN 0x[0-9a-f]+/);
    expect(r.stdout).toContain(' #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]');
    const row = r.stdout.split('\n').find((l) => /^ 4096\s/.test(l));
    expect(row).toBeDefined();
    const cols = row!.trim().split(/\s+/).map(Number);
    expect(cols[1]).toBe(300);
    expect(cols[3]).toBeGreaterThan(0);
  });

  it.each(['write_lat', 'read_lat', 'send_lat', 'atomic_lat'])('%s prints the latency table', (test) => {
    const r = sabre(['perf', test, '--transport', 'inproc', '-n', '50']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]');
    const size = test === 'atomic_lat' ? 8 : 2;
    const row = r.stdout.split('\n').find((l) => new RegExp(`^ ${size}\\s+50\\s`).test(l));
    expect(row, r.stdout).toBeDefined();
    const cols = row!.trim().split(/\s+/).map(Number);
    expect(cols).toHaveLength(9);
    expect(cols[2]).toBeGreaterThan(0); // t_min
    expect(cols[3]).toBeGreaterThanOrEqual(cols[2]!); // t_max >= t_min
  });

  it.each(['read_bw', 'send_bw'])('%s --json gives one object with the results', (test) => {
    const r = sabre(['perf', test, '--transport', 'inproc', '-s', '1024', '-n', '200', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.test).toBe(test);
    expect(j.results).toHaveLength(1);
    expect(j.results[0].result.bytes).toBe(1024);
    expect(j.results[0].result.iterations).toBe(200);
    expect(j.results[0].result.bwAvgMBs).toBeGreaterThan(0);
  });

  it('--baseline adds a ratio; -a with --plot writes an SVG', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sabre-plot-'));
    const svg = join(dir, 'bw.svg');
    const r = sabre(['perf', 'write_bw', '--transport', 'inproc', '-a', '-n', '20', '--baseline', '--plot', svg, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.results).toHaveLength(23);
    expect(j.results.map((x: { result: { bytes: number } }) => x.result.bytes)).toEqual(Array.from({ length: 23 }, (_, i) => 2 << i));
    for (const row of j.results) expect(row.ratio).toBeGreaterThan(0);
    const text = readFileSync(svg, 'utf8');
    expect(text).toMatch(/^<svg/);
    expect(text).toContain('baseline');
  });
});

describe('sabre stress', () => {
  it('--json reports a clean bounded run', () => {
    const r = sabre(['stress', '--workers', '2', '--qps', '2', '--duration', '3', '--ops', '400', '--max-size', '4096', '--transport', 'inproc', '--seed', '7', '--json']);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.ops).toBeGreaterThan(0);
    expect(j.ops).toBeLessThanOrEqual(400);
    expect(j.bytes).toBeGreaterThan(0);
    expect(j.errors).toBe(0);
    expect(j.integrityFailures).toBe(0);
    expect(j.durationS).toBeLessThan(3 + 10);
  });

  it('an injected integrity failure makes it exit non-zero', () => {
    const r = sabre(['stress', '--workers', '1', '--qps', '1', '--duration', '3', '--ops', '200', '--transport', 'inproc', '--inject-fault', '--json']);
    expect(r.code).toBe(1);
    const j = JSON.parse(r.stdout);
    expect(j.integrityFailures).toBeGreaterThanOrEqual(1);
  });
});
