// The slow-path mailbox (src/nic/mailbox.ts): this thread is the application side and blocks in
// Atomics.wait; a worker serves, as the NIC thread will, either with start() (waitAsync on its
// event loop) or with poll() from a busy loop. Values round-trip through msgpack (bigint and
// Uint8Array included), error codes cross, a late reply after a timeout is not taken for the
// next call's, sizes past the areas fail with ERR_LIMIT_EXCEEDED, and stop() lets the thread exit.
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, SabreError } from '../../src/core/errors.js';
import { createMailbox, MailboxClient, wasUnanswered } from '../../src/nic/mailbox.js';

const mailboxUrl = new URL('../../dist/nic/mailbox.js', import.meta.url).href;
const errorsUrl = new URL('../../dist/core/errors.js', import.meta.url).href;

// mode 'start': serve with start(); mode 'poll': a synchronous loop calling poll() until 'stop'
// (or 20 s). The 'stop' op stops the server from inside a handler; its reply still goes out.
const SERVER = `
const { workerData, parentPort } = require('node:worker_threads');
Promise.all([import(workerData.mailboxUrl), import(workerData.errorsUrl)]).then(([{ MailboxServer, markMailboxGone }, { SabreError }]) => {
  const nap = new Int32Array(new SharedArrayBuffer(4));
  let polling = workerData.mode === 'poll';
  const server = new MailboxServer(workerData.sab, (op, a) => {
    switch (op) {
      case 'echo': return a;
      case 'sabre': throw new SabreError(a.code, a.message);
      case 'boom': throw new TypeError('kaput');
      case 'throwString': throw 'just a string';
      case 'sleep': Atomics.wait(nap, 0, 0, a.ms); return a.tag;
      case 'big': return new Uint8Array(a.n);
      case 'later': return new Promise((res) => setTimeout(() => res(a.v), a.ms));
      case 'laterFail': return new Promise((_, rej) => setTimeout(() => rej(new SabreError('ERR_CLOSED', 'gone')), a.ms));
      case 'stop': server.stop(); polling = false; return 'stopped';
      // As the NIC thread does: whatever ends the thread, the mailbox says nobody will answer.
      case 'crashSoon': process.on('exit', () => markMailboxGone(workerData.sab)); setTimeout(() => { throw new Error('crashed'); }, a.ms); return 'soon';
      default: throw new SabreError('ERR_NOT_SUPPORTED', 'no op ' + op);
    }
  });
  parentPort.postMessage('ready');
  if (!polling) { server.start(); return; }
  const end = Date.now() + 20000;
  let served = 0;
  while (polling && Date.now() < end) if (server.poll()) served++;
  parentPort.postMessage({ served });
});`;

function serve(sab: SharedArrayBuffer, mode: 'start' | 'poll'): { worker: Worker; ready: Promise<unknown>; exited: Promise<number>; messages: unknown[] } {
  const worker = new Worker(SERVER, { eval: true, workerData: { sab, mode, mailboxUrl, errorsUrl } });
  const messages: unknown[] = [];
  const ready = new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  worker.on('message', (m) => messages.push(m));
  const exited = new Promise<number>((resolve) => worker.once('exit', resolve));
  return { worker, ready, exited, messages };
}

const thrown = (f: () => unknown): SabreError => {
  try {
    f();
  } catch (e) {
    if (e instanceof SabreError) return e;
    throw e;
  }
  throw new Error('did not throw');
};

describe('mailbox, one thread', () => {
  it('checks its buffer and its size', () => {
    expect(thrown(() => createMailbox(100)).code).toBe(ErrorCode.InvalidArgument);
    expect(thrown(() => new MailboxClient(new SharedArrayBuffer(4096))).code).toBe(ErrorCode.InvalidArgument);
    expect(new MailboxClient(createMailbox(4096)).maxMessage).toBe(2016);
  });

  it('with nobody serving, a call times out after its timeout', () => {
    const c = new MailboxClient(createMailbox());
    const t0 = Date.now();
    expect(thrown(() => c.call('echo', 1, 50)).code).toBe(ErrorCode.Timeout);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(45);
  });
});

