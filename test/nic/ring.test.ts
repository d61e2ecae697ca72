// RecordRing (src/nic/ring.ts): variable-length records in a SharedArrayBuffer, one producer
// and one consumer. Single-thread cases pin the layout rules (alignment, wrap, full, the
// largest record, commit visibility, the doorbell's flag); the worker cases move 100k records
// across threads both ways through a small ring, so wraps, back-pressure and both wake-ups
// happen thousands of times, and check every record's order and bytes.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { code } from './error-code.js';
import { ErrorCode, SabreError } from '../../src/core/errors.js';
import { RECORD_PREFIX_BYTES, RecordRing, recordBytes } from '../../src/nic/ring.js';

const ringUrl = new URL('../../dist/nic/ring.js', import.meta.url).href;


/** Record i: length i % 203 (0 included), byte k = (i + k * 7) & 0xff; first 4 bytes (if room) = i. */
const lenOf = (i: number): number => (i * 37) % 203;
function fill(u8: Uint8Array, off: number, i: number): void {
  const n = lenOf(i);
  for (let k = 0; k < n; k++) u8[off + k] = (i + k * 7) & 0xff;
}
function check(u8: Uint8Array, off: number, len: number, i: number): string | undefined {
  if (len !== lenOf(i)) return `record ${i}: length ${len}, expected ${lenOf(i)}`;
  for (let k = 0; k < len; k++) if (u8[off + k] !== ((i + k * 7) & 0xff)) return `record ${i}: byte ${k} differs`;
  return undefined;
}

