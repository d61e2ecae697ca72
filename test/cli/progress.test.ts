// The live status line: drawn in place on a terminal, throttled, erased at the end; nothing at
// all when stderr is a pipe (and the commands' piped stderr stays clean).
import { describe, expect, it } from 'vitest';
import { Progress } from '../../src/cli/progress.js';
import { sabre } from './helpers.js';

function sink(isTTY: boolean) {
  const writes: string[] = [];
  return { isTTY, writes, write: (s: string) => writes.push(s) };
}

describe('Progress', () => {
  it('on a terminal: redraws in place, at most every interval, and erases itself', () => {
    let t = 0;
    const s = sink(true);
    const p = new Progress(s, 250, () => t);
    p.update('a');
    t = 100;
    p.update('b'); // throttled
    t = 300;
    p.update('c');
    p.update('d', true);
    p.done();
    expect(s.writes).toEqual(['\ra\x1b[K', '\rc\x1b[K', '\rd\x1b[K', '\r\x1b[K']);
  });

  it('piped: writes nothing', () => {
    const s = sink(false);
    const p = new Progress(s);
    p.update('a', true);
    p.done();
    expect(s.writes).toEqual([]);
  });

  it('sabre perf -a and stress leave a piped stderr empty', () => {
    const a = sabre(['perf', 'write_bw', '--transport', 'inproc', '-a', '-n', '5']);
    expect(a.code, a.stderr).toBe(0);
    expect(a.stderr).toBe('');
    const s = sabre(['stress', '--workers', '1', '--qps', '1', '--duration', '1', '--ops', '50', '--transport', 'inproc']);
    expect(s.stderr).toBe('');
  });
});