describe('mailbox served by a worker with start()', () => {
  const sab = createMailbox(64 * 1024);
  const client = new MailboxClient(sab);
  let srv: ReturnType<typeof serve>;
  beforeAll(async () => {
    srv = serve(sab, 'start');
    await srv.ready;
  });
  afterAll(async () => {
    await srv.worker.terminate();
  });

  it('values round-trip: bigint, Uint8Array, large numbers, nesting, undefined', () => {
    const bytes = new Uint8Array([0, 1, 254, 255]);
    const v = { n: 2 ** 40 + 1, neg: -5, f: 1.5, s: 'päd', big: 2n ** 64n + 3n, small: 7n, negBig: -(2n ** 63n), bytes, list: [null, true, { deep: [1, 'x'] }] };
    const got = client.call('echo', v) as typeof v;
    expect(got).toEqual({ ...v, bytes: expect.any(Uint8Array) });
    expect(got.bytes).toBeInstanceOf(Uint8Array);
    expect([...got.bytes]).toEqual([...bytes]);
    expect(typeof got.small).toBe('bigint');
    expect(client.call('echo', undefined)).toBeUndefined();
    // Many calls in a row, each answered by its own reply.
    for (let i = 0; i < 2000; i++) expect(client.call('echo', { i, pad: 'x'.repeat(i % 300) })).toEqual({ i, pad: 'x'.repeat(i % 300) });
  });

  it('a SabreError keeps its code and message; anything else is ERR_INTERNAL', () => {
    for (const code of [ErrorCode.LocalProtection, ErrorCode.QueueFull, 'ERR_FILE_NOT_FOUND']) {
      const e = thrown(() => client.call('sabre', { code, message: `m ${code}` }));
      expect([e.code, e.message]).toEqual([code, `m ${code}`]);
    }
    const e = thrown(() => client.call('boom', null));
    expect(e.code).toBe(ErrorCode.Internal);
    expect(e.message).toContain('TypeError: kaput');
    expect(thrown(() => client.call('throwString', null)).message).toContain('just a string');
    expect(thrown(() => client.call('nope', null)).code).toBe(ErrorCode.NotSupported);
    expect(client.call('echo', 'after errors')).toBe('after errors');
  });

  it('a promise result is replied when it settles', () => {
    expect(client.call('later', { v: 42n, ms: 30 })).toBe(42n);
    expect(thrown(() => client.call('laterFail', { ms: 10 })).code).toBe(ErrorCode.Closed);
  });

  it('after a timeout, the late reply is not taken for the next call', () => {
    const t0 = Date.now();
    expect(thrown(() => client.call('sleep', { ms: 400, tag: 'late' }, 50)).code).toBe(ErrorCode.Timeout);
    const t1 = Date.now();
    expect(t1 - t0).toBeLessThan(350);
    // The worker is still asleep in the first handler; this call waits for it, then for its own.
    expect(client.call('echo', 'mine', 5000)).toBe('mine');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(390);
    // 'a' is taken and sleeps; 'b' times out before the server could take it, and 'c'
    // overwrites it: 'b' never runs, 'a' replies late, 'c' gets its own reply.
    expect(thrown(() => client.call('sleep', { ms: 300, tag: 'a' }, 20)).code).toBe(ErrorCode.Timeout);
    expect(thrown(() => client.call('echo', 'b', 20)).code).toBe(ErrorCode.Timeout);
    expect(client.call('echo', 'c', 5000)).toBe('c');
  });

  it('a call nobody answered is told from a handler that throws ERR_CLOSED or ERR_TIMEOUT itself', () => {
    for (const code of [ErrorCode.Closed, ErrorCode.Timeout]) expect(wasUnanswered(thrown(() => client.call('sabre', { code, message: 'mine' })))).toBe(false);
    const late = thrown(() => client.call('sleep', { ms: 200, tag: 'x' }, 20));
    expect([late.code, wasUnanswered(late)]).toEqual([ErrorCode.Timeout, true]);
    expect(client.call('echo', 'after', 5000)).toBe('after');
  });

  it('requests and replies past the area are ERR_LIMIT_EXCEEDED, and the mailbox goes on', () => {
    const max = client.maxMessage;
    expect(thrown(() => client.call('echo', new Uint8Array(max))).code).toBe(ErrorCode.LimitExceeded);
    const e = thrown(() => client.call('big', { n: max }));
    expect(e.code).toBe(ErrorCode.LimitExceeded);
    expect(e.message).toContain('reply');
    const near = client.call('big', { n: max - 16 }) as Uint8Array;
    expect(near.length).toBe(max - 16);
    expect(client.call('echo', 'still here')).toBe('still here');
  });

  it('stop() ends serving and lets the thread exit', async () => {
    expect(client.call('stop', null)).toBe('stopped');
    const code = await Promise.race([srv.exited, new Promise((r) => setTimeout(() => r('still running'), 5000))]);
    expect(code).toBe(0);
    expect(thrown(() => client.call('echo', 1, 50)).code).toBe(ErrorCode.Timeout);
  });
});

describe('mailbox served by poll() from a busy loop', () => {
  it('serves each call between the loop steps', async () => {
    const sab = createMailbox();
    const client = new MailboxClient(sab);
    const srv = serve(sab, 'poll');
    try {
      await srv.ready;
      for (let i = 0; i < 500; i++) expect(client.call('echo', [i, BigInt(i)])).toEqual([i, BigInt(i)]);
      expect(thrown(() => client.call('sabre', { code: ErrorCode.InvalidState, message: 'x' })).code).toBe(ErrorCode.InvalidState);
      expect(client.call('stop', null)).toBe('stopped');
      expect(await srv.exited).toBe(0);
      expect(srv.messages).toContainEqual({ served: 502 });
    } finally {
      await srv.worker.terminate();
    }
  });
});

describe('mailbox whose serving thread ends while a call waits', () => {
  it('the waiting call and every later one fail ERR_CLOSED, not ERR_TIMEOUT at their deadline', async () => {
    const sab = createMailbox();
    const client = new MailboxClient(sab);
    const srv = serve(sab, 'start');
    srv.worker.on('error', () => {});
    try {
      await srv.ready;
      expect(client.call('crashSoon', { ms: 50 })).toBe('soon');
      // Taken and pending (its promise settles in 20 s) when the thread crashes.
      const e = thrown(() => client.call('later', { v: 1, ms: 20_000 }, 15_000));
      expect([e.code, e.message]).toEqual([ErrorCode.Closed, "mailbox 'later': the NIC thread has ended"]);
      expect(thrown(() => client.call('echo', 1, 15_000)).code).toBe(ErrorCode.Closed);
      await expect(client.callAsync('echo', 1, 15_000)).rejects.toMatchObject({ code: ErrorCode.Closed });
      expect(await srv.exited).toBe(1);
    } finally {
      await srv.worker.terminate();
    }
  });
});