describe('RecordRing, one thread', () => {
  it('rounds the size up to a power of two and attaches from the buffer alone', () => {
    const r = RecordRing.create(1000);
    expect(r.capacity).toBe(1024);
    expect(r.maxRecord).toBe(512 - RECORD_PREFIX_BYTES);
    const a = RecordRing.attach(r.sab);
    expect(a.capacity).toBe(1024);
    expect(code(() => RecordRing.attach(new SharedArrayBuffer(1024)))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => RecordRing.create(0))).toBe(ErrorCode.InvalidArgument);
  });

  it('publishes at commit only, in order, 8-byte aligned, across many wraps', () => {
    const r = RecordRing.create(512);
    let produced = 0;
    let consumed = 0;
    let wraps = 0;
    let lastOff = -1;
    let committed = 0;
    for (let round = 0; round < 2000; round++) {
      // Fill as much as fits, one commit per batch.
      const batch = 1 + (round % 5);
      for (let b = 0; b < batch; b++) {
        const off = r.reserve(lenOf(produced));
        if (off < 0) break;
        expect(off % 8).toBe(0);
        fill(r.u8, off, produced++);
      }
      // Records reserved since the last commit are invisible until it.
      if (committed === consumed) expect(r.peek()).toBe(-1);
      r.commit();
      committed = produced;
      for (let off = r.peek(); off >= 0; off = r.peek()) {
        if (off < lastOff) wraps++;
        lastOff = off;
        expect(off % 8).toBe(0);
        expect(check(r.u8, off, r.peekLength(), consumed)).toBeUndefined();
        // peek is idempotent until advance.
        expect(r.peek()).toBe(off);
        r.advance();
        consumed++;
        if (round % 3 === 0) break; // leave some behind so the ring runs full now and then
      }
    }
    expect(consumed).toBeGreaterThan(1000);
    expect(wraps).toBeGreaterThan(100);
  });

  it('an uncommitted record is not seen; used() counts prefix and padding', () => {
    const r = RecordRing.create(128);
    const off = r.reserve(5);
    expect(off).toBe(RECORD_PREFIX_BYTES);
    expect(r.peek()).toBe(-1);
    expect(r.used()).toBe(0);
    r.commit();
    expect(r.used()).toBe(recordBytes(5));
    expect(r.free()).toBe(128 - 16);
    expect(r.peek()).toBe(off);
    expect(r.peekLength()).toBe(5);
    r.advance();
    expect(r.peek()).toBe(-1);
    expect(r.used()).toBe(0);
    expect(code(() => r.advance())).toBe(ErrorCode.InvalidState);
  });

  it('full: reserve gives -1 and writes nothing; the largest record fits an empty ring at every position', () => {
    const r = RecordRing.create(256);
    expect(code(() => r.reserve(r.maxRecord + 1))).toBe(ErrorCode.LimitExceeded);
    expect(code(() => r.reserve(-1))).toBe(ErrorCode.InvalidArgument);
    // Walk the start position over every 8-byte step; at each, the largest record goes in.
    for (let step = 0; step < 64; step++) {
      const off = r.reserve(r.maxRecord);
      expect(off).toBeGreaterThanOrEqual(0);
      r.u8[off] = step;
      r.u8[off + r.maxRecord - 1] = step ^ 0xff;
      r.commit();
      const got = r.peek();
      expect(got).toBe(off);
      expect(r.peekLength()).toBe(r.maxRecord);
      expect([r.u8[got], r.u8[got + r.maxRecord - 1]]).toEqual([step, step ^ 0xff]);
      r.advance();
      // Move the start by 8 bytes (a zero-length record).
      expect(r.reserve(0)).toBeGreaterThanOrEqual(0);
      r.commit();
      r.peek();
      r.advance();
    }
    // Fill a fresh ring with small records until full; -1 leaves the ring as it was.
    const f = RecordRing.create(256);
    let n = 0;
    while (f.reserve(8) >= 0) n++;
    expect(n).toBe(256 / 16);
    f.commit();
    expect(f.reserve(0)).toBe(-1);
    expect(f.used()).toBe(256);
    for (let i = 0; i < n; i++) {
      expect(f.peek()).toBe(i * 16 + RECORD_PREFIX_BYTES);
      f.advance();
    }
    expect(f.peek()).toBe(-1);
  });

  it('the doorbell notifies only a consumer that said it sleeps', async () => {
    const r = RecordRing.create(256);
    r.reserve(1);
    r.commit();
    expect(r.ringDoorbell()).toBe(false);
    expect(r.waitForRecords()).toBeUndefined(); // records are there: no wait, no flag
    expect(r.ringDoorbell()).toBe(false);
    r.peek();
    r.advance();
    const w = r.waitForRecords();
    expect(w).toBeInstanceOf(Promise);
    r.reserve(2);
    r.commit();
    let woke = false;
    void w!.then(() => (woke = true));
    await new Promise((res) => setTimeout(res, 20));
    expect(woke).toBe(false); // a commit alone does not wake a sleeper
    expect(r.ringDoorbell()).toBe(true);
    await w;
    expect(r.peek()).toBeGreaterThanOrEqual(0);
    expect(r.ringDoorbell()).toBe(false); // the flag dropped when the waiter woke
    // A timed wait resolves by itself.
    r.advance();
    const t0 = Date.now();
    await r.waitForRecords(30);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(20);
  });

  it('pollRecords: finds a committed record, gives up at its deadline or its count, and leaves a pending waiter\'s flag raised', async () => {
    const r = RecordRing.create(256);
    let looks = 0;
    const clock = () => {
      looks++;
      return 0;
    };
    // Nothing there: a count bound ends it (the clock never reaches the deadline).
    expect(r.pollRecords(1, clock, 64)).toBe(false);
    expect(looks).toBe(4); // the clock is read every 16 looks
    // A deadline already past ends it at the first clock reading.
    expect(r.pollRecords(-1, clock, 1_000_000)).toBe(false);
    r.reserve(1);
    r.commit();
    expect(r.pollRecords(-1, clock, 1)).toBe(true);
    r.peek();
    r.advance();
    // An async wait is pending (flag raised): a poll lowers the flag while it looks and raises it again.
    const w = r.waitForRecords();
    expect(w).toBeInstanceOf(Promise);
    expect(r.pollRecords(-1, clock, 16)).toBe(false);
    r.reserve(2);
    r.commit();
    expect(r.ringDoorbell()).toBe(true); // the sleeper is still rung
    await w;
    expect(r.pollRecords(-1, clock, 16)).toBe(true);
  });

  it('waitRecordsSync: true at once when a record is there, false when none came in time, and a pending async waiter keeps the flag', async () => {
    const r = RecordRing.create(256);
    expect(r.waitRecordsSync(1)).toBe(false);
    expect(r.ringDoorbell()).toBe(false); // the flag dropped with nobody else waiting
    r.reserve(1);
    r.commit();
    expect(r.waitRecordsSync(1000)).toBe(true);
    r.peek();
    r.advance();
    const w = r.waitForRecords();
    expect(w).toBeInstanceOf(Promise);
    expect(r.waitRecordsSync(1)).toBe(false);
    r.reserve(2);
    r.commit();
    expect(r.ringDoorbell()).toBe(true); // the async sleeper is still rung
    await w;
  });

  it('waitForSpace resolves when the consumer frees room', async () => {
    const r = RecordRing.create(64);
    while (r.reserve(8) >= 0);
    r.commit();
    expect(r.waitForSpace(0)).toBeInstanceOf(Promise);
    const w = r.waitForSpace(8)!;
    let woke = false;
    void w.then(() => (woke = true));
    await new Promise((res) => setTimeout(res, 10));
    expect(woke).toBe(false);
    r.peek();
    r.advance();
    await w;
    expect(r.waitForSpace(8)).toBeUndefined();
    expect(r.reserve(8)).toBeGreaterThanOrEqual(0);
  });
});

