// The two-process plumbing of the transport benches: the script forks itself with --peer, the
// peer serves an `ops` table over the IPC channel (advanced serialization: Uint8Arrays and
// bigints pass as they are), and the parent calls it with `call(op, args)`.
import { fork } from 'node:child_process';

export const isPeer = process.argv.includes('--peer');

/** In the peer: answer every call with ops[op](args). */
export function servePeer(ops) {
  process.on('message', async (m) => {
    try {
      process.send({ id: m.id, ok: true, value: await ops[m.op](m.args ?? {}) });
    } catch (e) {
      process.send({ id: m.id, ok: false, error: String(e?.stack ?? e) });
    }
  });
}

/** In the parent: fork `script` as the peer; the peer is killed when this process exits. */
export function forkPeer(script) {
  const child = fork(script, ['--peer'], { serialization: 'advanced' });
  process.on('exit', () => child.kill());
  let seq = 0;
  const waiting = new Map();
  child.on('message', (m) => {
    const w = waiting.get(m.id);
    waiting.delete(m.id);
    if (m.ok) w.resolve(m.value);
    else w.reject(new Error(m.error));
  });
  const call = (op, args = {}) =>
    new Promise((resolve, reject) => {
      const id = ++seq;
      waiting.set(id, { resolve, reject });
      child.send({ id, op, args });
    });
  return { child, call };
}

/**
 * The answering side of a 64 B RdmaWriteWithImm ping-pong (udp and tcp benches): each incoming
 * one consumes a receive and is answered with the same into the peer's region. Receives are
 * posted as they are consumed, 64 ahead (as perftest keeps an rx depth): posting all n up front
 * kept thousands of them alive long enough to reach the old generation, and the full
 * collections that followed showed up in p99. `s` holds qp, cq, mr, peerAddr, peerRkey.
 */
export function pong(s, n, Opcode) {
  const { qp, cq, mr } = s;
  for (let i = 0; i < Math.min(n, 64); i++) qp.postRecv({ wrId: i, sgList: [] });
  let posted = Math.min(n, 64);
  (async () => {
    let got = 0;
    while (got < n) {
      await cq.wait(30_000);
      for (const w of cq.poll(64)) {
        if (w.imm === undefined) continue;
        got++;
        if (posted < n) qp.postRecv({ wrId: posted++, sgList: [] });
        qp.postSend({ wrId: got, opcode: Opcode.RdmaWriteWithImm, imm: got, signaled: false, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }], remoteAddr: s.peerAddr, rkey: s.peerRkey });
      }
    }
  })().catch((e) => console.error('pong', e));
}

/**
 * The peer ops of the ack-clocked raw node:dgram baseline's receiving end (one sink at a time):
 * sinkOpen → { port, rcvbuf }, sinkClose → its stats. Spread into a servePeer table.
 */
export function rawSinkOps(RawDgramSink) {
  let sink;
  return {
    async sinkOpen() {
      await sink?.close();
      sink = await RawDgramSink.open('127.0.0.1');
      return { port: sink.port, rcvbuf: sink.rcvbuf };
    },
    async sinkClose() {
      const st = sink.stats();
      await sink.close();
      sink = undefined;
      return st;
    },
  };
}
