// A qp.connect that timed out leaves no connection behind: the QP goes to ERROR (as an aborted
// connect does), so the peer connecting late meets a QP that is gone — it does not become RTS
// behind the caller's back, and the peer cannot write into its memory. Reset, it connects again.
// Before: the QP stayed in RTR after ERR_TIMEOUT, the late peer took it to RTS ('established'
// after the failure) and its Write landed; RESET from RTR was refused, so it could not retry.
import { describe, type ExpectStatic, it } from 'vitest';
import { Access, ErrorCode, QpState, WcStatus, type Device, type DeviceEvent } from '../../src/index.js';
import { rcSide } from './helpers.js';

// The transports run at once (each case has devices of its own and asserts with its context's
// expect): most of a case is its deadlines.
describe.concurrent('a connect that timed out', () => {
  it.for(['udp', 'tcp', 'inproc'] as const)('over %s: leaves the QP in ERROR: the late peer does not connect to it or write into it; reset, it connects', { timeout: 20_000 }, async (transport, { expect }) => {
    const devs: Device[] = [];
    try {
      await connectTimedOut(expect, transport, devs);
    } finally {
      for (const d of devs) if (!d.closed) await d.close();
    }
  });
});

async function connectTimedOut(expect: ExpectStatic, transport: 'udp' | 'tcp' | 'inproc', devs: Device[]): Promise<void> {
  const a = await rcSide(transport, devs);
  const b = await rcSide(transport, devs);
  const evs: DeviceEvent[] = [];
  a.dev.on('event', (e) => evs.push(e));
  const mem = a.pd.regMr(4096, Access.LocalWrite | Access.RemoteWrite);
  await expect(a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn, timeoutMs: 300 })).rejects.toMatchObject({ code: ErrorCode.Timeout });
  expect(a.qp.state).toBe(QpState.Error);
  // The peer comes late: it does not meet a connected QP.
  const late = await b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn, timeoutMs: 1500 }).then(() => 'connected', (e: { code?: string }) => e.code);
  if (late === 'connected') {
    const src = b.pd.regMr(8, Access.LocalWrite);
    src.buffer.fill(9);
    const wc = await b.qp.write({ sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], remoteAddr: mem.addr, rkey: mem.rkey }).catch((e: { status?: number }) => e);
    expect((wc as { status?: number }).status).not.toBe(WcStatus.Success);
  }
  expect(mem.buffer.every((x) => x === 0)).toBe(true);
  expect(a.qp.state).toBe(QpState.Error);
  expect(evs.some((e) => e.type === 'established')).toBe(false);
  // Reset, both connect afresh.
  a.qp.modify({ state: QpState.Reset });
  b.qp.modify({ state: QpState.Error });
  b.qp.modify({ state: QpState.Reset });
  await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
  expect(a.qp.state).toBe(QpState.Rts);
}