// The other thread runs the compiled ring from dist/ (the test global setup builds it). A
// pending Atomics.waitAsync does not keep a worker alive, so each script holds an interval.
const PRODUCER = `
const { workerData, parentPort } = require('node:worker_threads');
import(workerData.url).then(async ({ RecordRing }) => {
  const keep = setInterval(() => {}, 1000);
  const r = RecordRing.attach(workerData.sab);
  const lenOf = (i) => (i * 37) % 203;
  let waits = 0;
  for (let i = 0; i < workerData.count; ) {
    const off = r.reserve(lenOf(i));
    if (off < 0) { r.commit(); r.ringDoorbell(); const w = r.waitForSpace(lenOf(i), 100); if (w) { waits++; await w; } continue; }
    const n = lenOf(i);
    for (let k = 0; k < n; k++) r.u8[off + k] = (i + k * 7) & 0xff;
    i++;
    if (i % 7 === 0) { r.commit(); r.ringDoorbell(); }
  }
  r.commit(); r.ringDoorbell();
  clearInterval(keep);
  parentPort.postMessage({ waits });
});`;

const CONSUMER = `
const { workerData, parentPort } = require('node:worker_threads');
import(workerData.url).then(async ({ RecordRing }) => {
  const keep = setInterval(() => {}, 1000);
  const r = RecordRing.attach(workerData.sab);
  const lenOf = (i) => (i * 37) % 203;
  let bad, waits = 0, i = 0;
  const deadline = Date.now() + workerData.ms;
  while (i < workerData.count && !bad && Date.now() < deadline) {
    const off = r.peek();
    if (off < 0) { const w = r.waitForRecords(100); if (w) { waits++; await w; } continue; }
    const len = r.peekLength();
    if (len !== lenOf(i)) bad = 'record ' + i + ': length ' + len;
    for (let k = 0; k < len && !bad; k++) if (r.u8[off + k] !== ((i + k * 7) & 0xff)) bad = 'record ' + i + ': byte ' + k;
    r.advance();
    i++;
  }
  clearInterval(keep);
  parentPort.postMessage({ got: i, bad, waits });
});`;

// A consumer that sleeps without a timeout (a lost wake-up leaves it asleep: the producer's
// bounded wait for it then fails) and tells the producer, through a shared counter, how many
// records it has taken.
const SLEEPER = `
const { workerData, parentPort } = require('node:worker_threads');
import(workerData.url).then(async ({ RecordRing }) => {
  const keep = setInterval(() => {}, 1000);
  const r = RecordRing.attach(workerData.sab);
  const taken = new Int32Array(workerData.taken);
  let i = 0, sleeps = 0;
  const deadline = Date.now() + workerData.ms;
  while (i < workerData.count && Date.now() < deadline) {
    if (r.peek() < 0) { const w = r.waitForRecords(); if (w) { sleeps++; await w; } continue; }
    r.advance();
    i++;
    Atomics.store(taken, 0, i);
    Atomics.notify(taken, 0);
  }
  clearInterval(keep);
  parentPort.postMessage({ got: i, sleeps });
});`;

function run(script: string, workerData: object): { done: Promise<unknown>; worker: Worker } {
  const worker = new Worker(script, { eval: true, workerData });
  const done = new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (c) => reject(new Error(`worker exited (${c}) before it reported`)));
  });
  return { done, worker };
}

