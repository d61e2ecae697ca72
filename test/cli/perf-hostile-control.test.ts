// `sabre perf --server` against hostile control connections (found by an audit; each case seen
// failing first). The control port is open to whoever reaches it: a line that is not a call
// ended the server with a TypeError (`null`); the first connection had the server for good, with
// no deadline for its hello, so a silent client held it and a port probe that closed ended it;
// pipelined hellos each opened a device (NIC thread, up to 32 MiB) and the leaked ones kept the
// process alive after bye; a close while the hello's device was opening leaked it. Now a
// connection has the server only once its hello is served, it has HELLO_MS (10 s) to say it,
// lines are served one at a time, and a second hello is refused.
import { describe, expect, it, type OnTestFinishedHandler } from 'vitest';
import { sabreAsync } from './helpers.js';
import { exitWithin, hello, helloed, kill, rawControl, sleep, startPerfServer, threads } from './perf-hostile-helpers.js';

// Each test has a server of its own (its own process and port) and mostly waits on sockets and
// deadlines (one waits out the 10 s hello deadline), so the tests of a describe run at once; each
// kills its own server when it finishes.
async function server(onTestFinished: (fn: OnTestFinishedHandler) => void) {
  const s = await startPerfServer('write_bw', 'tcp', []);
  onTestFinished(async () => void (await kill(s.bg)));
  return s;
}

const clientRun = (port: number) => sabreAsync(['perf', 'write_bw', '127.0.0.1', '-p', String(port), '--transport', 'tcp', '-s', '4096', '-n', '20'], 40_000);

describe.concurrent('perf server: lines that are not calls', () => {
  it('`null`, a number, an array, a call without a method: each drops that connection; the server lives and serves a real client', async ({ onTestFinished }) => {
    const s = await server(onTestFinished);
    for (const line of ['null', '7', '[1,2]', '{"id":1}', '{"id":"x","method":"hello"}', '{"id":1,"method":5}']) {
      const c = await rawControl(s.port);
      c.send(line + '\n');
      expect(await c.closedWithin(5000), line).toBe(true);
    }
    expect(await exitWithin(s.bg, 200)).toBe('alive');
    expect(s.bg.err()).not.toMatch(/TypeError|at .*\.js:\d+/);
    const r = await clientRun(s.port);
    expect(r.code, r.stderr).toBe(0);
    expect(await exitWithin(s.bg, 10_000)).toBe(0);
  }, 60_000);

  it('a first call that is not hello is answered "the first call must be hello" and the connection closed', async ({ onTestFinished }) => {
    const s = await server(onTestFinished);
    const c = await rawControl(s.port);
    c.call(1, 'baselineOpen', { transport: 'tcp', mode: 'rr', reqBytes: 1, respBytes: 1 });
    expect((await c.answer(1, 5000))?.error).toBe('the first call must be hello');
    expect(await c.closedWithin(5000)).toBe(true);
    expect(await exitWithin(s.bg, 200)).toBe('alive');
  }, 30_000);
});

