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
