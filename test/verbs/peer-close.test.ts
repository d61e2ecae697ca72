// A graceful close is not a crash: when a peer destroys its QP or closes its device, the QP
// connected to it hears so within a round trip (the close notice, a Terminate that means
// 'closed'), on every transport — event 'disconnected' with cause 'closed', outstanding work
// WrFlushErr — instead of finding the peer gone seconds later by retries or keepalive. Over
// udp the notice travels inside the validated transport context: an off-path forgery of it
// (a datagram without the context's ids) is dropped and counted, and the QP stays up.
import dgram from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { Access, Opcode, openDevice, QpState, WcStatus, type Device, type DeviceEvent } from '../../src/index.js';
import { ctlFrame } from '../../src/rdmap/segmenter.js';
import { frameBytes } from '../../src/transport/udp/frame-codec.js';
import { encodeTerminate, Qn, RdmapOpcode } from '../../src/wire/rdmap.js';
import { TERM } from '../../src/wire/terminate.js';
import { seal } from '../transport/udp/raw-peer.js';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { UdpLink } from '../../src/transport/udp/link.js';
import { UdpType, decodeUdpHdr } from '../../src/wire/udp.js';
import { Device as VerbsDevice } from '../../src/verbs/device.js';
import { rcSide } from './helpers.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) if (!d.closed) await d.close();
});

/** Well under udp's keepalive verdict (7.5 s by default) and its QP timeout (8 s). */
const PROMPT_MS = 2000;


async function connected(transport: 'udp' | 'tcp' | 'inproc', qpOpts: { rnrTimeoutMs?: number } = {}) {
  const a = await rcSide(transport, devs, qpOpts);
  const b = await rcSide(transport, devs, qpOpts);
  await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
  // One exchange first: what the peer sent before closing takes effect.
  const got = b.qp.recv({ sgList: [{ addr: b.mr.addr, length: 64, lkey: b.mr.lkey }] });
  expect((await a.qp.send({ sgList: [{ addr: a.mr.addr, length: 64, lkey: a.mr.lkey }] })).status).toBe(WcStatus.Success);
  await got;
  return { a, b };
}

function nextDisconnect(d: Device, ms: number): Promise<DeviceEvent[]> {
  const evs: DeviceEvent[] = [];
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      d.off('event', on);
      reject(new Error(`no disconnect within ${ms} ms; events: ${JSON.stringify(evs)}`));
    }, ms);
    const on = (ev: DeviceEvent): void => {
      evs.push(ev);
      if (ev.type === 'disconnected') {
        clearTimeout(t);
        d.off('event', on);
        resolve(evs);
      }
    };
    d.on('event', on);
  });
}

describe.each(['udp', 'tcp', 'inproc'] as const)('a peer that closes on purpose, over %s', (transport) => {
  for (const how of ['qp.destroy()', 'dev.close()'] as const) {
    it(`${how}: disconnected with cause 'closed' at once, outstanding work flushed`, async () => {
      const { a, b } = await connected(transport);
      const pending = a.qp.recv({ sgList: [{ addr: a.mr.addr, length: 64, lkey: a.mr.lkey }] }).catch((e: { status?: number }) => e);
      const down = nextDisconnect(a.dev, PROMPT_MS);
      if (how === 'qp.destroy()') b.qp.destroy();
      await b.dev.close();
      const evs = await down;
      expect(evs.find((e) => e.type === 'disconnected')).toMatchObject({ qpn: a.qp.qpn, cause: 'closed' });
      // Not a crash: no qp-fatal.
      expect(evs.some((e) => e.type === 'qp-fatal')).toBe(false);
      expect((await pending as { status?: number }).status).toBe(WcStatus.WrFlushErr);
      expect(a.qp.state).toBe(QpState.Error);
    });
  }
});

describe.each(['udp', 'tcp', 'inproc'] as const)('a peer that closes while its Send waits for our receive (RNR), over %s', (transport) => {
  // The notice travels in order behind the closer's Send, which waits here for a receive we
  // never post: the closer will not send it again, so the notice must not wait for its turn.
  // Before: udp and inproc never heard (the QP stayed RTS; udp found out by keepalive seconds
  // later, as 'lost'), tcp heard 'lost' from the connection's end.
  for (const how of ['qp.destroy()', 'dev.close()'] as const) {
    it(`${how}: disconnected with cause 'closed' at once`, async () => {
      // RNR retries 1 s apart: the closer's Send is still retrying when it closes.
      const { a, b } = await connected(transport, { rnrTimeoutMs: 1000 });
      b.qp.postSend({ wrId: 9, opcode: Opcode.Send, sgList: [{ addr: b.mr.addr, length: 8, lkey: b.mr.lkey }] });
      // Long enough for the Send to arrive and find no receive (its RNR NAK goes back).
      await new Promise((r) => setTimeout(r, 100));
      const down = nextDisconnect(a.dev, PROMPT_MS);
      if (how === 'qp.destroy()') b.qp.destroy();
      await b.dev.close();
      const evs = await down;
      expect(evs.find((e) => e.type === 'disconnected')).toMatchObject({ qpn: a.qp.qpn, cause: 'closed' });
      expect(evs.some((e) => e.type === 'qp-fatal')).toBe(false);
      expect(a.qp.state).toBe(QpState.Error);
    });
  }
});