describe.concurrent('perf server: who has the server', () => {
  it('a silent connection is dropped after the hello deadline, and a real client is served meanwhile', async ({ onTestFinished }) => {
    const s = await server(onTestFinished);
    const silent = await rawControl(s.port);
    const r = await clientRun(s.port);
    expect(r.code, r.stderr).toBe(0);
    expect(await exitWithin(s.bg, 10_000)).toBe(0);
    // The server is gone with its client; the silent connection went with it at the latest.
    expect(await silent.closedWithin(15_000)).toBe(true);
  }, 60_000);

  it('a connection that says nothing is closed within the deadline (10 s), the server still waiting', async ({ onTestFinished }) => {
    const s = await server(onTestFinished);
    const silent = await rawControl(s.port);
    const t0 = Date.now();
    expect(await silent.closedWithin(20_000)).toBe(true);
    expect(Date.now() - t0).toBeGreaterThan(8_000);
    expect(await exitWithin(s.bg, 200)).toBe('alive');
  }, 40_000);

  it('an HTTP probe and a connect-and-close do not end the server; the real client comes after them', async ({ onTestFinished }) => {
    const s = await server(onTestFinished);
    const probe = await rawControl(s.port);
    probe.send('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(await probe.closedWithin(5000)).toBe(true);
    const scan = await rawControl(s.port);
    scan.sock.destroy();
    await sleep(300);
    expect(await exitWithin(s.bg, 500)).toBe('alive');
    const r = await clientRun(s.port);
    expect(r.code, r.stderr).toBe(0);
    expect(await exitWithin(s.bg, 10_000)).toBe(0);
  }, 60_000);

  it('connections waiting for their hello are capped: more are closed at once', async ({ onTestFinished }) => {
    const s = await server(onTestFinished);
    const held = [];
    for (let i = 0; i < 8; i++) held.push(await rawControl(s.port));
    const extra = await rawControl(s.port);
    expect(await extra.closedWithin(5000)).toBe(true);
    expect(held.filter((c) => !c.sock.destroyed).length).toBe(8);
    for (const c of held) c.sock.destroy();
    await sleep(300);
    // The held ones gone, a client is served.
    const c = await helloed(s.port);
    c.call(2, 'bye');
    expect((await c.answer(2))?.result).toBe(null);
    c.sock.end();
    expect(await exitWithin(s.bg, 10_000)).toBe(0);
  }, 60_000);

  it('once a hello is served, other connections are refused', async ({ onTestFinished }) => {
    const s = await server(onTestFinished);
    const c = await helloed(s.port);
    const late = await rawControl(s.port);
    expect(await late.closedWithin(5000)).toBe(true);
    c.call(2, 'cpu');
    expect((await c.answer(2))?.result).toBeTruthy();
  }, 30_000);
});

describe.concurrent('perf server: hellos', () => {
  it('pipelined hellos in one write: one device (the second hello refused), and bye then close ends the server with 0', async ({ onTestFinished }) => {
    const s = await server(onTestFinished);
    const th0 = threads(s.pid);
    const c = await rawControl(s.port);
    let lines = '';
    for (let i = 1; i <= 6; i++) lines += JSON.stringify({ id: i, method: 'hello', params: hello({ sizes: [1 << 20], txDepth: 64 }) }) + '\n';
    c.send(lines);
    for (let i = 1; i <= 6; i++) await c.answer(i, 20_000);
    const ok = [...c.answers.values()].filter((a) => a.result !== undefined);
    expect(ok.length).toBe(1);
    expect(c.answers.get(2)?.error).toBe('hello twice');
    // One device's NIC thread at most (the first hello's), not six.
    expect(threads(s.pid) - th0).toBeLessThanOrEqual(2);
    c.call(10, 'bye');
    await c.answer(10);
    c.sock.end();
    expect(await exitWithin(s.bg, 10_000)).toBe(0);
  }, 60_000);

  it('hello, bye and close in one write (the close before the device is open): the device is closed and the server exits 0', async ({ onTestFinished }) => {
    const s = await server(onTestFinished);
    const c = await rawControl(s.port);
    c.send(JSON.stringify({ id: 1, method: 'hello', params: hello() }) + '\n' + JSON.stringify({ id: 2, method: 'bye' }) + '\n');
    c.sock.end();
    expect(await exitWithin(s.bg, 10_000)).toBe(0);
  }, 30_000);

  it('hello then a reset at once: the server does not hang on the opening device (exits 1: the client went away)', async ({ onTestFinished }) => {
    const s = await server(onTestFinished);
    const c = await rawControl(s.port);
    c.call(1, 'hello', hello());
    await sleep(5);
    c.sock.resetAndDestroy();
    expect(await exitWithin(s.bg, 10_000)).not.toBe('alive');
  }, 30_000);

  it('a hello the server refuses (another test) is answered, that connection closed, and the server waits on', async ({ onTestFinished }) => {
    const s = await server(onTestFinished);
    const c = await rawControl(s.port);
    c.call(1, 'hello', hello({ test: 'read_bw', verb: 'read' }));
    expect((await c.answer(1))?.error).toMatch(/this server runs write_bw; the client asked for read_bw/);
    expect(await c.closedWithin(5000)).toBe(true);
    expect(await exitWithin(s.bg, 300)).toBe('alive');
    const r = await clientRun(s.port);
    expect(r.code, r.stderr).toBe(0);
  }, 60_000);
});

describe.concurrent('perf control framing', () => {
  it('two ~1000 KiB lines in one write (each under MAX_LINE, 1 MiB) are both served', async ({ onTestFinished }) => {
    const s = await server(onTestFinished);
    const c = await helloed(s.port);
    const big = 'x'.repeat(1000 * 1024);
    c.send(JSON.stringify({ id: 2, method: 'cpu', params: big }) + '\n' + JSON.stringify({ id: 3, method: 'cpu', params: big }) + '\n');
    expect((await c.answer(2, 10_000))?.result).toBeTruthy();
    expect((await c.answer(3, 10_000))?.result).toBeTruthy();
  }, 30_000);

  it('an unterminated line over MAX_LINE drops the connection', async ({ onTestFinished }) => {
    const s = await server(onTestFinished);
    const c = await helloed(s.port);
    c.send('{"id":2,"method":"cpu","params":"' + 'x'.repeat((1 << 20) + 10));
    expect(await c.closedWithin(10_000)).toBe(true);
  }, 30_000);
});