describe('RecordRing across threads', () => {
  const COUNT = 100_000;
  const MS = 15_000;

  it('a worker produces 100k records, this thread consumes them in order', async () => {
    const r = RecordRing.create(4096);
    const { done, worker } = run(PRODUCER, { url: ringUrl, sab: r.sab, count: COUNT });
    let i = 0;
    let bad: string | undefined;
    let sleeps = 0;
    const deadline = Date.now() + MS;
    try {
      while (i < COUNT && bad === undefined && Date.now() < deadline) {
        const off = r.peek();
        if (off < 0) {
          const w = r.waitForRecords(100);
          if (w) {
            sleeps++;
            await w;
          }
          continue;
        }
        bad = check(r.u8, off, r.peekLength(), i);
        r.advance();
        i++;
      }
      const report = (await done) as { waits: number };
      expect(bad).toBeUndefined();
      expect(i).toBe(COUNT);
      expect(r.peek()).toBe(-1);
      expect(r.used()).toBe(0);
      // Both directions of sleeping happened (a 4 KiB ring cannot hold 100k records).
      expect(report.waits + sleeps).toBeGreaterThan(0);
    } finally {
      await worker.terminate();
    }
  });

  it('this thread produces 100k records, a worker consumes them in order', async () => {
    const r = RecordRing.create(4096);
    const { done, worker } = run(CONSUMER, { url: ringUrl, sab: r.sab, count: COUNT, ms: MS });
    try {
      const deadline = Date.now() + MS;
      for (let i = 0; i < COUNT && Date.now() < deadline; ) {
        const off = r.reserve(lenOf(i));
        if (off < 0) {
          r.commit();
          r.ringDoorbell();
          const w = r.waitForSpace(lenOf(i), 100);
          if (w) await w;
          continue;
        }
        fill(r.u8, off, i++);
        if (i % 5 === 0) {
          r.commit();
          r.ringDoorbell();
        }
      }
      r.commit();
      r.ringDoorbell();
      const report = (await done) as { got: number; bad?: string };
      expect(report.bad).toBeUndefined();
      expect(report.got).toBe(COUNT);
    } finally {
      await worker.terminate();
    }
  });

  it('no lost wake-up: 3000 bursts, each waited for until the sleeping consumer has taken it', async () => {
    const r = RecordRing.create(1024);
    const taken = new Int32Array(new SharedArrayBuffer(4));
    const ROUNDS = 3000;
    let sent = 0;
    for (let k = 0; k < ROUNDS; k++) sent += 1 + (k % 3);
    const { done, worker } = run(SLEEPER, { url: ringUrl, sab: r.sab, taken: taken.buffer, count: sent, ms: MS });
    try {
      let posted = 0;
      let rounds = 0;
      let rungs = 0;
      const deadline = Date.now() + MS;
      for (let k = 0; k < ROUNDS && Date.now() < deadline; k++) {
        // A burst of 1-3 posts, each committed and rung (as a thread port's posts outside a batch).
        for (let b = 0; b <= k % 3; b++) {
          expect(r.reserve(8)).toBeGreaterThanOrEqual(0);
          r.commit();
          if (r.ringDoorbell()) rungs++;
          posted++;
        }
        // Until the consumer took all of it; every few rounds on this thread's event loop, so the
        // consumer is caught both awake and asleep.
        while (Atomics.load(taken, 0) < posted && Date.now() < deadline) {
          if (k % 4 === 0) await new Promise((res) => setImmediate(res));
          else Atomics.wait(taken, 0, Atomics.load(taken, 0), 50);
        }
        if (Atomics.load(taken, 0) === posted) rounds++;
      }
      const report = (await done) as { got: number; sleeps: number };
      expect(rounds).toBe(ROUNDS);
      expect(report.got).toBe(sent);
      // It slept and was rung (the wake-up path was taken, not only caught awake).
      expect(report.sleeps).toBeGreaterThan(0);
      expect(rungs).toBeGreaterThan(0);
    } finally {
      await worker.terminate();
    }
  });
});

describe('a record length the producer did not write', () => {
  it('one that runs past what was published, or past the largest record, is given up on with all that was published (counted); the ring goes on', () => {
    const ring = RecordRing.create(1024);
    const other = RecordRing.attach(ring.sab);
    for (const bad of [0x7fff_0000, 200, ring.maxRecord + 1]) {
      const off = ring.reserve(16);
      ring.reserve(16); // a record after it, committed with it: lost with it
      ring.commit();
      ring.dv.setUint32(off - RECORD_PREFIX_BYTES, bad, true);
      expect(other.peek()).toBe(-1);
    }
    expect(other.lost).toBe(3);
    expect(ring.used()).toBe(0);
    const off = ring.reserve(8);
    ring.dv.setUint32(off, 42, true);
    ring.commit();
    const at = other.peek();
    expect([other.peekLength(), other.dv.getUint32(at, true)]).toEqual([8, 42]);
    other.advance();
    expect(other.peek()).toBe(-1);
  });
});