describe.each(['udp', 'inproc'] as const)('a peer whose QP already failed on its own, then closes, over %s', (transport) => {
  // Its Send ran out of RNR retries (we never post a receive): its QP is in ERROR, ours still
  // RTS. Its close still says so, as rdma_disconnect sends a DREQ whatever the QP's state.
  // Before: no notice from a QP in ERROR — udp heard by keepalive seconds later ('lost'),
  // inproc never. (tcp: the failed QP's connection closes with it; we hear 'lost' at once.)
  it('dev.close(): disconnected with cause \'closed\' at once', async () => {
    const { a, b } = await connected(transport, { rnrTimeoutMs: 1 });
    const failed = b.qp.send({ sgList: [{ addr: b.mr.addr, length: 8, lkey: b.mr.lkey }] }).catch((e: { status?: number }) => e.status);
    expect(await failed).toBe(WcStatus.RnrRetryExcErr);
    expect(b.qp.state).toBe(QpState.Error);
    expect(a.qp.state).toBe(QpState.Rts);
    const down = nextDisconnect(a.dev, PROMPT_MS);
    await b.dev.close();
    const evs = await down;
    expect(evs.find((e) => e.type === 'disconnected')).toMatchObject({ qpn: a.qp.qpn, cause: 'closed' });
  });
});

describe('a close notice over udp that is lost', () => {
  // The notice is a DATA payload of the transport context: the closing device keeps its
  // context up until the peer has acknowledged what it sent (bounded), so a lost notice goes
  // again — it is not given up with the socket. Both devices run inline (the data path on this
  // thread), and the receiver drops the first DATA datagram that comes after the destroy.
  for (const how of ['qp.destroy()', 'dev.close()'] as const) {
    it(`${how}: the first notice datagram dropped, the peer still hears 'closed' promptly`, async () => {
      let dropping = false;
      let dropped = 0;
      const side = async (filter?: (d: Uint8Array) => boolean) => {
        const mem = await DeviceMemory.create({ maximumBytes: 64 << 20, workerSlots: 0 });
        const link = await UdpLink.open({ host: '127.0.0.1', port: 0, ...(filter ? { rxFilter: filter } : {}) });
        const dev = new VerbsDevice(mem, link, { mss: link.mss });
        devs.push(dev);
        const pd = dev.allocPd();
        const cq = dev.createCq({ depth: 64 });
        const qp = pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 8, maxRecvWr: 8, maxSge: 1 });
        return { dev, qp, mr: pd.regMr(4096, Access.LocalWrite) };
      };
      const a = await side((d) => {
        if (!dropping) return true;
        const h = decodeUdpHdr(d, 0, d.length);
        if (!h.ok || h.value.type !== UdpType.Data) return true;
        dropping = false;
        dropped++;
        return false;
      });
      const b = await side();
      await Promise.all([a.qp.connect({ address: b.dev.address, qpn: b.qp.qpn }), b.qp.connect({ address: a.dev.address, qpn: a.qp.qpn })]);
      const got = b.qp.recv({ sgList: [{ addr: b.mr.addr, length: 64, lkey: b.mr.lkey }] });
      expect((await a.qp.send({ sgList: [{ addr: a.mr.addr, length: 64, lkey: a.mr.lkey }] })).status).toBe(WcStatus.Success);
      await got;
      const pending = a.qp.recv({ sgList: [{ addr: a.mr.addr, length: 64, lkey: a.mr.lkey }] }).catch((e: { status?: number }) => e);
      const down = nextDisconnect(a.dev, PROMPT_MS);
      dropping = true;
      if (how === 'qp.destroy()') b.qp.destroy();
      await b.dev.close();
      const evs = await down;
      expect(dropped).toBe(1);
      expect(evs.find((e) => e.type === 'disconnected')).toMatchObject({ qpn: a.qp.qpn, cause: 'closed' });
      expect((await pending as { status?: number }).status).toBe(WcStatus.WrFlushErr);
    });
  }
});

describe('a forged close notice over udp', () => {
  it('without the context ids is dropped and counted; the QP stays up', async () => {
    const { a, b } = await connected('udp');
    const before = a.dev.stats().link!;
    const frame = ctlFrame({
      srcQpn: b.qp.qpn, dstQpn: a.qp.qpn, ssn: 2, opcode: RdmapOpcode.Terminate, qn: Qn.Terminate, msn: 1, bodyLen: 4,
      body: (buf, o) => encodeTerminate({ ...TERM.peerClosed, m: false, d: false }, buf, o),
    });
    const payload = frameBytes(frame);
    const s = dgram.createSocket('udp4');
    await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
    const to = a.dev.address as { host: string; port: number };
    // An off-path attacker guesses context ids (and PSNs); it sends from anywhere.
    for (let i = 0; i < 16; i++) {
      const bytes = seal({ srcCtx: 0x1000 + i, dstCtx: (0x9e3779b9 * (i + 1)) >>> 0, psn: i, dstQpn: a.qp.qpn, srcQpn: b.qp.qpn }, payload);
      await new Promise<void>((r) => s.send(bytes, to.port, to.host, () => r()));
    }
    await new Promise((r) => setTimeout(r, 100));
    s.close();
    const after = a.dev.stats().link!;
    const refused = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
    expect(refused('unknownContext') + refused('stale') + refused('unvalidated')).toBeGreaterThanOrEqual(16);
    expect(a.qp.state).toBe(QpState.Rts);
    // Still carries traffic.
    const got = b.qp.recv({ sgList: [{ addr: b.mr.addr, length: 64, lkey: b.mr.lkey }] });
    expect((await a.qp.send({ sgList: [{ addr: a.mr.addr, length: 64, lkey: a.mr.lkey }] })).status).toBe(WcStatus.Success);
    expect((await got).status).toBe(WcStatus.Success);
  });
});
