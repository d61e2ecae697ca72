// A REP or REJ was matched to our request by its 48-bit random id alone; where it came from was
// not compared with where the REQ went. Anyone who learns an id (sees one REQ on the path, a log
// line) could settle that connect from any address: a REP pointing our QP at a QPN of its
// choosing, or a REJ failing it. Answers now count only from where the REQ went — the address
// given to connect (a relay's or NAT's: answers come back from it), a host name's addresses.
import { afterAll, describe, expect, it } from 'vitest';
import { type CmAction, CmCore } from '../../src/cm/core.js';
import { pollAll } from '../../src/core/sans-io.js';
import { connect, type Device, listen, openDevice } from '../../src/index.js';

const enc = new TextEncoder();
const A = { transport: 'udp', host: '127.0.0.1', port: 4791 } as const;
const EVIL = { transport: 'udp', host: '127.0.0.9', port: 4791 } as const;
const settled = (c: CmCore): Array<Extract<CmAction, { kind: 'settled' }>> => pollAll(c).filter((a): a is Extract<CmAction, { kind: 'settled' }> => a.kind === 'settled');

describe('an answer from another address than the one dialled', () => {
  it('a REP or REJ with the right id from another host, or another port of the host, settles nothing; the dialled one does', () => {
    const c = new CmCore();
    const id = c.request(A, 7, 100, undefined, 5000, 0);
    pollAll(c);
    c.handleMessage(enc.encode(JSON.stringify({ t: 'rep', id, qpn: 666 })), EVIL, 1);
    c.handleMessage(enc.encode(JSON.stringify({ t: 'rej', id, reason: 'forged' })), { ...A, port: 4792 }, 1);
    expect(settled(c)).toEqual([]);
    expect(c.dropped).toBe(2);
    // The listener's answer, from its address written IPv4-mapped (a dual-stack socket's view).
    c.handleMessage(enc.encode(JSON.stringify({ t: 'rep', id, qpn: 55 })), { ...A, host: '::ffff:127.0.0.1' }, 2);
    expect(settled(c).map((s) => s.value?.qpn)).toEqual([55]);
  });

  it('a host name: answers from what it resolved to settle', () => {
    const c = new CmCore();
    const id = c.request({ transport: 'udp', host: 'listener.example', port: 4791 }, 7, 100, undefined, 5000, 0, false, ['127.0.0.1', '::1']);
    pollAll(c);
    c.handleMessage(enc.encode(JSON.stringify({ t: 'rep', id, qpn: 66 })), EVIL, 1);
    expect(settled(c)).toEqual([]);
    c.handleMessage(enc.encode(JSON.stringify({ t: 'rep', id, qpn: 55 })), { transport: 'udp', host: '::1', port: 4791 }, 2);
    expect(settled(c).map((s) => s.value?.qpn)).toEqual([55]);
  });

  describe('real sockets', () => {
    const devs: Device[] = [];
    afterAll(async () => {
      for (const d of devs) await d.close();
    });
    it('connect to a listener named by host name (localhost) still connects', async () => {
      const srv = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
      const client = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
      devs.push(srv, client);
      const l = listen(srv, { service: 83 });
      try {
        const qp = await connect(client, { ...srv.address, host: 'localhost' }, { service: 83, timeoutMs: 8000 });
        (await l.accept(5000)).destroy();
        qp.destroy();
      } finally {
        l.close();
      }
    }, 20_000);
  });
});
