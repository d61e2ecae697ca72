// The lifecycle every closable object above verbs shares (src/core/lifecycle.ts) and the outbox
// the sans-I/O cores queue their outputs in (src/core/sans-io.ts).
import { describe, expect, it } from 'vitest';
import { SabreError } from '../../src/core/errors.js';
import { Lifecycle } from '../../src/core/lifecycle.js';
import { Outbox } from '../../src/core/sans-io.js';

describe('Lifecycle', () => {
  it('owes again after every owed promise settled (the empty table is dropped): a later one still rejects at end()', async () => {
    const l = new Lifecycle();
    const first = l.owe<number>();
    first.settle.resolve(1);
    expect(await first.promise).toBe(1);
    const second = l.owe<void>();
    const third = l.owe<void>();
    third.settle.resolve();
    l.end(new SabreError('ERR_CLOSED' as never, 'gone'));
    await expect(second.promise).rejects.toThrow('gone');
    await third.promise;
  });

  it('close runs its work once and every call returns the same promise, resolved at end()', async () => {
    const l = new Lifecycle();
    let runs = 0;
    let seenClosing = false;
    const p1 = l.close(() => {
      runs++;
      seenClosing = l.closing;
    });
    const p2 = l.close(() => {
      runs++;
    });
    expect(p2).toBe(p1);
    expect(runs).toBe(1);
    expect(seenClosing, 'closing is true while the close work runs').toBe(true);
    let done = false;
    void p1.then(() => (done = true));
    await new Promise((r) => setTimeout(r, 5));
    expect(done, 'not before end()').toBe(false);
    l.end();
    await p1;
    expect(l.ended).toBe(true);
    expect(l.close(() => void runs++)).toBe(p1);
    expect(runs).toBe(1);
  });

  it('every promise still owed at end() rejects with ERR_CLOSED; settled ones are forgotten', async () => {
    const l = new Lifecycle();
    const a = l.owe<number>();
    const b = l.owe<number>();
    a.settle.resolve(7);
    l.end();
    await expect(a.promise).resolves.toBe(7);
    await expect(b.promise).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    expect((await b.promise.catch((e) => e)) instanceof SabreError).toBe(true);
    // Owed after the end: rejected at once.
    await expect(l.owe<void>().promise).rejects.toMatchObject({ code: 'ERR_CLOSED' });
  });

  it('the object\'s own closed error and its failure win over ERR_CLOSED', async () => {
    const l = new Lifecycle(() => new SabreError('ERR_FILE_CLOSED', 'the client is closed'));
    const a = l.owe<void>();
    l.end();
    await expect(a.promise).rejects.toMatchObject({ code: 'ERR_FILE_CLOSED' });
    const m = new Lifecycle();
    const b = m.owe<void>();
    m.end(new SabreError('ERR_PROTOCOL', 'the peer broke a rule'));
    await expect(b.promise).rejects.toMatchObject({ code: 'ERR_PROTOCOL' });
  });

  it('end() before close(): close resolves at once', async () => {
    const l = new Lifecycle();
    l.end();
    await l.close(() => {});
  });
});

describe('Outbox', () => {
  it('polls in push order, undefined when empty, and takes pushes made while draining', () => {
    const o = new Outbox<number>();
    expect(o.poll()).toBeUndefined();
    o.push(1);
    o.push(2);
    const got: number[] = [];
    for (let x = o.poll(); x !== undefined; x = o.poll()) {
      got.push(x);
      if (x === 1) o.push(3);
    }
    expect(got).toEqual([1, 2, 3]);
    expect(o.length).toBe(0);
    o.push(5);
    o.unshift(4);
    expect(o.peekAll()).toEqual([4, 5]);
    expect(o.poll()).toBe(4);
    o.unshift(9);
    expect([o.poll(), o.poll(), o.poll()]).toEqual([9, 5, undefined]);
  });
});
