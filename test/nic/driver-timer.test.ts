// The driver's one timer across a ping-pong: a request's watchdog is armed as it goes out and
// moot once its answer is in. A stub engine and link, a counting clock: no sockets, no sleeps.
import { describe, expect, it } from 'vitest';
import { NicDriver, type NicClock, type NicTimer } from '../../src/nic/driver.js';
import type { Link } from '../../src/core/link.js';
import type { RdmapEngine } from '../../src/rdmap/engine.js';

function rig() {
  let now = 0;
  let deadline: number | undefined;
  const counts = { armed: 0, cancelled: 0, fired: 0 };
  const live: { at: number; fire: () => void; dead: boolean }[] = [];
  const clock: NicClock = {
    now: () => now,
    timer(at, fire): NicTimer {
      counts.armed++;
      const t = { at, fire, dead: false };
      live.push(t);
      return { hold() {}, cancel() { if (!t.dead) counts.cancelled++; t.dead = true; } };
    },
  };
  const engine = {
    pollTransmit: () => [],
    takeFlushed: () => undefined,
    pollEvent: () => undefined,
    pollTimeout: () => deadline,
    handleTimeout: () => {},
  } as unknown as RdmapEngine;
  const link = { start() {}, transmit() {} } as unknown as Link;
  const driver = new NicDriver(engine, link, { onEvent() {} }, clock);
  /** Advance the clock to `to`, firing what is due. */
  const advance = (to: number) => {
    now = to;
    for (const t of live) if (!t.dead && t.at <= now) { t.dead = true; counts.fired++; t.fire(); }
  };
  return { driver, counts, advance, set: (d: number | undefined) => { deadline = d; }, now: () => now };
}

describe('the NIC driver timer', () => {
  it('a far deadline that goes moot is left to run out, not cleared and re-armed per message', () => {
    const r = rig();
    for (let i = 0; i < 100; i++) {
      r.advance(i * 0.05);
      r.set(r.now() + 8000); // a request out: its watchdog
      r.driver.run(() => {});
      r.advance(i * 0.05 + 0.02);
      r.set(undefined); // its answer in: nothing to watch
      r.driver.run(() => {});
    }
    expect(r.counts.armed).toBe(1);
    expect(r.counts.cancelled).toBe(0);
    // It fires once, finds the watchdog that is due later now, and waits for that one.
    r.set(4.95 + 8000);
    r.advance(8000.5);
    expect(r.counts.fired).toBe(1);
    expect(r.counts.armed).toBe(2);
    // With nothing due, the next firing is the last.
    r.set(undefined);
    r.advance(9000 + 8000);
    expect(r.counts.fired).toBe(2);
    expect(r.counts.armed).toBe(2);
  });

  it('a near deadline that goes moot is cleared (it would wake the idle process for nothing)', () => {
    const r = rig();
    r.set(5);
    r.driver.run(() => {});
    r.set(undefined);
    r.driver.run(() => {});
    expect(r.counts.armed).toBe(1);
    expect(r.counts.cancelled).toBe(1);
  });
});
