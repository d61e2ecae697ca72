// The work request ids a NIC-thread QP keeps by token (src/nic/wr-ids.ts): a ring from the
// oldest token still held. Receives may complete out of order (srd), sends retire in order and
// unsignaled ones never complete; tokens are uint32 counts that wrap.
import { describe, expect, it } from 'vitest';
import { WrIdWindow } from '../../src/nic/wr-ids.js';

describe('WrIdWindow', () => {
  it('gives each id back once, in order or not, and forgets the span as the oldest complete', () => {
    const w = new WrIdWindow();
    for (let t = 0; t < 13; t++) w.put(t, 100 + t);
    expect(w.span).toBe(13);
    expect(w.take(5)).toBe(105);
    expect(w.take(5)).toBeUndefined();
    expect(w.span).toBe(13); // a hole behind token 0
    expect(w.take(0)).toBe(100);
    expect(w.span).toBe(12);
    for (const t of [4, 3, 2, 1]) expect(w.take(t)).toBe(100 + t);
    // 0..5 all taken: the window starts at 6.
    expect(w.span).toBe(7);
    expect(w.take(99)).toBeUndefined();
    for (let t = 6; t < 13; t++) expect(w.take(t)).toBe(100 + t);
    expect(w.span).toBe(0);
    w.put(13, 7n);
    expect(w.take(13)).toBe(7n);
  });

  it('grows past its ring with an old receive still held, keeping every id', () => {
    const w = new WrIdWindow();
    w.put(0, 'stuck' as never);
    for (let t = 1; t < 100; t++) {
      w.put(t, t);
      expect(w.take(t)).toBe(t);
    }
    expect(w.span).toBe(100);
    for (let t = 100; t < 140; t++) w.put(t, t);
    expect(w.take(0)).toBe('stuck');
    expect(w.span).toBe(40);
    for (let t = 100; t < 140; t++) expect(w.take(t)).toBe(t);
    expect(w.span).toBe(0);
  });

  it('a send completion drops the unsignaled sends before it; the retired count drops the rest', () => {
    const w = new WrIdWindow();
    for (let t = 0; t < 10; t++) w.put(t, t);
    expect(w.takeThrough(6)).toBe(6);
    expect(w.span).toBe(3);
    expect(w.take(2)).toBeUndefined();
    w.dropBefore(9);
    expect(w.span).toBe(1);
    expect(w.takeThrough(9)).toBe(9);
    w.dropBefore(50); // beyond what is held: nothing left
    expect(w.span).toBe(0);
  });

  it('tokens that wrap past 2^32 keep their ids', () => {
    const w = new WrIdWindow();
    const first = 0xffff_fffa;
    for (let i = 0; i < 12; i++) w.put((first + i) >>> 0, i);
    expect(w.take(2)).toBe(8); // token 2 is the ninth after 0xfffffffa
    expect(w.takeThrough(0xffff_fffe)).toBe(4);
    expect(w.span).toBe(7);
    for (let i = 5; i < 12; i++) if (i !== 8) expect(w.take((first + i) >>> 0)).toBe(i);
    expect(w.span).toBe(0);
  });

  it('clear() forgets everything; the next put starts the window afresh', () => {
    const w = new WrIdWindow();
    for (let t = 0; t < 6; t++) w.put(t, t);
    w.clear();
    expect(w.span).toBe(0);
    expect(w.take(3)).toBeUndefined();
    w.put(0, 42);
    expect(w.take(0)).toBe(42);
  });
});
