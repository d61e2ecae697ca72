// `sabre perf` against perftest's flags and output: every test name on every transport, and the
// flags an RDMA user reaches for (-A, -b, -N, --report_gbits, -H/-U, --perform_warm_up, -D,
// --write_with_imm / --send_with_imm, -d, --output, --cpu_util, --out_json_file). Small counts:
// these check behaviour, not speed.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sabreAsync } from './helpers.js';

const TESTS = ['write_bw', 'write_lat', 'read_bw', 'read_lat', 'send_bw', 'send_lat', 'atomic_bw', 'atomic_lat'] as const;
type Json = { title: string; transport: string; results: Record<string, number | string>[] };

async function perfJson(args: string[], timeoutMs = 60_000): Promise<Json> {
  const r = await sabreAsync(['perf', ...args, '--json'], timeoutMs);
  if (r.code !== 0) throw new Error(`sabre perf ${args.join(' ')}: exit ${r.code} ${r.timedOut ? '(timed out)' : ''}\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

// Every test name on inproc, and on the wire transports each once, udp and tcp taking turns: a
// wire run forks the bin as its server (two processes starting, ~1.5 s of CPU), and the flags
// below run on both wire transports again.
const CASES = [...TESTS.map((t) => ['inproc', t] as const), ...TESTS.map((t, i) => [i % 2 === 0 ? 'udp' : 'tcp', t] as const)];

describe.concurrent('every perftest test', () => {
  it.for(CASES)('over %s: %s', { timeout: 90_000 }, async ([transport, test], { expect }) => {
    const bw = test.endsWith('_bw');
    const size = test.startsWith('atomic') ? [] : ['-s', bw ? '4096' : '64'];
    const j = await perfJson([test, '--transport', transport, ...size, '-n', bw ? '200' : '50']);
    expect(j.transport).toBe(transport);
    const row = j.results[0]!;
    expect(row.source).toBe('sabre');
    expect(row.iterations).toBe(bw ? 200 : 50);
    expect(row.bytes).toBe(test.startsWith('atomic') ? 8 : bw ? 4096 : 64);
    if (bw) {
      expect(row.bwAvgMiBs).toBeGreaterThan(0);
      expect(row.bwPeakMiBs).toBeGreaterThanOrEqual(row.bwAvgMiBs as number);
      expect(row.cpuSecPerGB).toBeGreaterThan(0);
    } else {
      expect(row.tMin).toBeGreaterThan(0);
      expect(row.tMax).toBeGreaterThanOrEqual(row.tTypical as number);
    }
  });
});

// The flags again on the two wire transports (the cases below mostly run inproc): each a tiny
// run that checks the flag changed what it should, not speed.
describe.concurrent.each(['udp', 'tcp'] as const)('perftest flags over %s', (transport) => {
  const t = ['--transport', transport];
  it('-A CMP_AND_SWAP / FETCH_AND_ADD, --write_with_imm, --send_with_imm', async () => {
    const cas = await perfJson(['atomic_bw', ...t, '-n', '60', '-A', 'CMP_AND_SWAP']);
    expect(cas.title).toBe('Atomic CMP_AND_SWAP BW Test');
    expect(cas.results[0]!.iterations).toBe(60);
    const faa = await perfJson(['atomic_lat', ...t, '-n', '20', '-A', 'FETCH_AND_ADD']);
    expect(faa.title).toBe('Atomic FETCH_AND_ADD Latency Test');
    expect(faa.results[0]!.iterations).toBe(20);
    expect((await perfJson(['write_bw', '--write_with_imm', ...t, '-s', '256', '-n', '60'])).title).toBe('RDMA_Write_imm BW Test');
    const si = await perfJson(['send_lat', '--send_with_imm', ...t, '-s', '64', '-n', '20']);
    expect(si.title).toBe('Send_imm Latency Test');
    expect(si.results[0]!.iterations).toBe(20);
  }, 60_000);

  it('-b sums both directions; -N leaves the peak out; --report_gbits prints Gb/sec', async () => {
    const b = await perfJson(['write_bw', '-b', ...t, '-s', '4096', '-n', '60']);
    expect(b.title).toBe('RDMA_Write Bidirectional BW Test');
    expect(b.results[0]!.iterations).toBe(120);
    const n = (await perfJson(['write_bw', ...t, '-s', '4096', '-n', '60', '-N'])).results[0]!;
    expect(n.bwPeakMiBs).toBe(0);
    expect(n.bwAvgMiBs).toBeGreaterThan(0);
    const g = await sabreAsync(['perf', 'write_bw', ...t, '-s', '4096', '-n', '60', '--report_gbits']);
    expect(g.code, g.stderr).toBe(0);
    expect(g.stdout).toContain('BW peak[Gb/sec]    BW average[Gb/sec]');
  }, 60_000);

  it('-H prints every sample sorted; -D runs for a duration; -d picks the device', async () => {
    const h = await sabreAsync(['perf', 'read_lat', ...t, '-n', '20', '-H']);
    expect(h.code, h.stderr).toBe(0);
    const lines = h.stdout.split('\n');
    const at = lines.indexOf('#, usec');
    expect(at).toBeGreaterThan(0);
    const vals = lines.slice(at + 1, at + 21).map((l) => Number(/^\d+, ([\d.e+-]+)$/.exec(l)?.[1] ?? NaN));
    expect(vals.every((v) => v > 0)).toBe(true);
    expect(vals).toEqual([...vals].sort((x, y) => x - y));
    const t0 = Date.now();
    const d = await perfJson(['write_lat', ...t, '-s', '64', '-D', '0.3']);
    expect(d.results[0]!.iterations).toBeGreaterThan(0);
    expect(Date.now() - t0).toBeLessThan(20_000);
    const dev = await perfJson(['write_lat', '-d', `sabre_${transport}`, '-n', '10']);
    expect(dev.transport).toBe(transport);
    expect(dev.results[0]!.iterations).toBe(10);
  }, 60_000);
});

describe.concurrent('perftest flags', () => {
  it('-A CMP_AND_SWAP and FETCH_AND_ADD name the test as perftest does', async () => {
    expect((await perfJson(['atomic_bw', '--transport', 'inproc', '-n', '100', '-A', 'CMP_AND_SWAP'])).title).toBe('Atomic CMP_AND_SWAP BW Test');
    expect((await perfJson(['atomic_lat', '--transport', 'inproc', '-n', '20', '--atomic_type=FETCH_AND_ADD'])).title).toBe('Atomic FETCH_AND_ADD Latency Test');
    const r = await sabreAsync(['perf', 'atomic_lat', '--transport', 'inproc', '-n', '20', '-A', 'CMP_AND_SWAP']);
    expect(r.stdout).toContain('Atomic CMP_AND_SWAP Latency Test');
  }, 90_000);

  it.each(['inproc', 'udp'])('-b: both sides send, the row sums both directions (%s)', async (transport) => {
    const j = await perfJson(['write_bw', '-b', '--transport', transport, '-s', '4096', '-n', '150']);
    expect(j.title).toBe('RDMA_Write Bidirectional BW Test');
    expect(j.results[0]!.iterations).toBe(300);
    const s = await perfJson(['send_bw', '-b', '--send_with_imm', '--transport', transport, '-s', '1024', '-n', '100']);
    expect(s.title).toBe('Send_imm Bidirectional BW Test');
    expect(s.results[0]!.iterations).toBe(200);
  }, 90_000);

  it('--write_with_imm and --send_with_imm on bandwidth and latency tests', async () => {
    for (const [test, flag, title] of [
      ['write_bw', '--write_with_imm', 'RDMA_Write_imm BW Test'],
      ['write_lat', '--write_with_imm', 'RDMA_Write_imm Latency Test'],
      ['send_bw', '--send_with_imm', 'Send_imm BW Test'],
      ['send_lat', '--send_with_imm', 'Send_imm Latency Test'],
    ] as const) {
      const j = await perfJson([test, flag, '--transport', 'udp', '-s', '256', '-n', test.endsWith('bw') ? '200' : '40']);
      expect(j.title, test).toBe(title);
      expect(j.results[0]!.iterations).toBe(test.endsWith('bw') ? 200 : 40);
    }
  }, 90_000);

  it('-N leaves the peak out; --report_gbits reports Gb/sec', async () => {
    expect((await perfJson(['write_bw', '--transport', 'inproc', '-n', '100', '-N'])).results[0]!.bwPeakMiBs).toBe(0);
    const r = await sabreAsync(['perf', 'write_bw', '--transport', 'inproc', '-n', '100', '--report_gbits']);
    expect(r.stdout).toContain(' #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]');
    const j = await perfJson(['write_bw', '--transport', 'inproc', '-n', '100']);
    const row = j.results[0]!;
    expect(row.bwAvgGbs as number).toBeCloseTo(((row.bwAvgMiBs as number) * 2 ** 20 * 8) / 1e9, 6);
  }, 90_000);

  it('-H prints every sample sorted, -U in the order measured', async () => {
    const r = await sabreAsync(['perf', 'read_lat', '--transport', 'inproc', '-n', '30', '-H']);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n');
    const at = lines.indexOf('#, usec');
    expect(at).toBeGreaterThan(0);
    const vals = lines.slice(at + 1, at + 31).map((l) => {
      const m = /^(\d+), ([\d.e+-]+)$/.exec(l);
      expect(m, l).not.toBeNull();
      return Number(m![2]);
    });
    expect(vals).toEqual([...vals].sort((a, b) => a - b));
    const u = await sabreAsync(['perf', 'read_lat', '--transport', 'inproc', '-n', '30', '-U']);
    expect(u.stdout).toContain('#, usec');
  }, 90_000);

  it('-D runs every test for a duration (iterations counted, not given)', async () => {
    for (const test of TESTS) {
      const t0 = Date.now();
      const j = await perfJson([test, '--transport', 'inproc', '-D', '0.3']);
      expect(j.results[0]!.iterations, test).toBeGreaterThan(0);
      expect(Date.now() - t0, test).toBeLessThan(20_000);
    }
    const u = await perfJson(['send_lat', '--transport', 'udp', '-D', '0.5', '-s', '64']);
    expect(u.results[0]!.iterations).toBeGreaterThan(0);
    const m = await perfJson(['write_bw', '--transport', 'udp', '-D', '1', '-f', '0.2', '-s', '4096']);
    expect(m.results[0]!.iterations).toBeGreaterThan(0);
  }, 90_000);

  it('--perform_warm_up runs first and is not counted', async () => {
    // Latency: up to 5000 untimed round trips or 3 s, whichever ends first; the row says how many ran.
    const j = await perfJson(['read_lat', '--transport', 'udp', '-n', '40', '--perform_warm_up']);
    expect(j.results[0]!.iterations).toBe(40);
    expect(j.results[0]!.warmUpIterations).toBeGreaterThan(0);
    expect(j.results[0]!.warmUpIterations).toBeLessThanOrEqual(5000);
    expect(j.results[0]!.warmUpMs).toBeGreaterThan(0);
    // Bandwidth: tx-depth operations per QP (default 128, capped at -n by the baseline).
    const b = await perfJson(['read_bw', '--transport', 'udp', '-s', '4096', '-n', '100', '--perform_warm_up', '--baseline']);
    expect(b.results.map((r) => r.iterations)).toEqual([100, 100]);
    expect(b.results.map((r) => r.warmUpIterations)).toEqual([128, 100]);
    // Without the flag nothing runs first, and the rows say nothing about it.
    const n = await perfJson(['read_lat', '--transport', 'udp', '-n', '40']);
    expect(n.results[0]!.warmUpIterations).toBeUndefined();
  }, 60_000);

  it('-d picks the device; --output prints only the number; --cpu_util adds a column; --out_json_file writes the report', async () => {
    expect((await perfJson(['write_lat', '-d', 'sabre_tcp', '-n', '20'])).transport).toBe('tcp');
    const o = await sabreAsync(['perf', 'write_bw', '--transport', 'inproc', '-n', '100', '--output=bandwidth']);
    expect(o.stdout.trim()).toMatch(/^\d+\.\d{6}$/);
    const c = await sabreAsync(['perf', 'write_bw', '--transport', 'inproc', '-n', '100', '--cpu_util']);
    expect(c.stdout).toMatch(/CPU\[s\/GB\]\s+CPU_Util\[%\]/);
    const dir = mkdtempSync(join(tmpdir(), 'sabre-json-'));
    const file = join(dir, 'out.json');
    const f = await sabreAsync(['perf', 'send_bw', '--transport', 'inproc', '-n', '100', '--out_json_file', file]);
    expect(f.code, f.stderr).toBe(0);
    expect(JSON.parse(readFileSync(file, 'utf8')).results[0].iterations).toBe(100);
  }, 90_000);

  it('--help names perftest\'s flags, and says which it does not take', async () => {
    const r = await sabreAsync(['perf', '--help']);
    for (const f of ['-A, --atomic_type', '-b, --bidirectional', '-N, --noPeak', '--report_gbits', '-H, --report-histogram', '--perform_warm_up', '-d, --ib-dev', '-D, --duration', '-V, --version', '--write_with_imm', '--send_with_imm', '--metrics-port', '--report'])
      expect(r.stdout, f).toContain(f);
    expect(r.stdout).toMatch(/does not take[\s\S]*--rdma_cm[\s\S]*--use-srq/);
  }, 90_000);
});
