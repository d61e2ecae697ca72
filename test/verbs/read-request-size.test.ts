// A read to a sabre peer is one ReadRequestV naming every source and sink: one control message,
// never cut across segments. One that a segment of the link cannot carry is refused at post
// with ERR_LIMIT_EXCEEDED (nothing sent, the QP goes on); before, the udp link could not carry
// it and gave the whole peer up, failing every QP connected to it. The engine's own guard is
// tested in test/nic/oversize-request.test.ts.
import { describe, expect, it } from 'vitest';
import { Opcode, QpState, WcStatus } from '../../src/index.js';
import { ALL, closeAll, fill, pair, take } from './helpers.js';

describe('read request size', () => {
  it('udp, MTU 1472: the largest read whose request fits a datagram works, one entry more is refused at post, the QP stays RTS', async () => {
    const [a, b] = await pair({ qp: { maxSge: 256 }, device: { transport: 'udp', host: '127.0.0.1', port: 0, mtu: 1472 } });
    const src = b.pd.regMr(8192, ALL);
    fill(src.buffer, 7);
    const sink = a.pd.regMr(8192, ALL);
    const remote = (n: number) => Array.from({ length: n }, (_, i) => ({ addr: src.addr + i * 16, length: 8, rkey: src.rkey }));
    const read = (wrId: number, n: number) =>
      a.qp.postSend({ wrId, opcode: Opcode.RdmaRead, sgList: [{ addr: sink.addr, length: n * 8, lkey: sink.lkey }], remoteSgList: remote(n) });
    // Largest first: every refusal throws before anything is sent.
    let n = 256;
    for (; n > 0; n--) {
      try {
        read(n, n);
        break;
      } catch (e) {
        expect(e).toMatchObject({ code: 'ERR_LIMIT_EXCEEDED' });
      }
    }
    // The boundary is the datagram: 8 + 16 × (sources + sinks) bytes of request; the one
    // refused next needs nearly all of a 1472-byte datagram (less sabre's and the RDMA headers).
    expect(n).toBeGreaterThan(50);
    expect(n).toBeLessThan(256);
    expect(8 + (n + 1) * 16).toBeLessThanOrEqual(1472);
    expect(8 + (n + 2) * 16).toBeGreaterThan(1472 - 200);
    expect((await take(a.cq, 1))[0]).toMatchObject({ wrId: n, status: WcStatus.Success, byteLen: n * 8 });
    for (let i = 0; i < n; i++) expect(Buffer.from(sink.buffer.subarray(i * 8, i * 8 + 8)).equals(Buffer.from(src.buffer.subarray(i * 16, i * 16 + 8)))).toBe(true);
    expect(a.qp.state).toBe(QpState.Rts);
    await closeAll(a, b);
  });

  it('tcp: a read naming 1024 sources (a 16 KiB request) is carried and completes', async () => {
    const [a, b] = await pair({ qp: { maxSge: 1024 }, device: { transport: 'tcp', host: '127.0.0.1', port: 0 } });
    const src = b.pd.regMr(1 << 15, ALL);
    fill(src.buffer, 9);
    const sink = a.pd.regMr(1 << 15, ALL);
    const remote = Array.from({ length: 1024 }, (_, i) => ({ addr: src.addr + i * 32, length: 4, rkey: src.rkey }));
    a.qp.postSend({ wrId: 1, opcode: Opcode.RdmaRead, sgList: [{ addr: sink.addr, length: 4096, lkey: sink.lkey }], remoteSgList: remote });
    expect((await take(a.cq, 1))[0]).toMatchObject({ wrId: 1, status: WcStatus.Success, byteLen: 4096 });
    expect(Buffer.from(sink.buffer.subarray(4092, 4096)).equals(Buffer.from(src.buffer.subarray(1023 * 32, 1023 * 32 + 4)))).toBe(true);
    await closeAll(a, b);
  });
});
