// The perf server's --baseline sockets answer only the control session. They served the control
// peer's host (and the udp responder the first address:port that asked), but a source address
// is what anyone on the path can write: a datagram spoofed from the client's host was counted
// into the baseline and answered — 28 bytes in, up to 8 MiB out to the client, and the first
// spoofed datagram could take the responder's one address:port before the client's own.
// Now baselineOpen hands the client a random 8-byte token over the control connection, and the
// baseline traffic carries it at a fixed offset (udp: after the 4-byte sequence/iteration word;
// tcp: the stream's first 8 bytes); what lacks it is dropped unanswered and counted in the
// server's refusals ('baseline-token'). BaselineServer in process, real sockets on 127.0.0.1.
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { BaselineServer } from '../../src/cli/perf/baseline.js';
import { Refusals } from '../../src/cli/perf/control-server.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const AT = { bind: '127.0.0.1', peer: '127.0.0.1' };

let server: BaselineServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function udpPeer() {
  const s = createSocket('udp4');
  s.on('error', () => {});
  let got = 0;
  s.on('message', (m) => (got += m.length));
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  return { s, got: () => got };
}

/** [u32 word][token][payload]: token undefined sends none (the datagram a spoofer can make). */
function dgram(word: number, token: Buffer | undefined, payload: number): Buffer {
  const t = token ?? Buffer.alloc(0);
  const d = Buffer.alloc(4 + t.length + payload);
  d.writeUInt32BE(word >>> 0, 0);
  t.copy(d, 4);
  return d;
}

const tokenOf = (r: { token?: unknown }): Buffer => Buffer.from(String(r.token), 'hex');

describe('perf baseline: only traffic carrying the session\'s token is served', () => {
  it('udp rr: a request without the token from the client\'s own address gets nothing and is counted; with it, the answer', async () => {
    const refusals = new Refusals();
    server = new BaselineServer(refusals);
    const r = await server.open({ transport: 'udp', mode: 'rr', reqBytes: 28, respBytes: 4096 }, AT);
    const token = tokenOf(r as { token?: unknown });
    expect(token.length).toBe(8);
    const c = await udpPeer();
    c.s.send(dgram(1, undefined, 28), r.port, '127.0.0.1');
    const wrong = Buffer.from(token);
    wrong[7] ^= 1;
    c.s.send(dgram(2, wrong, 28), r.port, '127.0.0.1');
    await sleep(300);
    expect(c.got()).toBe(0);
    expect(refusals.counts['baseline-token']).toBe(2);
    expect(server.result()).toMatchObject({ datagrams: 0, bytesIn: 0, bytesOut: 0 });
    // The client's request, from the same address:port: answered (the spoofs did not take the responder).
    c.s.send(dgram(3, token, 28), r.port, '127.0.0.1');
    const until = Date.now() + 3000;
    while (Date.now() < until && c.got() < 4 + 4096) await sleep(10);
    expect(c.got()).toBe(4 + 4096);
    expect(server.result()).toMatchObject({ datagrams: 1, bytesIn: 28, bytesOut: 4096 });
    c.s.close();
  });

  it('udp bw: the sink neither counts nor acks a datagram without the token', async () => {
    const refusals = new Refusals();
    server = new BaselineServer(refusals);
    const r = await server.open({ transport: 'udp', mode: 'bw', reqBytes: 0, respBytes: 0 }, AT);
    const token = tokenOf(r as { token?: unknown });
    const c = await udpPeer();
    for (let i = 0; i < 3; i++) c.s.send(dgram(0x80000000, undefined, 100), r.port, '127.0.0.1'); // ack now
    await sleep(300);
    expect(c.got()).toBe(0);
    expect(refusals.counts['baseline-token']).toBe(3);
    expect(server.result()).toMatchObject({ datagrams: 0, bytesIn: 0 });
    c.s.send(dgram(0x80000000, token, 100), r.port, '127.0.0.1');
    const until = Date.now() + 3000;
    while (Date.now() < until && c.got() === 0) await sleep(10);
    expect(c.got()).toBe(8);
    expect(server.result()).toMatchObject({ datagrams: 1, bytesIn: 100 });
    c.s.close();
  });

  it('tcp: a connection whose first bytes are not the token, or that sends none within 2 s, is closed unanswered and counted', async () => {
    const refusals = new Refusals();
    server = new BaselineServer(refusals);
    const r = await server.open({ transport: 'tcp', mode: 'rr', reqBytes: 28, respBytes: 4096 }, AT);
    const token = tokenOf(r as { token?: unknown });
    const dial = async (first: Buffer) => {
      const d = connect({ port: r.port, host: '127.0.0.1' });
      d.on('error', () => {});
      let got = 0;
      d.on('data', (b) => (got += b.length));
      await new Promise<void>((res) => d.once('connect', () => res()).once('close', () => res()));
      d.write(Buffer.concat([first, Buffer.alloc(28 * 2)]));
      await sleep(400);
      const closed = d.destroyed || d.readyState !== 'open';
      d.destroy();
      return { got, closed };
    };
    const stranger = await dial(Buffer.alloc(8));
    expect(stranger).toEqual({ got: 0, closed: true });
    expect(refusals.counts['baseline-token']).toBe(1);
    // One that sends nothing is closed once the token's 2 s are up (it would hold one of the 4 connection slots).
    const silent = connect({ port: r.port, host: '127.0.0.1' });
    silent.on('error', () => {});
    const closed = new Promise<boolean>((res) => silent.once('close', () => res(true)));
    expect(await Promise.race([closed, sleep(3500).then(() => false)])).toBe(true);
    expect(refusals.counts['baseline-token']).toBe(2);
    const client = await dial(token);
    expect(client).toEqual({ got: 2 * 4096, closed: false });
    expect(server.result()).toMatchObject({ bytesIn: 2 * 28, bytesOut: 2 * 4096 });
  });
});
