// The perf server's report call against hostile rows (found by an audit; seen failing first):
// rows were kept without bound (any number of report calls, each row stored for --json), and a
// row of the right alphabet but without the numbers rowLine prints came back as a raw TypeError
// ("Cannot read properties of undefined") after it had been stored. Now report needs a hello,
// takes at most two rows a call and two per size of the run, and checks every row's numbers first.
import { afterEach, describe, expect, it } from 'vitest';
import { type Bg, exitWithin, helloed, kill, rawControl, startPerfServer } from './perf-hostile-helpers.js';

let bg: Bg | undefined;
afterEach(async () => {
  if (bg) await kill(bg);
  bg = undefined;
});

const bwRow = { source: 'sabre', kind: 'bw', bytes: 65536, iterations: 100, seconds: 0.1, bwPeakMiBs: 1, bwAvgMiBs: 1, bwPeakGbs: 1, bwAvgGbs: 1, msgRateMpps: 0.1 };

describe('perf server: report', () => {
  it('a row without the numbers rowLine prints is "report: a malformed row" (not a TypeError) and is not kept', async () => {
    const s = await startPerfServer('write_bw', 'tcp', ['--json']);
    bg = s.bg;
    const c = await helloed(s.port);
    for (const [i, row] of [{ source: 'sabre', kind: 'bw' }, { ...bwRow, bwAvgMiBs: 'x' }, { ...bwRow, kind: 'lat' }, { ...bwRow, speedRatio: null }, { ...bwRow, source: '\u001b[2J' }].entries()) {
      c.call(10 + i, 'report', { rows: [row] });
      expect((await c.answer(10 + i))?.error, JSON.stringify(row)).toBe('report: a malformed row');
    }
    c.call(20, 'report', { rows: [bwRow] });
    expect((await c.answer(20))?.result).toBe(null);
    c.call(21, 'bye');
    await c.answer(21);
    c.sock.end();
    expect(await exitWithin(s.bg, 10_000)).toBe(0);
    const j = JSON.parse(s.bg.out().trim().split('\n').pop()!);
    expect(j.results).toHaveLength(1);
  }, 30_000);

  it('rows are bounded: at most 2 a call and 2 per size in the run, refusals counted in the server\'s --json', async () => {
    const s = await startPerfServer('write_bw', 'tcp', ['--json']);
    bg = s.bg;
    const c = await helloed(s.port, { sizes: [4096, 65536] });
    c.call(2, 'report', { rows: [bwRow, bwRow, bwRow] });
    expect((await c.answer(2))?.error).toMatch(/^report: at most 2 rows a call and 4 in the run/);
    let id = 10;
    for (let i = 0; i < 2; i++) {
      c.call(++id, 'report', { rows: [bwRow, bwRow] });
      expect((await c.answer(id))?.result).toBe(null);
    }
    for (let i = 0; i < 50; i++) {
      c.call(++id, 'report', { rows: [bwRow] });
      expect((await c.answer(id))?.error).toMatch(/^report: at most/);
    }
    c.call(++id, 'bye');
    await c.answer(id);
    c.sock.end();
    expect(await exitWithin(s.bg, 10_000)).toBe(0);
    const j = JSON.parse(s.bg.out().trim().split('\n').pop()!);
    expect(j.results).toHaveLength(4);
    expect(j.refused.rows).toBe(51);
  }, 30_000);

  it('report before hello is refused', async () => {
    const s = await startPerfServer('write_bw', 'tcp');
    bg = s.bg;
    const c = await rawControl(s.port);
    c.call(1, 'report', { rows: [bwRow] });
    expect((await c.answer(1, 5000))?.error).toBe('the first call must be hello');
  }, 30_000);
});
