// The ack-clocked raw dgram baseline over real sockets on 127.0.0.1: the receiver is never
// overrun, so nothing is lost, whatever the datagram size (issue #18: the unclocked blast lost
// datagrams by the half and measured the receiver's collapse).
import { afterEach, describe, expect, it } from 'vitest';
import { ackClock, MAX_DGRAM, RawDgramSink, sendRawDgram } from '../../src/cli/baseline/raw-dgram.js';

let sink: RawDgramSink | undefined;
afterEach(async () => {
  await sink?.close();
  sink = undefined;
});

describe('ack-clocked raw dgram', () => {
  it('sizes the window from the receive buffer and the loopback backlog', () => {
    expect(ackClock(8 << 20, 65004).window).toBe(Math.floor((4 << 20) / (65004 + 1024)));
    expect(ackClock(8 << 20, 68).window).toBe(512); // bounded by netdev_max_backlog's share
    expect(ackClock(212992, 65004).window).toBe(2);
    for (const rcv of [212992, 1 << 20, 8 << 20]) {
      const { window, ackEvery } = ackClock(rcv, 1000);
      expect(ackEvery).toBeGreaterThanOrEqual(1);
      expect(ackEvery).toBeLessThanOrEqual(Math.max(1, window / 4));
    }
  });

  it.each([
    [65536, 400],
    [4096, 3000],
    [64, 20000],
    [200_000, 60],
  ])('%i-byte messages × %i: every datagram arrives and every message is acked', async (size, messages) => {
    sink = await RawDgramSink.open('127.0.0.1');
    const r = await sendRawDgram({ host: '127.0.0.1', port: sink.port, rcvbuf: sink.rcvbuf, size, messages });
    const perMsg = Math.ceil(size / MAX_DGRAM);
    expect(r.messages).toBe(messages);
    expect(r.datagrams).toBe(messages * perMsg);
    const st = sink.stats();
    expect(st.datagrams).toBe(r.datagrams);
    expect(st.bytes).toBe(messages * size);
    expect(r.acked).toBe(messages);
    expect(r.stalled).toBe(0);
    for (let i = 1; i < r.acked; i++) expect(r.completed[i]!).toBeGreaterThanOrEqual(r.completed[i - 1]!);
  }, 30_000);

  it('a sink with work (bench/udp-floor): work sees every data datagram, and ackEvery adds acks', async () => {
    const { createSocket } = await import('node:dgram');
    let seen = 0;
    let bytes = 0;
    sink = await RawDgramSink.open('127.0.0.1', 1 << 20, { work: (m) => ((seen++), (bytes += m.length)), ackEvery: 3 });
    const s = createSocket('udp4');
    const acks: number[] = [];
    s.on('message', (m) => acks.push(m.readUInt32BE(0)));
    await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
    for (let seq = 0; seq < 9; seq++) {
      const d = Buffer.alloc(100);
      d.writeUInt32BE(seq, 0);
      s.send(d, sink.port, '127.0.0.1');
      await new Promise((r) => setTimeout(r, 5));
    }
    const t0 = performance.now();
    while (acks.length < 3 && performance.now() - t0 < 2000) await new Promise((r) => setTimeout(r, 10));
    s.close();
    expect(seen).toBe(9);
    expect(bytes).toBe(900);
    // None asked (no ACK_NOW bit): one ack after every third datagram, with its high-water mark.
    expect(acks).toEqual([3, 6, 9]);
  });

  it('a timed run stops at its deadline and still gets its tail acked', async () => {
    sink = await RawDgramSink.open('127.0.0.1');
    const t0 = performance.now();
    const r = await sendRawDgram({ host: '127.0.0.1', port: sink.port, rcvbuf: sink.rcvbuf, size: 1000, messages: 0, durationS: 0.3 });
    expect(performance.now() - t0).toBeLessThan(3000);
    expect(r.messages).toBeGreaterThan(0);
    expect(r.acked).toBe(r.messages);
    expect(sink.stats().datagrams).toBe(r.datagrams);
  });

  it('a receiver that vanishes costs a stall, not a hang', async () => {
    sink = await RawDgramSink.open('127.0.0.1');
    const port = sink.port;
    const rcvbuf = sink.rcvbuf;
    await sink.close();
    sink = undefined;
    const r = await sendRawDgram({ host: '127.0.0.1', port, rcvbuf, size: 65536, messages: 50, stallMs: 50 });
    expect(r.acked).toBe(0);
    expect(r.stalled).toBe(r.datagrams);
  }, 30_000);
});
